/**
 * Weighted regional shares (lua/includes/shares.lua ≡ src/counters/shares.ts): random sequences of
 * regions' takes, gives and reclaims on a global budget with shares, replayed through the emulator and
 * the Lua scripts with the same explicit times, must answer identically; and on every answer the
 * shares hold: the counter never admits past its limit, a region never holds more than its guarantee
 * plus the common share, and a take that asks no more than what is left of its region's guarantee gets
 * all of it, whatever the other regions took first.
 *
 * Environment knobs: SHARES_PARITY_RUNS (number of sequences), SHARES_PARITY_SEED (replay a seed).
 */
import { expect } from 'chai';
import fc from 'fast-check';
import type { CounterStore, LeaseCounterResult } from '../../src/counters/counter-store.js';
import type { RateSpec } from '../../src/counters/counter-spec.js';
import { counterKeys } from '../../src/counters/keys.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { compileShares } from '../../src/policy/budget-shares.js';
import { DAY_MS, T0, connectRedisStore, getSuiteRedis } from '../support/counter-stores.js';
import { randomPrefix } from '../support/redis.js';

/** eu and us are named in the shares; ap is not (it takes from the common share only). */
const REGIONS = ['eu', 'us', 'ap'] as const;

const sharesArb = fc.oneof(
  fc.record({ eu: fc.integer({ min: 1, max: 5 }), us: fc.integer({ min: 1, max: 5 }), '*': fc.integer({ min: 1, max: 3 }) }),
  fc.record({ eu: fc.integer({ min: 1, max: 5 }), us: fc.integer({ min: 1, max: 5 }) }),
  fc.record({ eu: fc.integer({ min: 1, max: 3 }) }),
);

const specArb: fc.Arbitrary<RateSpec> = fc
  .record({
    type: fc.constantFrom('fixed_window' as const, 'quota' as const, 'sliding_window_counter' as const),
    limit: fc.oneof(fc.integer({ min: 1, max: 12 }), fc.constantFrom(100, 1000)),
    windowMs: fc.constantFrom(100, 1000, 60_000),
    subWindows: fc.constantFrom(1, 2, 4, 5, 10),
    shares: sharesArb,
  })
  .map(({ type, limit, windowMs, subWindows, shares }): RateSpec => {
    const global = { policyId: 'p', shares: compileShares(shares, limit) };
    if (type === 'sliding_window_counter') return { type, limit, windowMs, subWindows, global };
    return type === 'fixed_window' ? { type, limit, windowMs, global } : { type, limit, periodMs: windowMs, global };
  });

type OpName = 'take' | 'take_named' | 'give' | 'give_named' | 'reclaim';
interface Op {
  op: OpName;
  region: number;
  key: number;
  units: number;
  stepMs: number;
  id: number;
}

const opArb: fc.Arbitrary<Op> = fc.record({
  op: fc.constantFrom<OpName>('take', 'take', 'take_named', 'give', 'give_named', 'reclaim'),
  region: fc.nat({ max: REGIONS.length - 1 }),
  key: fc.nat({ max: 1 }),
  units: fc.oneof({ weight: 5, arbitrary: fc.integer({ min: 1, max: 6 }) }, { weight: 1, arbitrary: fc.integer({ min: 7, max: 1_500 }) }),
  stepMs: fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 0, max: 30 }) }, { weight: 1, arbitrary: fc.integer({ min: 31, max: 70_000 }) }),
  id: fc.nat({ max: 5 }),
});

const scenarioArb = fc.record({
  spec: specArb,
  startMs: fc.integer({ min: T0, max: T0 + DAY_MS - 1 }),
  ops: fc.array(opArb, { minLength: 1, maxLength: 50 }),
});

/** The window tag each region's last take answered, per key: what its gives name. */
type Tags = Map<string, number>;

function apply(store: CounterStore, op: Op, spec: RateSpec, keys: string[], now: number, tags: Tags): Promise<LeaseCounterResult> {
  const region = REGIONS[op.region];
  const takeId = `${region}-${op.id}`;
  if (op.op === 'take') return store.take!(keys, spec, op.units, now, { region });
  if (op.op === 'take_named') return store.take!(keys, spec, op.units, now, { region, takeId });
  if (op.op === 'reclaim') return store.reclaim!(keys, spec, { takeId, by: region, region }, now);
  const tag = tags.get(`${keys[0]} ${region}`) ?? 0;
  return store.giveBack!(keys, spec, { units: op.units, windowTag: tag, nowMs: now, named: op.op === 'give_named' ? { takeId, region } : { region } });
}

/** The shares on one answer: within the limit and each region's bound, and a take within its guarantee whole. */
function checkShares(spec: RateSpec & { limit: number }, op: Op, answer: LeaseCounterResult, before: Record<string, number>, what: string): void {
  const { guaranteed, common } = spec.global!.shares!;
  const taken = answer.shareTaken ?? {};
  const total = Object.values(taken).reduce((a, b) => a + b, 0);
  expect(total, `${what}: all regions together`).to.be.at.most(spec.limit);
  let fromCommon = 0;
  for (const [region, units] of Object.entries(taken)) {
    fromCommon += Math.max(0, units - (guaranteed[region] ?? 0));
  }
  expect(fromCommon, `${what}: units past the guarantees`).to.be.at.most(common);
  const region = REGIONS[op.region];
  const own = guaranteed[region] ?? 0;
  if (op.op.startsWith('take') && answer.outcome === 'done' && op.units <= own - (before[region] ?? 0)) {
    expect(answer.units, `${what}: a take within ${region}'s guarantee`).to.equal(op.units);
  }
}

