import { expect } from 'chai';
import fc from 'fast-check';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { DECISION_JSON_FIELDS, LAYER_JSON_FIELDS, decisionJson } from '../../src/http/decision-fast-path.js';
import type { Decision, DecisionReason } from '../../src/model/decision.js';
import { parseRequestContext } from '../../src/model/request-context.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { makePolicy } from '../support/policies.js';

/** A Decision with its fields in the interface's order, as DecisionService builds them. */
const decisionArb: fc.Arbitrary<Decision> = fc.record({
  allowed: fc.boolean(),
  action: fc.string({ unit: 'binary' }),
  reason: fc.string({ unit: 'binary' }).map((s) => s as DecisionReason),
  matched_policy_id: fc.string({ unit: 'binary' }),
  remaining: fc.oneof(fc.integer(), fc.double()),
  retry_after: fc.oneof(fc.integer(), fc.double()),
  reset_after: fc.oneof(fc.nat(), fc.double()),
  limit: fc.oneof(fc.nat(), fc.constantFrom(Number.MAX_SAFE_INTEGER, Infinity, -0)),
  window: fc.oneof(fc.nat(), fc.double()),
  shadow_mode: fc.boolean(),
  metadata: fc.dictionary(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' })),
}).chain((d) =>
  fc.option(fc.array(fc.record({
    layer: fc.string({ unit: 'binary' }), policy_id: fc.string({ unit: 'binary' }), allowed: fc.boolean(), action: fc.string({ unit: 'binary' }), reason: fc.constant('within_limit' as DecisionReason),
    remaining: fc.oneof(fc.integer(), fc.double()), limit: fc.oneof(fc.nat(), fc.constantFrom(Number.MAX_SAFE_INTEGER, Infinity, -0)), window: fc.nat(), reset_after: fc.oneof(fc.nat(), fc.double()), retry_after: fc.nat(),
  }), { minLength: 2, maxLength: 3 }), { nil: undefined }).map((layers): Decision => (layers === undefined ? d : { ...d, layers })),
);

describe('decisionJson (the decision fast path answer body)', () => {
  it('writes exactly what JSON.stringify writes for any decision: quoting, escapes, non-finite numbers, metadata', () => {
    fc.assert(
      fc.property(decisionArb, (decision) => {
        expect(decisionJson(decision)).to.equal(JSON.stringify(decision));
      }),
      { numRuns: 2000 },
    );
  });

  it('writes every field of Decision, in the order DECISION_JSON_FIELDS lists', () => {
    const decision: Decision = {
      allowed: false, action: 'deny', reason: 'limit_exceeded', matched_policy_id: 'p "1"', remaining: 0, retry_after: 12,
      reset_after: 345, limit: 10, window: 60_000, shadow_mode: true, metadata: { shadow_policy_id: 's', shadow_action: 'deny' },
      layers: [{ layer: 'a', policy_id: 'p "1"', allowed: false, action: 'deny', reason: 'limit_exceeded', remaining: 0, limit: 10, window: 60_000, reset_after: 345, retry_after: 12 }],
    };
    expect(Object.keys(JSON.parse(decisionJson(decision)))).to.deep.equal(Object.keys(DECISION_JSON_FIELDS));
    expect(Object.keys(JSON.parse(decisionJson(decision)).layers[0])).to.deep.equal(Object.keys(LAYER_JSON_FIELDS));
  });

  it('gives the same text as JSON.stringify for the decisions DecisionService makes', async () => {
    const policies = [
      makePolicy({ policy_id: 'fw', scope: { service: 'fw' }, algorithm: { type: 'fixed_window', limit: 1, window: '1m' } }),
      makePolicy({ policy_id: 'shadow', scope: { service: 'fw' }, enforcement_mode: 'shadow', algorithm: { type: 'fixed_window', limit: 1, window: '1m' } }),
      makePolicy({ policy_id: 'leases', scope: { job_type: 'export' }, algorithm: { type: 'concurrency', max_concurrency: 1 } }),
      makePolicy({ policy_id: 'stacked', layer: 'platform', scope: { service: 'fw' }, algorithm: { type: 'fixed_window', limit: 5, window: '1m' } }),
    ];
    const counters = new MemoryCounterStore({ sweepIntervalMs: 0 });
    try {
      const service = new DecisionService({ policies: new LiveMatcher(policies), counters, keyPrefix: 't:' });
      const ctx = (body: object) => parseRequestContext(body);
      const decisions = [
        await service.check(ctx({ service: 'fw' })),
        await service.check(ctx({ service: 'fw' })), // over the limit, with the shadow policy's metadata
        await service.check(ctx({ service: 'none' })),
        await service.acquire(ctx({ job_type: 'export', request_id: 'job-1' })),
        await service.release(ctx({ job_type: 'export', request_id: 'job-1' })),
        await service.release(ctx({ job_type: 'export', request_id: 'unknown' })),
      ];
      for (const decision of decisions) expect(decisionJson(decision)).to.equal(JSON.stringify(decision));
    } finally {
      await counters.close();
    }
  });
});
