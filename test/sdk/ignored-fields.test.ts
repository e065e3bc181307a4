import { expect } from 'chai';
import { createClient, type Client, type ClientLogger, type RateLimitClient, type RequestContext } from '@rl/client';
import { createEmbeddedClient } from '../../src/embedded/index.js';
import type { TestServer } from '../support/http.js';
import { HTTP_PATHS, serveDecisions } from '../support/http-listeners.js';
import { makePolicy } from '../support/policies.js';

/**
 * The SDK says when the service ignored a request field (`metadata.ignored_fields`, usually a typo):
 * once per name, through its `logger` option (default console.warn; `false`: nowhere). The embedded
 * client does the same.
 */

const POLICIES = [makePolicy({ policy_id: 'per-key', scope: { api_key: '*' }, algorithm: { type: 'fixed_window', limit: 100, window: '1m' } })];

/** A logger that keeps what it is told. */
function recorder(): ClientLogger & { messages: string[] } {
  const messages: string[] = [];
  return { messages, warn: (message) => messages.push(message) };
}

/** A RequestContext with fields the type does not have, as plain JavaScript (or a cast) would send. */
const typo = (fields: Record<string, unknown>) => fields as RequestContext;

async function exercise(client: RateLimitClient): Promise<void> {
  await client.check(typo({ api_kye: 'k1' }));
  await client.check(typo({ api_kye: 'k2', usr_id: 'u' }));
  await client.peek(typo({ api_kye: 'k3' }));
  await client.refund(typo({ usr_id: 'u', quantity: 1 }));
  await client.check({ api_key: 'k1' });
}

describe('SDK: warnings about ignored request fields', function () {
  this.timeout(15_000);
  let server: TestServer;
  const clients: Client[] = [];
  before(async () => (server = await serveDecisions(HTTP_PATHS[1][1], POLICIES, 65536)));
  after(() => server.close());
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });
  const client = (options: Partial<Parameters<typeof createClient>[0]>) => {
    const c = createClient({ url: server.url, timeoutMs: 2000, failMode: 'throw', ...options });
    clients.push(c);
    return c;
  };

  it('warns once per ignored name, naming it, through the logger option', async () => {
    const logger = recorder();
    const c = client({ logger });
    await exercise(c);
    expect(logger.messages).to.have.length(2);
    expect(logger.messages[0]).to.contain('"api_kye"').and.contain('not a RequestContext field');
    expect(logger.messages[1]).to.contain('"usr_id"');
    // The decision itself still carries the names.
    expect((await c.check(typo({ api_kye: 'k4' }))).metadata.ignored_fields).to.equal('api_kye');
    expect(logger.messages).to.have.length(2);
  });

  it('defaults to console.warn, and logger: false silences it', async () => {
    const original = console.warn;
    const seen: string[] = [];
    console.warn = (message: string) => seen.push(message);
    try {
      await exercise(client({}));
      expect(seen).to.have.length(2);
      await exercise(client({ logger: false }));
      expect(seen).to.have.length(2);
    } finally {
      console.warn = original;
    }
  });

  it('the embedded client warns the same way', async () => {
    const logger = recorder();
    const embedded = await createEmbeddedClient({ policies: POLICIES, logger });
    try {
      await exercise(embedded);
      expect(logger.messages.map((m) => /"(\w+)"/.exec(m)![1])).to.deep.equal(['api_kye', 'usr_id']);
    } finally {
      await embedded.close();
    }
  });
});
