/**
 * A refused acquire gives back only what it took: when its slot id already holds a slot in a layer (a
 * request id acquired again), that layer's acquire only refreshed the slot, and releasing it would free
 * the earlier, admitted acquire's hold. Shown on every kind of store: the memory store and a single
 * Redis (one group: a refused group writes nothing, so nothing is given back), a store without groups
 * (each layer alone: a refusal gives back what the others took) and a Redis Cluster (one group per
 * slot: a refusing slot has the others give back what they took).
 */
import { expect } from 'chai';
import calculateSlot from 'cluster-key-slot';
import type { CounterStore } from '../../src/counters/counter-store.js';
import type { ConcurrencySpec } from '../../src/counters/counter-spec.js';
import { counterKeys } from '../../src/counters/keys.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { parseRequestContext } from '../../src/model/request-context.js';
import { T0 } from '../support/counter-stores.js';
import { forEachLayerStore } from '../support/layer-stores.js';
import { makePolicy } from '../support/policies.js';
import { randomPrefix } from '../support/redis.js';

const lease = (id: string, layer: string, scope: Record<string, string>, max: number) =>
  makePolicy({ policy_id: id, layer, scope, algorithm: { type: 'concurrency', max_concurrency: max, lease_ttl: '1m' } });

/** A user layer of one slot each, and an org layer of `orgMax` for every user of org `o`. */
function service(store: CounterStore, orgMax: number, compensations: string[]) {
  const decisions = new DecisionService({
    policies: new LiveMatcher([lease('jobs-user', 'user', { user_id: '*' }, 1), lease('jobs-org', 'org', { org_id: '*' }, orgMax)]),
    counters: store,
    keyPrefix: randomPrefix(),
    now: () => T0 + 1_000,
    leases: false,
    denyCache: false,
    onLayerCompensation: (id) => compensations.push(id),
  }, { clockToStore: true });
  return (user: string, request: string) => decisions.acquire(parseRequestContext({ org_id: 'o', user_id: user, request_id: request }));
}

function reuseSuite(name: string, makeStore: () => Promise<CounterStore>, givesBack: boolean) {
  describe(name, () => {
    it('a refused re-acquire keeps the slot its slot id already held', async () => {
      const compensations: string[] = [];
      const acquire = service(await makeStore(), 2, compensations);
      expect((await acquire('a', 'r1')).allowed).to.equal(true);
      expect((await acquire('b', 'r2')).allowed).to.equal(true);
      // r1 again, for user b: b's layer is full and refuses; the org layer only refreshed r1's slot.
      const again = await acquire('b', 'r1');
      expect(again.allowed).to.equal(false);
      expect(again.matched_policy_id).to.equal('jobs-user');
      expect(compensations, 'a refresh is never given back').to.deep.equal([]);
      // The org still holds r1 and r2: a third request finds it full.
      const third = await acquire('c', 'r3');
      expect(third.allowed).to.equal(false);
      expect(third.matched_policy_id).to.equal('jobs-org');
    });

    it('a refused acquire gives back the new slot it took in another layer, and only that one', async () => {
      const compensations: string[] = [];
      const acquire = service(await makeStore(), 3, compensations);
      expect((await acquire('a', 'r1')).allowed).to.equal(true);
      expect((await acquire('b', 'r2')).allowed).to.equal(true);
      // r3 for user b: b's layer refuses. Decided apart, the org layer took a new slot for r3: it goes back.
      expect((await acquire('b', 'r3')).matched_policy_id).to.equal('jobs-user');
      expect(compensations).to.deep.equal(givesBack ? ['jobs-org'] : []);
      // r1 for user b: refused again; the org layer only refreshed r1's slot, which stays held.
      expect((await acquire('b', 'r1')).allowed).to.equal(false);
      expect(compensations).to.deep.equal(givesBack ? ['jobs-org'] : []);
      // The org holds r1 and r2: one more fits (r3 went back), and then it is full (r1 stayed).
      expect((await acquire('c', 'r4')).allowed).to.equal(true);
      const full = await acquire('d', 'r5');
      expect(full.allowed).to.equal(false);
      expect(full.matched_policy_id).to.equal('jobs-org');
    });
  });
}

describe('layers: a refused acquire and a slot id held before', function () {
  this.timeout(60_000);
  forEachLayerStore(reuseSuite);

  it("on a Cluster, user b's and org o's slot sets live in different slots (the give-back above is across slots)", () => {
    const spec: ConcurrencySpec = { type: 'concurrency', maxConcurrency: 1, leaseTtlMs: 60_000 };
    const user = counterKeys('p:', 'jobs-user', spec, ['b'])[0];
    const org = counterKeys('p:', 'jobs-org', spec, ['o'])[0];
    expect(calculateSlot(user)).to.not.equal(calculateSlot(org));
  });
});