async function replay(redis: CounterStore, scenario: { spec: RateSpec; startMs: number; ops: Op[] }): Promise<void> {
  const prefix = randomPrefix();
  let now = scenario.startMs;
  const memory = new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0 });
  const tags: Tags = new Map();
  /** What the last answer on each key said each region held (a later window can only hold less). */
  const seen = new Map<string, Record<string, number>>();
  const trace: string[] = [];
  try {
    for (const [i, op] of scenario.ops.entries()) {
      now += op.stepMs;
      const { spec } = scenario;
      const keys = counterKeys(prefix, 'p', spec, [`k${op.key}`]);
      const fromRedis = await apply(redis, op, spec, keys, now, tags);
      const fromMemory = await apply(memory, op, spec, keys, now, tags);
      const what = `#${i} ${op.op}(${op.units}) by ${REGIONS[op.region]} on k${op.key} at +${now - scenario.startMs} ${JSON.stringify(spec)}`;
      trace.push(`${what} -> ${JSON.stringify(fromMemory)}`);
      expect(fromRedis, `${what}\n    ${trace.slice(-12).join('\n    ')}`).to.deep.equal(fromMemory);
      expect(fromMemory.shareTaken, what).to.be.an('object');
      checkShares(spec as RateSpec & { limit: number }, op, fromMemory, seen.get(keys[0]) ?? {}, what);
      seen.set(keys[0], fromMemory.shareTaken!);
      if (op.op.startsWith('take') && fromMemory.outcome === 'done') tags.set(`${keys[0]} ${REGIONS[op.region]}`, fromMemory.windowTag);
    }
  } finally {
    await memory.close();
  }
}

describe('shares: emulator ≡ Lua, and the shares hold (fast-check)', function () {
  this.timeout(120_000);
  let redis: CounterStore | undefined;

  before(async () => {
    redis = connectRedisStore((await getSuiteRedis()).url, { commandTimeoutMs: 5_000 });
  });

  after(async () => {
    await redis?.close();
  });

  it('random takes, gives and reclaims of three regions answer identically, within every share', async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, async (scenario) => replay(redis!, scenario)),
      {
        numRuns: Number(process.env.SHARES_PARITY_RUNS ?? 1_000),
        seed: process.env.SHARES_PARITY_SEED === undefined ? undefined : Number(process.env.SHARES_PARITY_SEED),
        interruptAfterTimeLimit: 60_000,
      },
    );
  });

  it('a region flooding first leaves the other its guarantee', async () => {
    // limit 10, eu 3, us 1, * 1: eu 6, us 2, common 2. us asks for everything, then eu gets its 6.
    const spec: RateSpec = { type: 'fixed_window', limit: 10, windowMs: 60_000, global: { policyId: 'p', shares: compileShares({ eu: 3, us: 1, '*': 1 }, 10) } };
    for (const store of [redis!, new MemoryCounterStore({ now: () => T0, sweepIntervalMs: 0 })]) {
      const keys = counterKeys(randomPrefix(), 'p', spec, ['k']);
      const flood = await store.take!(keys, spec, 10, T0, { region: 'us' });
      expect([flood.units, flood.remaining, flood.retryAfterMs, flood.shareTaken]).to.deep.equal([4, 0, 60_000, { us: 4 }]);
      const stranger = await store.take!(keys, spec, 1, T0, { region: 'ap' });
      expect([stranger.units, stranger.allowed, stranger.retryAfterMs]).to.deep.equal([0, false, 60_000]);
      const quiet = await store.take!(keys, spec, 10, T0 + 1, { region: 'eu' });
      expect([quiet.units, quiet.remaining, quiet.shareTaken]).to.deep.equal([6, 0, { eu: 6, us: 4 }]);
      // us gives 3 back: 2 to the common share first, 1 to its own; then eu takes the common 2.
      const back = await store.giveBack!(keys, spec, { units: 3, windowTag: flood.windowTag, nowMs: T0 + 2, named: { region: 'us' } });
      expect([back.units, back.shareTaken]).to.deep.equal([3, { eu: 6, us: 1 }]);
      const more = await store.take!(keys, spec, 5, T0 + 3, { region: 'eu' });
      expect([more.units, more.shareTaken]).to.deep.equal([2, { eu: 8, us: 1 }]);
      // The next window counts anew.
      const next = await store.take!(keys, spec, 10, T0 + 60_000, { region: 'eu' });
      expect([next.units, next.shareTaken]).to.deep.equal([8, { eu: 8 }]);
      if (store instanceof MemoryCounterStore) await store.close();
    }
  });
});
