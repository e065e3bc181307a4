import { expect } from 'chai';
import { DecisionService } from '../../src/decision/decision-service.js';
import type { RequestContext } from '../../src/model/request-context.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { forEachStore } from '../support/counter-stores.js';
import { makePolicy, hourlyAlgorithms } from '../support/policies.js';

/**
 * Requests that can never fit: a check whose cost exceeds what its policy ever admits at once is refused
 * with reason quantity_exceeds_limit and retry_after 0, consumes nothing, and answers remaining and
 * reset_after as a peek would (both counter stores; Redis with its deny cache and process leases).
 */

const LIMIT = 10;

const ALGORITHMS = hourlyAlgorithms(LIMIT);

function policies() {
  return [
    ...Object.entries(ALGORITHMS).map(([type, algorithm]) => makePolicy({ policy_id: type, scope: { service: type }, algorithm })),
    makePolicy({ policy_id: 'burst', scope: { service: 'burst' }, algorithm: { type: 'token_bucket', limit: LIMIT, window: '1h', burst: 20 } }),
    makePolicy({ policy_id: 'costly', scope: { service: 'costly' }, algorithm: { type: 'fixed_window', limit: LIMIT, window: '1h', cost_per_request: 3 } }),
    makePolicy({ policy_id: 'downgrade', scope: { service: 'downgrade' }, action: 'downgrade', algorithm: { type: 'fixed_window', limit: LIMIT, window: '1h' } }),
    makePolicy({ policy_id: 'sample', scope: { service: 'sample' }, action: 'sample', algorithm: { type: 'fixed_window', limit: LIMIT, window: '1h', sample_rate: 1 } }),
    makePolicy({ policy_id: 'delay', scope: { service: 'delay' }, action: 'delay', algorithm: { type: 'fixed_window', limit: LIMIT, window: '1h' } }),
    makePolicy({ policy_id: 'drop', scope: { service: 'drop' }, action: 'drop', algorithm: { type: 'fixed_window', limit: LIMIT, window: '1h' } }),
    makePolicy({ policy_id: 'leased', scope: { service: 'leased' }, algorithm: { type: 'fixed_window', limit: LIMIT, window: '1h' }, lease: { max_units: 5, max_hold: '1s' } }),
    makePolicy({ policy_id: 'enforced', scope: { service: 'shadowed' }, algorithm: { type: 'fixed_window', limit: 100, window: '1h' } }),
    makePolicy({ policy_id: 'alone', scope: { service: 'shadow-only' }, enforcement_mode: 'shadow', algorithm: { type: 'quota', limit: LIMIT, quota_period: '1h' } }),
    makePolicy({ policy_id: 'beside', scope: { service: 'shadowed' }, enforcement_mode: 'shadow', algorithm: { type: 'quota', limit: LIMIT, quota_period: '1h' } }),
  ];
}

const ctx = (service: string, quantity = 1): RequestContext => ({ service, quantity, tags: {} });

