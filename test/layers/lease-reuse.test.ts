/**
 * A refused acquire gives back only what it took: when its lease id already holds a slot in a layer (a
 * request id acquired again), that layer's acquire only refreshed the slot, and releasing it would free
 * the earlier, admitted acquire's hold. Shown here for the memory store (one group: a refused group
 * writes nothing, so nothing is given back).
 */
import { expect } from 'chai';
import type { CounterStore } from '../../src/counters/counter-store.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { parseRequestContext } from '../../src/model/request-context.js';
import { T0 } from '../support/counter-stores.js';
import { makePolicy } from '../support/policies.js';
import { randomPrefix } from '../support/redis.js';

const lease = (id: string, layer: string, scope: Record<string, string>, max: number) =>
  makePolicy({ policy_id: id, layer, scope, algorithm: { type: 'concurrency', max_concurrency: max, lease_ttl: '1m' } });

function reuseSuite(name: string, makeStore: () => CounterStore) {
  it(`${name}: a refused re-acquire keeps the slot its lease id already held`, async () => {
    const service = new DecisionService({
      policies: new LiveMatcher([lease('jobs-user', 'user', { user_id: '*' }, 1), lease('jobs-org', 'org', { org_id: '*' }, 2)]),
      counters: makeStore(),
      keyPrefix: randomPrefix(),
      now: () => T0 + 1_000,
      leases: false,
      denyCache: false,
    }, { clockToStore: true });
    const acquire = (user: string, request: string) => service.acquire(parseRequestContext({ org_id: 'o', user_id: user, request_id: request }));
    expect((await acquire('a', 'r1')).allowed).to.equal(true);
    expect((await acquire('b', 'r2')).allowed).to.equal(true);
    // r1 again, for user b: b's layer is full and refuses; the org layer only refreshed r1's slot.
    const again = await acquire('b', 'r1');
    expect(again.allowed).to.equal(false);
    expect(again.matched_policy_id).to.equal('jobs-user');
    // The org still holds r1 and r2: a third request finds it full.
    const third = await acquire('c', 'r3');
    expect(third.allowed).to.equal(false);
    expect(third.matched_policy_id).to.equal('jobs-org');
  });
}

describe('layers: a refused acquire and a lease id held before', () => {
  reuseSuite('memory store', () => new MemoryCounterStore({ sweepIntervalMs: 0 }));
});
