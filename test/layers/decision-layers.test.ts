/**
 * One decision over every layer, on every kind of store: the memory store
 * (one synchronous group), a store that has to wait and has no groups (each layer alone, a refusal gives
 * back what the others took), a single Redis (one group, one script call) and a Redis Cluster (one group
 * per slot, give-backs across slots). Every guarantee is shown by counting.
 */
import { expect } from 'chai';
import type { CounterStore } from '../../src/counters/counter-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { parseRequestContext } from '../../src/model/request-context.js';
import { T0 } from '../support/counter-stores.js';
import { forEachLayerStore } from '../support/layer-stores.js';
import { makePolicy } from '../support/policies.js';
import { randomPrefix } from '../support/redis.js';

function policy(id: string, layer: string | undefined, scope: Record<string, string>, limit: number, extra: Record<string, unknown> = {}) {
  return makePolicy({ policy_id: id, ...(layer ? { layer } : {}), scope, algorithm: { type: 'fixed_window', limit, window: '1m' }, ...extra });
}

/** The stack: 5/min per user, 20/min per org, 100/min for the platform. */
const STACK = () => [
  policy('per-user', 'user', { endpoint: '/api/things', user_id: '*' }, 5),
  policy('per-org', 'org', { endpoint: '/api/things', org_id: '*' }, 20),
  policy('platform', 'platform', { endpoint: '/api/things' }, 100),
];

interface Fixture {
  service: DecisionService;
  compensations: string[];
  check(body: Record<string, unknown>): Promise<ReturnType<DecisionService['check']> extends Promise<infer D> ? D : never>;
}

type StoreMaker = () => Promise<CounterStore>;

function fixture(policies: ReturnType<typeof makePolicy>[], counters: CounterStore, now: () => number): Fixture {
  const compensations: string[] = [];
  const service = new DecisionService({
    policies: new LiveMatcher(policies),
    counters,
    keyPrefix: randomPrefix(),
    now,
    leases: false,
    denyCache: false,
    onLayerCompensation: (id) => compensations.push(id),
  }, { clockToStore: true });
  return { service, compensations, check: (body) => service.check(parseRequestContext(body)) };
}

