/**
 * A group of counter operations (CounterStore.group) is all or nothing, and the emulator's group
 * (MemoryCounterStore) and lua/batch.lua's give the same answers: random stacks of counters (one per
 * layer), random costs, soft operations, refunds, peeks and clock steps are replayed through both with
 * the same explicit times. On a single Redis the whole group is one step; on a Cluster each hash
 * slot's share is (the emulator is then driven share by share, as the slots run).
 *
 * Demanded on every step: identical results and `committed`; a refused group (a refusal that is not
 * soft) wrote nothing (every counter peeks as before); a fixed window never holds more than its limit.
 */
import { expect } from 'chai';
import calculateSlot from 'cluster-key-slot';
import fc from 'fast-check';
import type { CounterResult, CounterStore, GroupOperation, GroupOutcome } from '../../src/counters/counter-store.js';
import type { CounterSpec, ConcurrencySpec, RateSpec } from '../../src/counters/counter-spec.js';
import { counterKeys } from '../../src/counters/keys.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import type { RedisCounterStore } from '../../src/redis/redis-store.js';
import { T0, connectRedisStore, getSuiteRedis } from '../support/counter-stores.js';
import { randomPrefix, startRedisCluster, type RedisClusterHandle } from '../support/redis.js';

const RUNS = Number(process.env.GROUP_PARITY_RUNS ?? 40);

const limitArb = fc.integer({ min: 1, max: 8 });
const windowArb = fc.constantFrom(100, 1000, 60_000);
const specArb: fc.Arbitrary<CounterSpec> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ type: fc.constant('fixed_window' as const), limit: limitArb, windowMs: windowArb }) },
  fc.record({ type: fc.constant('sliding_window_log' as const), limit: limitArb, windowMs: windowArb }),
  fc.record({ limit: limitArb, subWindows: fc.constantFrom(1, 2, 4) }).map(({ limit, subWindows }): RateSpec => ({ type: 'sliding_window_counter', limit, windowMs: subWindows * 250, subWindows })),
  fc.record({ type: fc.constant('token_bucket' as const), capacity: limitArb, rateUnits: fc.constantFrom(1, 2.5), ratePeriodMs: fc.constant(1000) }),
  fc.record({ type: fc.constant('leaky_bucket' as const), capacity: limitArb, rateUnits: fc.constantFrom(1, 0.5), ratePeriodMs: fc.constant(1000) }),
  fc.record({ type: fc.constant('quota' as const), limit: limitArb, periodMs: windowArb }),
  fc.record({ type: fc.constant('concurrency' as const), maxConcurrency: fc.integer({ min: 1, max: 3 }), leaseTtlMs: fc.constantFrom(50, 1000) }),
);

type Step =
  | { kind: 'group'; cost: number; lease: number; soft: boolean[]; advance: number }
  | { kind: 'refund'; layer: number; cost: number; advance: number };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('group' as const), cost: fc.integer({ min: 1, max: 4 }), lease: fc.nat({ max: 4 }), soft: fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }).map((s) => s.map((x, i) => x && i % 3 === 2)), advance: fc.constantFrom(0, 0, 1, 30, 250, 1000) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('refund' as const), layer: fc.nat({ max: 3 }), cost: fc.integer({ min: 1, max: 3 }), advance: fc.constantFrom(0, 10) }) },
);

const scenarioArb = fc.record({ specs: fc.array(specArb, { minLength: 1, maxLength: 4 }), steps: fc.array(stepArb, { minLength: 1, maxLength: 25 }) });

function operationsOf(specs: CounterSpec[], keys: string[][], step: Extract<Step, { kind: 'group' }>): GroupOperation[] {
  return specs.map((spec, i): GroupOperation =>
    spec.type === 'concurrency'
      ? { op: 'acquire', keys: keys[i], spec, slotId: `l${step.lease}`, soft: step.soft[i] }
      : { op: 'consume', keys: keys[i], spec, cost: step.cost, soft: step.soft[i] },
  );
}

/** What every counter answers to a check now, read without writing (a concurrency counter: for a fresh lease). */
async function peekAll(store: MemoryCounterStore, specs: CounterSpec[], keys: string[][], now: number): Promise<CounterResult[]> {
  const checks = specs.map((spec, i): GroupOperation =>
    spec.type === 'concurrency' ? { op: 'acquire', keys: keys[i], spec, slotId: 'probe' } : { op: 'consume', keys: keys[i], spec, cost: 1 },
  );
  // One more operation that no counter can admit refuses the group: it runs nothing, a pure read.
  const never: RateSpec = { type: 'fixed_window', limit: 1, windowMs: 1000 };
  checks.push({ op: 'consume', keys: ['probe:never'], spec: never, cost: 2 });
  return (await store.group(checks, now)).results.slice(0, specs.length) as CounterResult[];
}

/** The emulator driven as the Redis store runs a group: the whole, or each slot's share on a Cluster. */
async function memoryGroup(memory: MemoryCounterStore, ops: GroupOperation[], now: number, cluster: boolean): Promise<GroupOutcome> {
  if (!cluster) return memory.group(ops, now);
  const outcome: GroupOutcome = { results: new Array(ops.length), committed: new Array(ops.length).fill(false) };
  const bySlot = new Map<number, number[]>();
  ops.forEach((o, i) => bySlot.set(calculateSlot(o.keys[0]), [...(bySlot.get(calculateSlot(o.keys[0])) ?? []), i]));
  for (const positions of bySlot.values()) {
    const share = await memory.group(positions.map((i) => ops[i]), now);
    positions.forEach((i, k) => {
      outcome.results[i] = share.results[k];
      outcome.committed[i] = share.committed[k];
    });
  }
  return outcome;
}

