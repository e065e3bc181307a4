import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { shouldRateLimit, unitLookup, type EnvoyRateLimitRequest, type EnvoyRateLimitResponse } from '../../src/grpc/envoy.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { parsePolicyDocument } from '../../src/policy/policy-file.js';

/**
 * The answers docs/envoy.md shows (a 429 and a 200 behind examples/envoy/envoy.yaml with
 * examples/policies.json) are what the service answers for the scenario the text describes.
 */
describe('docs/envoy.md: the example answers are the service\'s own', () => {
  const doc = readFileSync(new URL('../../docs/envoy.md', import.meta.url), 'utf8');
  const examples = [...doc.matchAll(/```http\n([\s\S]*?)```/g)].map((m) => m[1]);
  const policies = parsePolicyDocument('examples', JSON.parse(readFileSync(new URL('../../examples/policies.json', import.meta.url), 'utf8')));

  function setup(startMs: number, headerDescriptors: 'limiting' | 'all' = 'limiting') {
    const clock = { now: startMs };
    const matcher = new LiveMatcher(policies);
    const counters = new MemoryCounterStore({ now: () => clock.now, sweepIntervalMs: 0 });
    const decisions = new DecisionService({ policies: matcher, counters, keyPrefix: 'doc:', now: () => clock.now });
    const ask = (request: EnvoyRateLimitRequest) => shouldRateLimit(decisions, request, { unitOf: unitLookup(matcher), headers: 'ietf', headerDescriptors });
    return { clock, ask, close: () => counters.close() };
  }

  /** The example as Envoy would send it: status line, header lines (lower-case names), then the body. */
  function asHttp(status: string, answer: EnvoyRateLimitResponse): string {
    const lines = [status, ...answer.response_headers_to_add.map(({ key, value }) => `${key.toLowerCase()}: ${value}`)];
    return lines.join('\n');
  }

  const entries = (pairs: Record<string, string>) => Object.entries(pairs).map(([key, value]) => ({ key, value }));

  it('the 429 of a sixth login attempt within 15 minutes', async () => {
    const { clock, ask, close } = setup(Date.UTC(2026, 0, 1, 12, 0, 0));
    try {
      const login = { domain: 'edge', descriptors: [{ entries: entries({ org_id: 'acme', signal_type: 'auth', endpoint: '/login', remote_address: '203.0.113.7' }) }] };
      for (let i = 0; i < 5; i++) {
        expect((await ask(login)).overall_code).to.equal('OK');
        clock.now += 10_000;
      }
      clock.now += 10_000; // the sixth at 60 s
      const over = await ask(login);
      expect(over.overall_code).to.equal('OVER_LIMIT');
      const shown = examples.find((e) => e.startsWith('HTTP/1.1 429'));
      expect(shown, 'a 429 example').to.be.a('string');
      const [head, body] = shown!.split('\n\n');
      expect(head).to.equal(asHttp('HTTP/1.1 429 Too Many Requests', over));
      expect(JSON.parse(body)).to.deep.equal(JSON.parse(over.raw_body!.toString('utf8')));
    } finally {
      await close();
    }
  });

  const root = {
    domain: 'edge',
    descriptors: [
      { entries: entries({ org_id: 'acme', signal_type: 'http', user_id: 'u-1' }) },
      { entries: entries({ signal_type: 'http', remote_address: '203.0.113.7' }) },
    ],
  };
  const twoHundreds = () => examples.filter((e) => e.startsWith('HTTP/1.1 200'));

  it('the 200 of a request with two descriptors carries the headers of the one closest to its limit', async () => {
    const { ask, close } = setup(Date.UTC(2026, 0, 1, 12, 5, 18, 300));
    try {
      const ok = await ask(root);
      expect(ok.overall_code).to.equal('OK');
      const shown = twoHundreds()[0];
      expect(shown, 'a 200 example').to.be.a('string');
      expect(shown!.trimEnd()).to.equal(asHttp('HTTP/1.1 200 OK', ok));
      const metadata = Object.fromEntries(Object.entries(ok.dynamic_metadata!.fields).map(([k, v]) => [k, v.stringValue]));
      expect(metadata).to.deep.equal({
        policy_id: 'acme-api-per-user',
        action: 'allow',
        reason: 'within_limit',
        shadow_policy_id: 'acme-api-per-user-stricter-shadow',
        shadow_action: 'allow',
      });
      for (const [key, value] of Object.entries(metadata)) expect(doc, `docs name ${key}`).to.include(`\`${key}: ${value}\``);
    } finally {
      await close();
    }
  });

  it('with RL_ENVOY_HEADER_DESCRIPTORS=all the same 200 lists both descriptors, the limiting one first', async () => {
    const { ask, close } = setup(Date.UTC(2026, 0, 1, 12, 5, 18, 300), 'all');
    try {
      const shown = twoHundreds()[1];
      expect(shown, 'a second 200 example').to.be.a('string');
      expect(shown.trimEnd()).to.equal(asHttp('HTTP/1.1 200 OK', await ask(root)));
    } finally {
      await close();
    }
  });
});