function suite(name: string, makeStore: StoreMaker, expectCompensations: boolean) {
  describe(name, () => {
    let store: CounterStore;
    const now = () => T0 + 1_000;
    beforeEach(async () => {
      store = await makeStore();
    });

    it('six users of one org, five checks each: the org admits 20, and refusals spend nothing', async () => {
      const f = fixture(STACK(), store, now);
      let admitted = 0;
      for (let round = 0; round < 5; round++) {
        const answers = await Promise.all([1, 2, 3, 4, 5, 6].map((u) => f.check({ endpoint: '/api/things', org_id: 'acme', user_id: `u${u}` })));
        admitted += answers.filter((d) => d.allowed).length;
      }
      expect(admitted).to.equal(20);
      const peek = await f.check({ endpoint: '/api/things', org_id: 'acme', user_id: 'u7', quantity: 0 });
      const byLayer = Object.fromEntries((peek.layers ?? []).map((l) => [l.layer, l.remaining]));
      expect(byLayer).to.deep.equal({ org: 0, platform: 80, user: 5 });
      if (!expectCompensations) expect(f.compensations).to.deep.equal([]);
    });

    it('a check larger than one layer can ever admit: refused by that layer with quantity_exceeds_limit, retry_after 0, no layer spends', async () => {
      const f = fixture(STACK(), store, now);
      expect((await f.check({ endpoint: '/api/things', org_id: 'o', user_id: 'u', quantity: 2 })).allowed).to.equal(true);
      const refused = await f.check({ endpoint: '/api/things', org_id: 'o', user_id: 'u', quantity: 6 });
      expect(refused).to.include({ allowed: false, reason: 'quantity_exceeds_limit', matched_policy_id: 'per-user', retry_after: 0, remaining: 3 });
      const peek = await f.check({ endpoint: '/api/things', org_id: 'o', user_id: 'u', quantity: 0 });
      const byLayer = Object.fromEntries((peek.layers ?? []).map((l) => [l.layer, l.remaining]));
      expect(byLayer).to.deep.equal({ org: 18, platform: 98, user: 3 });
      expect(f.compensations).to.deep.equal([]);
    });

    it('a refused decision consumes in no layer; an allowed one in every layer', async () => {
      const f = fixture(STACK(), store, now);
      for (let i = 0; i < 5; i++) expect((await f.check({ endpoint: '/api/things', org_id: 'o', user_id: 'u' })).allowed).to.equal(true);
      const refused = await f.check({ endpoint: '/api/things', org_id: 'o', user_id: 'u' });
      expect(refused.allowed).to.equal(false);
      expect(refused.matched_policy_id).to.equal('per-user');
      expect(refused.layers?.map((l) => [l.layer, l.allowed])).to.deep.equal([['org', true], ['platform', true], ['user', false]]);
      const other = await f.check({ endpoint: '/api/things', org_id: 'o', user_id: 'v', quantity: 0 });
      expect(other.layers?.map((l) => l.remaining)).to.deep.equal([15, 95, 5]);
      // Allowed: the deciding layer is the one with the least remaining.
      const allowed = await f.check({ endpoint: '/api/things', org_id: 'o', user_id: 'v', quantity: 3 });
      expect(allowed.allowed).to.equal(true);
      expect(allowed.matched_policy_id).to.equal('per-user');
      expect(allowed.remaining).to.equal(2);
      expect(allowed.layers?.map((l) => l.remaining)).to.deep.equal([12, 92, 2]);
    });

    it('a refusal by the org gives back nothing of the user (a refused plan is settled before the answer)', async () => {
      const f = fixture([policy('per-user', 'user', { user_id: '*' }, 10), policy('per-org', 'org', { org_id: '*' }, 2)], store, now);
      const answers = [];
      for (let i = 0; i < 4; i++) answers.push(await f.check({ org_id: 'o', user_id: 'u' }));
      expect(answers.map((d) => d.allowed)).to.deep.equal([true, true, false, false]);
      const peek = await f.check({ org_id: 'o', user_id: 'u', quantity: 0 });
      expect(peek.layers?.map((l) => [l.policy_id, l.remaining])).to.deep.equal([['per-org', 0], ['per-user', 8]]);
      if (expectCompensations) expect(f.compensations).to.deep.equal(['per-user', 'per-user']);
    });

    it('refund gives back to every layer', async () => {
      const f = fixture(STACK(), store, now);
      await f.check({ endpoint: '/api/things', org_id: 'o', user_id: 'u', quantity: 4 });
      const refunded = await f.service.refund(parseRequestContext({ endpoint: '/api/things', org_id: 'o', user_id: 'u', quantity: 3 }));
      expect(refunded.layers?.map((l) => [l.reason, l.remaining])).to.deep.equal([['refunded', 19], ['refunded', 99], ['refunded', 4]]);
    });

    it('acquire holds a slot in every concurrency layer or in none; release frees them all', async () => {
      const lease = (id: string, layer: string, scope: Record<string, string>, max: number) =>
        makePolicy({ policy_id: id, layer, scope, algorithm: { type: 'concurrency', max_concurrency: max, lease_ttl: '1m' } });
      const f = fixture([lease('jobs-user', 'user', { user_id: '*' }, 2), lease('jobs-org', 'org', { org_id: '*' }, 3)], store, now);
      const acquire = (user: string, request: string) => f.service.acquire(parseRequestContext({ org_id: 'o', user_id: user, request_id: request }));
      expect((await acquire('a', 'r1')).allowed).to.equal(true);
      expect((await acquire('a', 'r2')).allowed).to.equal(true);
      const third = await acquire('a', 'r3');
      expect(third.allowed).to.equal(false);
      expect(third.matched_policy_id).to.equal('jobs-user');
      // The org's third slot was not held by the refused acquire: another user gets it.
      expect((await acquire('b', 'r4')).allowed).to.equal(true);
      expect((await acquire('b', 'r5')).allowed).to.equal(false);
      const released = await f.service.release(parseRequestContext({ org_id: 'o', user_id: 'a', request_id: 'r1' }));
      expect(released.layers?.map((l) => l.reason)).to.deep.equal(['lease_released', 'lease_released']);
      expect((await acquire('b', 'r5')).allowed).to.equal(true);
    });

    it('a layer whose action lets a refused request through admits, and the others consume', async () => {
      const f = fixture([policy('soft', 'a', { user_id: '*' }, 1, { action: 'downgrade' }), policy('hard', 'b', { user_id: '*' }, 5)], store, now);
      await f.check({ user_id: 'u' });
      const second = await f.check({ user_id: 'u' });
      expect(second.allowed).to.equal(true);
      expect(second.action).to.equal('downgrade');
      expect(second.layers?.map((l) => [l.policy_id, l.action, l.remaining])).to.deep.equal([['soft', 'downgrade', 0], ['hard', 'allow', 3]]);
    });

    it('one layer answers as before: no `layers`; shadow winners of every layer in metadata, in layer order', async () => {
      const f = fixture([
        policy('only', undefined, { user_id: '*' }, 5),
        policy('watch-a', 'a', { user_id: '*' }, 1, { enforcement_mode: 'shadow' }),
        policy('watch-z', 'z', { user_id: '*' }, 9, { enforcement_mode: 'shadow' }),
      ], store, now);
      await f.check({ user_id: 'u' });
      const d = await f.check({ user_id: 'u' });
      expect(d).to.not.have.property('layers');
      expect(d.metadata).to.deep.equal({ shadow_policy_id: 'watch-a,watch-z', shadow_action: 'deny,allow' });
      expect(d.remaining).to.equal(3);
    });

    it('no enforcing layer: the shadow winners of every layer are listed, in layer order', async () => {
      const f = fixture([
        policy('watch-a', 'a', { user_id: '*' }, 1, { enforcement_mode: 'shadow' }),
        policy('watch-z', 'z', { user_id: '*' }, 9, { enforcement_mode: 'shadow' }),
      ], store, now);
      await f.check({ user_id: 'u' });
      const d = await f.check({ user_id: 'u' });
      expect(d.allowed).to.equal(true);
      expect(d.metadata).to.include({ shadow_policy_id: 'watch-a,watch-z', shadow_action: 'deny,allow' });
    });

    it("a layer's verdict keeps its own action when another layer downgraded the decision", async () => {
      const f = fixture([
        policy('soft', 'z', { user_id: '*' }, 1, { action: 'downgrade' }),
        policy('hard', 'a', { user_id: '*' }, 2),
      ], store, now);
      await f.check({ user_id: 'u' });
      const d = await f.check({ user_id: 'u' });
      expect(d).to.include({ allowed: true, action: 'downgrade', matched_policy_id: 'hard' });
      expect((d.layers ?? []).map((l) => [l.layer, l.action])).to.deep.equal([['a', 'allow'], ['z', 'downgrade']]);
    });
  });
}

describe('Layers: one decision over every layer, all or nothing', function () {
  this.timeout(60_000);
  forEachLayerStore(suite);
});