describe('DecisionService: requests that can never fit', () => {
  forEachStore((storeName, getStore) => {
    let decisions: DecisionService;
    beforeEach(() => {
      const { store, prefix, clock } = getStore();
      decisions = new DecisionService({
        policies: new LiveMatcher(policies()),
        counters: store,
        keyPrefix: prefix,
        now: storeName === 'memory' ? () => clock.now : undefined,
      });
    });
    afterEach(async () => {
      await decisions.letGoLeases();
    });

    const peekRemaining = async (service: string) => (await decisions.check(ctx(service, 0))).remaining;

    for (const type of Object.keys(ALGORITHMS)) {
      it(`${type}: one unit over the limit is refused for good, consuming nothing; the limit itself fits`, async () => {
        const untouched = await decisions.check(ctx(type, LIMIT + 1));
        expect(untouched).to.include({ allowed: false, action: 'deny', reason: 'quantity_exceeds_limit', retry_after: 0, remaining: LIMIT, reset_after: 0, limit: LIMIT });
        expect(await peekRemaining(type)).to.equal(LIMIT);
        expect((await decisions.check(ctx(type, 3))).allowed).to.equal(true);
        const used = await decisions.check(ctx(type, 1_000_000));
        expect(used).to.include({ allowed: false, reason: 'quantity_exceeds_limit', retry_after: 0, remaining: LIMIT - 3 });
        // reset_after keeps its meaning: when the counter is whole again, as a peek says.
        const peek = await decisions.check(ctx(type, 0));
        expect(used.reset_after).to.be.above(0);
        // The memory store's clock stands still here; Redis reads its own between the two calls.
        expect(peek.reset_after - used.reset_after).to.be.within(storeName === 'memory' ? 0 : -1_000, 0);
        expect(await peekRemaining(type)).to.equal(LIMIT - 3);
        expect((await decisions.check(ctx(type, LIMIT - 3))).allowed).to.equal(true);
      });
    }

    it("a bucket's burst is what never fits, not its rate; cost_per_request counts", async () => {
      expect((await decisions.check(ctx('burst', 20))).allowed).to.equal(true);
      expect(await decisions.check(ctx('burst', 21))).to.include({ allowed: false, reason: 'quantity_exceeds_limit', retry_after: 0, limit: 20 });
      // 4 × 3 = 12 units against 10; 3 × 3 = 9 fit.
      expect(await decisions.check(ctx('costly', 4))).to.include({ allowed: false, reason: 'quantity_exceeds_limit', retry_after: 0, remaining: LIMIT });
      expect(await decisions.check(ctx('costly', 3))).to.include({ allowed: true, remaining: 1 });
    });

    it('is refused whatever the action: downgrade, sample and delay answer deny, drop stays drop', async () => {
      for (const action of ['downgrade', 'sample', 'delay']) {
        expect(await decisions.check(ctx(action, LIMIT + 1)), action).to.include({ allowed: false, action: 'deny', reason: 'quantity_exceeds_limit', retry_after: 0 });
      }
      expect(await decisions.check(ctx('drop', LIMIT + 1))).to.include({ allowed: false, action: 'drop', reason: 'quantity_exceeds_limit' });
      // An ordinary refusal still follows the action: a downgrade lets it through.
      expect((await decisions.check(ctx('downgrade', LIMIT))).allowed).to.equal(true);
      expect(await decisions.check(ctx('downgrade', 1))).to.include({ allowed: true, action: 'downgrade', reason: 'limit_exceeded' });
    });

    it('after a standing refusal (the deny cache in Redis mode), a request larger than the limit is still told so', async () => {
      expect((await decisions.check(ctx('fixed_window', LIMIT))).allowed).to.equal(true);
      for (let i = 0; i < 3; i++) expect(await decisions.check(ctx('fixed_window', 1))).to.include({ allowed: false, reason: 'limit_exceeded' });
      const never = await decisions.check(ctx('fixed_window', LIMIT + 1));
      expect(never).to.include({ allowed: false, reason: 'quantity_exceeds_limit', retry_after: 0, remaining: 0 });
      expect(never.reset_after).to.be.above(0);
    });

    it('a leased policy (process leases in Redis mode) takes nothing for it', async () => {
      expect((await decisions.check(ctx('leased', 2))).allowed).to.equal(true);
      expect(await decisions.check(ctx('leased', LIMIT + 1))).to.include({ allowed: false, reason: 'quantity_exceeds_limit', retry_after: 0 });
      expect((await decisions.check(ctx('leased', LIMIT - 2))).allowed).to.equal(true);
      expect((await decisions.check(ctx('leased', 1))).allowed).to.equal(false);
    });

    it('a shadow policy it can never fit says so beside the enforcing one, and blocks nothing', async () => {
      const decision = await decisions.check(ctx('shadowed', LIMIT + 1));
      expect(decision).to.include({ allowed: true, matched_policy_id: 'enforced' });
      expect(decision.metadata).to.include({ shadow_policy_id: 'beside', shadow_action: 'deny' });
      const alone = await decisions.check(ctx('shadow-only', LIMIT + 1));
      expect(alone).to.include({ allowed: true, shadow_mode: true, action: 'shadow_only', reason: 'quantity_exceeds_limit', retry_after: 0, remaining: LIMIT });
      expect(await peekRemaining('shadow-only')).to.equal(LIMIT);
    });
  });
});
