/**
 * Redis Cluster (three masters started by startRedisCluster): every algorithm works through
 * `redis+cluster://…`, user input cannot choose the slot or split a counter's keys across slots
 * (no CROSSSLOT), and the length-prefixed key encoding keeps `a:b`+`c` apart from `a`+`b:c`.
 */
import { expect } from 'chai';
import type { CounterStore } from '../../src/counters/counter-store.js';
import type { CounterSpec, ConcurrencySpec, RateSpec } from '../../src/counters/counter-spec.js';
import { counterKeys } from '../../src/counters/keys.js';
import type { RedisCounterStore } from '../../src/redis/redis-store.js';
import {
  COUNTER_SCENARIOS,
  at,
  connectRedisStore,
  forEachStore,
  runScenario,
} from '../support/counter-stores.js';
import { command, randomPrefix, startRedisCluster, startRedisSentinel, type RedisClusterHandle } from '../support/redis.js';
import { everyRateSpec, everySpec } from '../support/counter-specs.js';

const ALL_SPECS: CounterSpec[] = everySpec(2, 60_000);

/** Policy ids and identities full of hash-tag braces and separators. */
const NASTY: { policyId: string; identity: string[] }[] = [
  { policyId: '{p}', identity: ['{a}'] },
  { policyId: 'p}', identity: ['{', '}'] },
  { policyId: 'p:1', identity: ['a:b', 'c'] },
  { policyId: 'p', identity: ['}{', '{x}:{y}', ':'] },
  { policyId: 'tenant:{acme}', identity: ['user:{42}'] },
  { policyId: '{}', identity: ['', '{}', '{{}}'] },
  { policyId: 'x', identity: ['é{ü}', '😀:}'] },
];

/** One use of a counter: a cost-1 consume, or an acquire of lease `id`. */
function use(store: CounterStore, keys: string[], spec: CounterSpec, now: number, id = 'lease') {
  return spec.type === 'concurrency'
    ? store.acquire(keys, spec as ConcurrencySpec, id, now)
    : store.consume(keys, spec as RateSpec, 1, now);
}

/** `a:b`+`c` and `a`+`b:c` (and friends) must be different counters on every store. */
function identityCollisionCases(getStore: () => { store: CounterStore; keys: (p: string, s: CounterSpec, i?: readonly string[]) => string[] }) {
  it('tenant "a:b" + user "c" and tenant "a" + user "b:c" get different counters', async () => {
    const { store, keys } = getStore();
    const spec: RateSpec = { type: 'fixed_window', limit: 1, windowMs: 60_000 };
    const groups = [
      ['a:b', 'c'],
      ['a', 'b:c'],
      ['a:b:c'],
      ['a', 'b', 'c'],
      ['1:a', 'b'],
      ['1', 'a:b'],
      ['', 'a:b:c'],
      ['a:b:c', ''],
    ];
    const seen = new Set<string>();
    for (const identity of groups) {
      const k = keys('policy', spec, identity);
      expect(seen.has(k[0]), `key of ${JSON.stringify(identity)} is unique`).to.equal(false);
      seen.add(k[0]);
      expect(await store.consume(k, spec, 1, at(0)), JSON.stringify(identity)).to.include({ allowed: true, remaining: 0 });
    }
    for (const identity of groups) {
      expect((await store.consume(keys('policy', spec, identity), spec, 1, at(0))).allowed, JSON.stringify(identity)).to.equal(false);
    }
    // Policy id and identity do not run into each other either.
    const a = keys('p:q', spec, ['r']);
    const b = keys('p', spec, ['q:r']);
    expect(a[0]).to.not.equal(b[0]);
    expect((await store.consume(b, spec, 1, at(0))).allowed).to.equal(true);
  });
}

describe('key encoding on memory and single Redis', () => {
  forEachStore((_name, getStore) => {
    identityCollisionCases(getStore);

    it('braces and colons in policy ids and identities work for every algorithm', async () => {
      const { store, keys } = getStore();
      for (const { policyId, identity } of NASTY) {
        for (const spec of ALL_SPECS) {
          const r = await use(store, keys(policyId, spec, identity), spec, at(0));
          expect(r.allowed, `${spec.type} ${policyId} ${JSON.stringify(identity)}`).to.equal(true);
        }
      }
    });
  });
});

