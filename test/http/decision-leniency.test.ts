import Router from '@koa/router';
import { expect } from 'chai';
import { startAgent, type RunningAgent } from '../../src/agent/agent.js';
import { loadAgentConfig } from '../../src/agent/config.js';
import { setLogLevel } from '../../src/util/log.js';
import { postJson, type TestServer } from '../support/http.js';
import { HTTP_PATHS, serveDecisions } from '../support/http-listeners.js';
import { makePolicy } from '../support/policies.js';
import { wholeServerSuite } from '../support/whole-server.js';

/**
 * Strict policies, visible leniency (README "Managing policies", "The request"), request side, through every HTTP way in: the Koa routes,
 * the decision fast path, and the sidecar (forwarding to a server). An empty body is a 400; an unknown
 * field is ignored and named in `metadata.ignored_fields`; HTTP method names compare case-insensitively.
 */

const POLICIES = [
  makePolicy({ policy_id: 'orders', scope: { endpoint: '/orders' }, algorithm: { type: 'fixed_window', limit: 100, window: '1m' } }),
  makePolicy({ policy_id: 'posts', scope: { endpoint: '/posts', method: 'post' }, algorithm: { type: 'fixed_window', limit: 2, window: '1m' } }),
  makePolicy({ policy_id: 'exports', scope: { job_type: 'export' }, algorithm: { type: 'concurrency', max_concurrency: 5 } }),
];
const OPERATIONS = ['check', 'acquire', 'release', 'refund'] as const;
/** A body each operation accepts (a refund must say how much). */
const bodyFor = (operation: (typeof OPERATIONS)[number], fields: Record<string, unknown>) => (operation === 'refund' ? { quantity: 1, ...fields } : fields);

interface Target {
  name: string;
  start(): Promise<TestServer>;
}

const TARGETS: Target[] = [
  ...HTTP_PATHS.map(([name, build]) => ({ name, start: () => serveDecisions(build, POLICIES, 4096) })),
  { name: 'sidecar (forwarding to the fast path)', start: startSidecar },
];

/** A sidecar in forward mode in front of a server (the fast path and Koa, with the policy list the sidecar syncs). */
async function startSidecar(): Promise<TestServer> {
  const [, build] = HTTP_PATHS[1];
  const policies = new Router({ prefix: '/rl/v1' });
  policies.get('/policies', (ctx) => {
    ctx.body = POLICIES;
  });
  const upstream = await serveDecisions((deps) => build({ ...deps, routers: [policies] }), POLICIES, 4096);
  let agent: RunningAgent;
  try {
    agent = await startAgent(loadAgentConfig({ RL_AGENT_LISTEN: '127.0.0.1:0', RL_UPSTREAM_HTTP: upstream.url, RL_DRAIN_SECS: '0' }));
  } catch (error) {
    await upstream.close();
    throw error;
  }
  return {
    url: `http://127.0.0.1:${agent.port}`,
    close: async () => {
      await agent.close();
      await upstream.close();
    },
  };
}

const EMPTY_MESSAGE = 'empty body: send `{}` for an empty context';

async function post(url: string, body: string | undefined, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'POST', body, headers });
  return { status: res.status, body: (await res.json()) as { error?: string; status?: number; metadata?: Record<string, string> } };
}