async function replay(redis: CounterStore, cluster: boolean, scenario: { specs: CounterSpec[]; steps: Step[] }): Promise<void> {
  const prefix = randomPrefix();
  let now = T0 + 17;
  const memory = new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0 });
  const keys = scenario.specs.map((spec, i) => counterKeys(prefix, `layer-${i}`, spec, ['user-1']));
  const windowUse = new Map<string, number>();
  try {
    for (const [n, step] of scenario.steps.entries()) {
      now += step.advance;
      const what = `step ${n} ${JSON.stringify(step)} ${JSON.stringify(scenario.specs)}`;
      if (step.kind === 'refund') {
        const i = step.layer % scenario.specs.length;
        const spec = scenario.specs[i];
        if (spec.type === 'concurrency') continue;
        const [a, b] = await Promise.all([redis.refund(keys[i], spec as RateSpec, step.cost, now), memory.refund(keys[i], spec as RateSpec, step.cost, now)]);
        expect(a, what).to.deep.equal(b);
        continue;
      }
      const ops = operationsOf(scenario.specs, keys, step);
      const before = await peekAll(memory, scenario.specs, keys, now);
      const [fromRedis, fromMemory] = await Promise.all([redis.group!(ops, now), memoryGroup(memory, ops, now, cluster)]);
      expect(fromRedis, `${what} redis ${JSON.stringify(fromRedis)} memory ${JSON.stringify(fromMemory)}`).to.deep.equal(fromMemory);
      const refused = fromMemory.results.some((r, i) => !(r as CounterResult).allowed && ops[i].soft !== true);
      if (refused && !cluster) {
        expect(fromMemory.committed, what).to.deep.equal(ops.map(() => false));
        expect(await peekAll(memory, scenario.specs, keys, now), `${what}: a refused group wrote nothing`).to.deep.equal(before);
      }
      scenario.specs.forEach((spec, i) => {
        if (spec.type !== 'fixed_window' || !fromMemory.committed[i]) return;
        const window = `${i}:${Math.floor(now / spec.windowMs)}`;
        windowUse.set(window, (windowUse.get(window) ?? 0) + step.cost);
      });
      // Refunds can give units back, so the window's count is an upper bound only without them.
      if (!scenario.steps.some((s) => s.kind === 'refund')) {
        for (const [window, used] of windowUse) {
          const spec = scenario.specs[Number(window.split(':')[0])] as Extract<RateSpec, { type: 'fixed_window' }>;
          expect(used, `${what}: fixed window ${window} over its limit`).to.be.at.most(spec.limit);
        }
      }
    }
  } finally {
    await memory.close();
  }
}

describe('CounterStore.group: all or nothing, the emulator and batch.lua agree', function () {
  this.timeout(180_000);

  describe('single Redis', () => {
    let redis: RedisCounterStore;
    before(async () => {
      redis = connectRedisStore((await getSuiteRedis()).url);
      await redis.waitUntilReady();
    });
    after(async () => redis?.close());

    it('random stacks, costs, soft operations, refunds and clock steps', async () => {
      await fc.assert(fc.asyncProperty(scenarioArb, (scenario) => replay(redis, false, scenario)), { numRuns: RUNS });
    });

    it('a group on one Redis is one script call, as one step', async () => {
      const prefix = randomPrefix();
      const spec: RateSpec = { type: 'fixed_window', limit: 2, windowMs: 60_000 };
      const ops: GroupOperation[] = [0, 1, 2].map((i) => ({ op: 'consume', keys: counterKeys(prefix, `p${i}`, spec, []), spec, cost: 1 }));
      const calls: string[] = [];
      const unsubscribe = monitorCalls(redis, calls);
      try {
        const first = await redis.group(ops, T0);
        expect(first.committed).to.deep.equal([true, true, true]);
      } finally {
        unsubscribe();
      }
      expect(calls.filter((c) => c === 'evalsha' || c === 'eval')).to.have.length(1);
      // The third consume of one counter refuses the whole group: the other two counters are left at 1.
      await redis.consume(ops[0].keys, spec, 1, T0);
      const refused = await redis.group(ops, T0);
      expect(refused.committed).to.deep.equal([false, false, false]);
      expect((await redis.peek(ops[1].keys, spec, T0)).remaining).to.equal(1);
    });
  });

  describe('Redis Cluster', () => {
    let cluster: RedisClusterHandle;
    let redis: RedisCounterStore;
    before(async function () {
      cluster = await startRedisCluster();
      redis = connectRedisStore(cluster.addr, { commandTimeoutMs: 5_000 });
      await redis.waitUntilReady(10_000);
    });
    after(async () => {
      await redis?.close();
      await cluster?.stop();
    });

    it('each slot is one step: random stacks as on a single Redis', async () => {
      await fc.assert(fc.asyncProperty(scenarioArb, (scenario) => replay(redis, true, scenario)), { numRuns: Math.ceil(RUNS / 2) });
    });
  });
});

/** Counts the script commands the store's client sends while subscribed. */
function monitorCalls(store: RedisCounterStore, calls: string[]): () => void {
  const client = store.client as unknown as { sendCommand(command: { name: string }): unknown };
  const original = client.sendCommand.bind(client);
  client.sendCommand = (command: { name: string }) => {
    calls.push(command.name);
    return original(command);
  };
  return () => {
    client.sendCommand = original;
  };
}