describe('Redis Cluster (3 masters)', function () {
  this.timeout(60_000);
  let cluster: RedisClusterHandle;
  let store: RedisCounterStore;
  let prefix: string;
  const keys = (policyId: string, spec: CounterSpec, identity: readonly string[] = []) =>
    counterKeys(prefix, policyId, spec, identity);

  before(async () => {
    cluster = await startRedisCluster();
    store = connectRedisStore(cluster.addr, { commandTimeoutMs: 5_000 });
    await store.waitUntilReady(10_000);
  });

  after(async () => {
    await store?.close();
    await cluster?.stop();
  });

  beforeEach(() => {
    prefix = randomPrefix();
  });

  describe('the counter scenarios', () => {
    for (const [algorithm, scenarios] of Object.entries(COUNTER_SCENARIOS)) {
      it(`${algorithm}: ${scenarios.length} scenarios`, async () => {
        for (const scenario of scenarios) await runScenario(store, keys, scenario, `cluster-${scenario.name}`);
      });
    }
  });

  it('peek and refund work on every rate algorithm across the cluster (same scripts, same slots)', async () => {
    const specs: RateSpec[] = everyRateSpec(10, 3_600_000);
    for (const spec of specs) {
      // Several identities, so the counters land on different masters.
      for (const user of ['u1', 'u2', 'u3']) {
        const k = keys(`refund-${spec.type}`, spec, [user]);
        expect((await store.consume(k, spec, 10)).remaining, spec.type).to.equal(0);
        expect((await store.peek(k, spec)).allowed, spec.type).to.equal(false);
        expect((await store.refund(k, spec, 4)).remaining, spec.type).to.equal(4);
        expect((await store.peek(k, spec)).remaining, spec.type).to.equal(4);
        expect((await store.consume(k, spec, 4)).allowed, spec.type).to.equal(true);
        expect((await store.consume(k, spec, 1)).allowed, spec.type).to.equal(false);
      }
    }
  });

  it('a counter is spread over the nodes by its tag, and all of its keys share one slot', async () => {
    const nodes = cluster.nodes;
    const slotOwners = await clusterSlotOwners(nodes[0].host, nodes[0].port);
    const owners = new Set<number>();
    for (let i = 0; i < 60; i++) {
      const spec = ALL_SPECS[i % ALL_SPECS.length];
      const k = keys(`policy-${i}`, spec, [`user-${i}`]);
      const slots = await Promise.all(k.map((key) => command(nodes[0].host, nodes[0].port, ['CLUSTER', 'KEYSLOT', key])));
      expect(new Set(slots).size, `keys of ${spec.type}: ${k.join(' ')}`).to.equal(1);
      owners.add(slotOwners(slots[0] as number));
      expect((await use(store, k, spec, at(0))).allowed).to.equal(true);
    }
    expect(owners.size, 'counters landed on every master').to.equal(3);
  });

  it('braces and colons in policy ids and identities never cause CROSSSLOT, for any algorithm', async () => {
    const nodes = cluster.nodes;
    for (const { policyId, identity } of NASTY) {
      for (const spec of ALL_SPECS) {
        const k = keys(policyId, spec, identity);
        const slots = await Promise.all(k.map((key) => command(nodes[0].host, nodes[0].port, ['CLUSTER', 'KEYSLOT', key])));
        expect(new Set(slots).size, `${spec.type} ${policyId} ${JSON.stringify(identity)}`).to.equal(1);
        const label = `${spec.type} ${policyId} ${JSON.stringify(identity)}`;
        expect(await use(store, k, spec, at(0), 'l1'), label).to.include({ allowed: true, remaining: 1 });
        expect(await use(store, k, spec, at(0), 'l2'), label).to.include({ allowed: true, remaining: 0 });
        expect((await use(store, k, spec, at(0), 'l3')).allowed, label).to.equal(false);
      }
    }
  });

  it('every algorithm works in real time too (Redis TIME on the owning master)', async () => {
    for (const spec of ALL_SPECS) {
      const k = keys('realtime', spec, ['u']);
      const first = spec.type === 'concurrency' ? await store.acquire(k, spec, 'a') : await store.consume(k, spec, 2);
      expect(first, spec.type).to.include({ allowed: true, remaining: spec.type === 'concurrency' ? 1 : 0 });
      if (spec.type !== 'concurrency') {
        expect((await store.consume(k, spec as RateSpec, 1)).allowed, spec.type).to.equal(false);
      }
    }
  });

  it('operations issued together are batched per hash slot: one script call per slot, each result exact', async () => {
    const nodes = cluster.nodes;
    // Eight counters (all algorithms), five uses each, interleaved, all in one event-loop turn.
    const counters = Array.from({ length: 8 }, (_, i) => {
      const spec = ALL_SPECS[i % ALL_SPECS.length];
      return { spec, keys: keys(`batch-${i}`, spec, [`user-${i}`]) };
    });
    const slots = await Promise.all(counters.map((c) => command(nodes[0].host, nodes[0].port, ['CLUSTER', 'KEYSLOT', c.keys[0]])));
    // Warm up each master's script cache, so the calls below are one EVALSHA each.
    await Promise.all(counters.map((c) => use(store, c.keys, c.spec, at(0), 'warm-up')));
    await Promise.all(nodes.map((n) => command(n.host, n.port, ['CONFIG', 'RESETSTAT'])));
    const pending = [];
    for (let round = 0; round < 5; round++) {
      for (const c of counters) pending.push({ c, round, result: use(store, c.keys, c.spec, at(0), `lease-${round}`) });
    }
    const results = await Promise.all(pending.map((p) => p.result));
    for (const [i, result] of results.entries()) {
      // Capacity 2, one already used by the warm-up: only the first use of this turn is admitted.
      expect(result.allowed, `${pending[i].c.spec.type} use ${pending[i].round + 1}`).to.equal(pending[i].round === 0);
    }
    let calls = 0;
    for (const n of nodes) {
      const stats = String(await command(n.host, n.port, ['INFO', 'commandstats']));
      for (const m of stats.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) calls += Number(m[2]);
    }
    expect(calls).to.equal(new Set(slots).size);
  });

  describe('key encoding', () => {
    identityCollisionCases(() => ({ store, keys }));
  });
});