describe('decision requests: empty bodies and ignored fields, every HTTP path', function () {
  this.timeout(15_000);
  before(() => setLogLevel('silent'));
  after(() => setLogLevel('info'));

  for (const target of TARGETS) {
    describe(target.name, () => {
      let server: TestServer;
      beforeEach(async () => (server = await target.start()));
      afterEach(() => server.close());

      it('answers an empty or blank body with a 400 on check, acquire, release and refund', async () => {
        const empties: [string, string | undefined, Record<string, string>][] = [
          ['no body, no Content-Type', undefined, {}],
          ['JSON Content-Type, no body', '', { 'Content-Type': 'application/json' }],
          ['JSON Content-Type, blank body', ' \n', { 'Content-Type': 'application/json' }],
        ];
        for (const operation of OPERATIONS) {
          for (const [name, body, headers] of empties) {
            const res = await post(`${server.url}/rl/v1/${operation}`, body, headers);
            expect(res.status, `${operation}, ${name}`).to.equal(400);
            expect(res.body, `${operation}, ${name}`).to.deep.equal({ error: EMPTY_MESSAGE, status: 400 });
          }
        }
        // `{}` is the empty context, and fine.
        const empty = await postJson(`${server.url}/rl/v1/check`, {});
        expect(empty.status).to.equal(200);
        expect(empty.body.reason).to.equal('no_matching_policy');
      });

      it('names the ignored fields in metadata.ignored_fields, on every operation', async () => {
        for (const operation of OPERATIONS) {
          const res = await postJson(`${server.url}/rl/v1/${operation}`, bodyFor(operation, { api_kye: 'k', endpoint: '/none', method: 'POST' }));
          expect(res.status, operation).to.equal(200);
          expect(res.body.metadata, operation).to.deep.equal({ ignored_fields: 'api_kye' });
        }
      });

      it('names them beside what the deciding policy says, and only when there are some', async () => {
        const typo = await postJson(`${server.url}/rl/v1/check`, { endpoint: '/orders', usr_id: 'carol' });
        expect(typo.body).to.deep.include({ matched_policy_id: 'orders', reason: 'within_limit' });
        expect(typo.body.metadata).to.deep.equal({ ignored_fields: 'usr_id' });
        const acquired = await postJson(`${server.url}/rl/v1/acquire`, { job_type: 'export', request_id: 'j1', jobtype: 'x' });
        expect(acquired.body.metadata).to.deep.equal({ lease_id: 'j1', ignored_fields: 'jobtype' });
        const clean = await postJson(`${server.url}/rl/v1/check`, { endpoint: '/orders', user_id: 'carol', quantity: 1, tags: {} });
        expect(clean.body.metadata).to.deep.equal({});
      });

      it('compares HTTP method names case-insensitively: a `post` scope counts POST, Post and post on one counter', async () => {
        const reasons = [];
        for (const method of ['POST', 'post', 'Post']) {
          const res = await postJson(`${server.url}/rl/v1/check`, { endpoint: '/posts', method });
          expect(res.body.matched_policy_id, method).to.equal('posts');
          reasons.push(res.body.reason);
        }
        expect(reasons).to.deep.equal(['within_limit', 'within_limit', 'limit_exceeded']);
      });

      it('names at most 8, each cut at 64 characters', async () => {
        const long = 'x'.repeat(100);
        const body: Record<string, unknown> = { endpoint: '/orders', [long]: 1 };
        for (let i = 0; i < 10; i++) body[`extra_${i}`] = i;
        const res = await postJson(`${server.url}/rl/v1/check`, body);
        expect(res.body.metadata.ignored_fields).to.equal(['x'.repeat(64), ...Array.from({ length: 7 }, (_, i) => `extra_${i}`)].join(','));
      });
    });
  }
});

describe('rl_request_ignored_fields_total (the whole server)', function () {
  this.timeout(30_000);
  const whole = wholeServerSuite('rl-ignored-');

  it('counts every ignored field, with no per-name label', async () => {
    const { server, url } = await whole.start(POLICIES);
    try {
      const series = async () => (await (await fetch(`${url}/metrics`)).text()).split('\n').filter((l) => l.startsWith('rl_request_ignored_fields_total'));
      expect(await series()).to.deep.equal(['rl_request_ignored_fields_total 0']);
      await postJson(`${url}/rl/v1/check`, { endpoint: '/orders', a: 1, b: 2 });
      await postJson(`${url}/rl/v1/check`, { endpoint: '/orders', quantity: 0, c: 3 }); // a peek counts too
      await postJson(`${url}/rl/v1/refund`, { endpoint: '/orders', quantity: 1, d: 4 });
      await postJson(`${url}/rl/v1/check`, { endpoint: '/orders' });
      expect(await series()).to.deep.equal(['rl_request_ignored_fields_total 4']);
    } finally {
      await server.drain();
    }
  });
});
