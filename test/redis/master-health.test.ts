/**
 * Health per Redis master (issue 22), on a real 3-master cluster: a sick master's breaker refuses only
 * the keys whose slots it serves, calls in flight are counted per master, a slot that changes hands
 * takes its keys' health to the new master, and metrics show each master's state.
 */
import { expect } from 'chai';
import calculateSlot from 'cluster-key-slot';
import type { RateSpec } from '../../src/counters/counter-spec.js';
import { counterKeys } from '../../src/counters/keys.js';
import { connectRedisCounterStore, type CounterStoreErrorEvent, type RedisCounterStore } from '../../src/redis/redis-store.js';
import { Metrics } from '../../src/observability/metrics.js';
import { setLogLevel } from '../../src/util/log.js';
import { hangGuard, sleep } from '../support/failover.js';
import { command, randomPrefix, startRedisCluster, type RedisFailoverClusterHandle } from '../support/redis.js';

const SPEC: RateSpec = { type: 'fixed_window', limit: 1000, windowMs: 3_600_000 };

describe('per-master health on a Redis Cluster (3 masters)', function () {
  this.timeout(60_000);
  let cluster: RedisFailoverClusterHandle;
  let store: RedisCounterStore;
  /** Counter keys grouped by the port of the master serving them. */
  let keysByMaster: Map<number, string[][]>;

  before(async () => {
    setLogLevel('silent');
    cluster = await startRedisCluster();
    const prefix = randomPrefix();
    keysByMaster = new Map();
    for (let i = 0; i < 60; i++) {
      const keys = counterKeys(prefix, 'health', SPEC, [`u${i}`]);
      const { port } = await cluster.masterOf(calculateSlot(keys[0]));
      keysByMaster.set(port, [...(keysByMaster.get(port) ?? []), keys]);
    }
    expect(keysByMaster.size, 'keys on every master').to.equal(3);
  });

  beforeEach(async () => {
    // A long cool-down: no half-open trial interferes with what a test counts.
    store = connectRedisCounterStore(cluster.addr, { commandTimeoutMs: 300, breaker: { failureThreshold: 2, coolDownMs: 60_000 } });
    await store.waitUntilReady(10_000);
    // Every master answers once, so the client has the slot map and each master a breaker.
    await Promise.all([...keysByMaster.values()].map((keys) => store.consume(keys[0], SPEC, 1)));
  });

  afterEach(async () => {
    await store?.close();
  });

  after(async () => {
    await cluster?.stop();
    setLogLevel('info');
  });

  const addressOf = (port: number) => `127.0.0.1:${port}`;
  /** Every key of every master, once each; the outcome per master port. */
  async function consumeEverywhere(): Promise<Map<number, { ok: number; failed: number }>> {
    const out = new Map<number, { ok: number; failed: number }>();
    await Promise.all(
      [...keysByMaster].flatMap(([port, counters]) =>
        counters.map(async (keys) => {
          const tally = out.get(port) ?? { ok: 0, failed: 0 };
          out.set(port, tally);
          await store.consume(keys, SPEC, 1).then(() => tally.ok++, () => tally.failed++);
        }),
      ),
    );
    return out;
  }

  it('a hung master fails only its own calls, counts them pending on itself, and opens only its own breaker', async () => {
    const [sick, ...healthy] = [...keysByMaster.keys()];
    const refusals: CounterStoreErrorEvent[] = [];
    store.onError((event) => refusals.push(event));
    cluster.freeze(sick);
    try {
      // Two rounds of calls: each a timed-out batch per slot on the sick master, answers elsewhere.
      const first = consumeEverywhere();
      // The store flushes on setImmediate: once this one runs, every batch has been sent (ordering, not time).
      await new Promise((resolve) => setImmediate(resolve));
      const states = new Map(store.health.states().map((s) => [s.master, s]));
      expect(states.get(addressOf(sick))!.pending_calls, 'calls waiting on the hung master').to.be.greaterThan(0);
      const outcome = await first;
      expect(outcome.get(sick)).to.deep.equal({ ok: 0, failed: keysByMaster.get(sick)!.length });
      for (const port of healthy) expect(outcome.get(port), `master ${port}`).to.deep.equal({ ok: keysByMaster.get(port)!.length, failed: 0 });

      expect(store.breakerFor(keysByMaster.get(sick)![0][0]).state, "the hung master's breaker").to.equal('open');
      for (const port of healthy) expect(store.breakerFor(keysByMaster.get(port)![0][0]).state, `breaker of ${port}`).to.equal('closed');
      expect(store.isHealthy(), 'a store with a serving master refused').to.equal(false);

      // Open: its calls are refused at once, naming it; the others still answer.
      refusals.length = 0;
      const second = await consumeEverywhere();
      expect(second.get(sick)).to.deep.equal({ ok: 0, failed: keysByMaster.get(sick)!.length });
      for (const port of healthy) expect(second.get(port)!.failed, `master ${port}`).to.equal(0);
      expect(refusals.map((e) => e.kind)).to.deep.equal(keysByMaster.get(sick)!.map(() => 'breaker_open'));
      for (const e of refusals) expect(e.error.message).to.include(`circuit breaker of ${addressOf(sick)} open`);
    } finally {
      cluster.thaw(sick);
    }
    // Every call settled: nothing is pending anywhere.
    for (const state of store.health.states()) expect(state.pending_calls, state.master).to.equal(0);

    const metrics = new Metrics({ defaultMetrics: false });
    metrics.watchCounterStoreMasters(() => store.health.states());
    const text = await metrics.exposition();
    expect(text).to.include(`rl_counter_store_breaker_state{master="${addressOf(sick)}"} 2`);
    for (const port of healthy) {
      expect(text).to.include(`rl_counter_store_breaker_state{master="${addressOf(port)}"} 0`);
      expect(text).to.include(`rl_counter_store_pending_calls{master="${addressOf(port)}"} 0`);
    }
  });

  it("a slot that moves to another master takes its keys' health along", async () => {
    const [from, to] = [...keysByMaster.keys()];
    const keys = keysByMaster.get(from)![0];
    const slot = calculateSlot(keys[0]);
    // A counter of its own in a slot of `from` that holds no other test key, so moving it moves no data.
    let fresh = counterKeys(randomPrefix(), 'moved', SPEC, ['x']);
    for (let i = 0; (await cluster.masterOf(calculateSlot(fresh[0]))).port !== from || (await slotHasKeys(from, calculateSlot(fresh[0]))); i++) {
      fresh = counterKeys(randomPrefix(), 'moved', SPEC, [String(i)]);
    }
    const freshSlot = calculateSlot(fresh[0]);
    expect(freshSlot).to.not.equal(slot);
    expect((await store.consume(fresh, SPEC, 1)).remaining).to.equal(999);
    await command('127.0.0.1', from, ['DEL', ...fresh]);

    // `from` is declared sick (as after a run of failed calls): both counters are refused.
    const sick = store.breakerFor(keys[0]);
    for (let i = 0; i < sick.failureThreshold; i++) sick.recordFailure();
    await expectRefused(keys);
    await expectRefused(fresh);

    // Resharding: the empty slot is handed to `to` (the documented SETSLOT sequence).
    const [fromId, toId] = await Promise.all([from, to].map(async (port) => String(await command('127.0.0.1', port, ['CLUSTER', 'MYID']))));
    await command('127.0.0.1', to, ['CLUSTER', 'SETSLOT', String(freshSlot), 'IMPORTING', fromId]);
    await command('127.0.0.1', from, ['CLUSTER', 'SETSLOT', String(freshSlot), 'MIGRATING', toId]);
    for (const port of [to, from, ...[...keysByMaster.keys()].filter((p) => p !== from && p !== to)]) {
      await command('127.0.0.1', port, ['CLUSTER', 'SETSLOT', String(freshSlot), 'NODE', toId]);
    }

    // Once the client's slot map has caught up (its own periodic refresh), the moved counter is
    // served by `to` and answers, while `from` stays refused.
    const since = performance.now();
    while (store.health.guardFor(freshSlot).master !== addressOf(to)) {
      hangGuard(since, "the client's slot map to follow the move");
      await sleep(50);
    }
    expect((await store.consume(fresh, SPEC, 1)).remaining, 'the moved counter, counted on its new master').to.equal(999);
    expect(store.breakerFor(fresh[0])).to.not.equal(sick);
    await expectRefused(keys);
  });

  async function expectRefused(keys: string[]): Promise<void> {
    const error = await store.consume(keys, SPEC, 1).then(() => undefined, (e: Error) => e);
    expect(error?.message, keys[0]).to.match(/circuit breaker of .* open/);
  }
});

async function slotHasKeys(port: number, slot: number): Promise<boolean> {
  return Number(await command('127.0.0.1', port, ['CLUSTER', 'COUNTKEYSINSLOT', String(slot)])) > 0;
}