describe('Redis Sentinel (one master, one sentinel)', function () {
  this.timeout(30_000);
  let sentinel: { addr: string; stop(): Promise<void> };
  let store: RedisCounterStore;

  before(async () => {
    sentinel = await startRedisSentinel();
    store = connectRedisStore(sentinel.addr, { commandTimeoutMs: 5_000 });
    await store.waitUntilReady(10_000);
  });

  after(async () => {
    await store?.close();
    await sentinel?.stop();
  });

  it('runs the counter scenarios of every algorithm through redis+sentinel://', async () => {
    const prefix = randomPrefix();
    for (const scenarios of Object.values(COUNTER_SCENARIOS)) {
      for (const scenario of scenarios) {
        await runScenario(store, (p, s, i = []) => counterKeys(prefix, p, s, i), scenario, `sentinel-${scenario.name}`);
      }
    }
  });
});

/** slot → index of the master serving it, from CLUSTER SLOTS. */
async function clusterSlotOwners(host: string, port: number): Promise<(slot: number) => number> {
  const reply = (await command(host, port, ['CLUSTER', 'SLOTS'])) as unknown as [number, number, [string, number, string]][];
  const ranges = reply.map(([from, to, master]) => ({ from, to, owner: `${master[0]}:${master[1]}` }));
  const ownerIds = [...new Set(ranges.map((r) => r.owner))].sort();
  return (slot) => {
    const range = ranges.find((r) => slot >= r.from && slot <= r.to);
    if (!range) throw new Error(`slot ${slot} not served`);
    return ownerIds.indexOf(range.owner);
  };
}
