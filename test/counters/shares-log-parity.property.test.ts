/**
 * Weighted regional shares over a sliding log (lua/includes/shares_log.lua ≡ src/counters/shares-log.ts):
 * random sequences of regions' consumes, peeks and refunds on a sliding_window_log global budget with
 * shares (it leases nothing: each decision names its region), replayed through the emulator and the Lua
 * script with the same explicit times, must answer identically; and on every answer the shares hold:
 * all regions together hold at most the limit, the units past the guarantees are at most the common
 * share, and a consume that asks no more than what is left of its region's guarantee is admitted,
 * whatever the other regions took first. Some sequences mix in operations of no region (counted in the
 * limit only; the guarantee is then not checked).
 *
 * Environment knobs: SHARES_LOG_PARITY_RUNS (number of sequences), SHARES_LOG_PARITY_SEED (replay a seed).
 */
import { expect } from 'chai';
import fc from 'fast-check';
import type { CounterResult, CounterStore } from '../../src/counters/counter-store.js';
import type { RateSpec } from '../../src/counters/counter-spec.js';
import { counterKeys } from '../../src/counters/keys.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { compileShares } from '../../src/policy/budget-shares.js';
import { DAY_MS, T0, connectRedisStore, getSuiteRedis } from '../support/counter-stores.js';
import { randomPrefix } from '../support/redis.js';

/** eu and us are named in the shares; ap is not (it takes from the common share only); '' is no region. */
const REGIONS = ['eu', 'us', 'ap', ''] as const;

const sharesArb = fc.oneof(
  fc.record({ eu: fc.integer({ min: 1, max: 5 }), us: fc.integer({ min: 1, max: 5 }), '*': fc.integer({ min: 1, max: 3 }) }),
  fc.record({ eu: fc.integer({ min: 1, max: 5 }), us: fc.integer({ min: 1, max: 5 }) }),
  fc.record({ eu: fc.integer({ min: 1, max: 3 }) }),
);

const specArb: fc.Arbitrary<RateSpec & { type: 'sliding_window_log' }> = fc
  .record({ limit: fc.oneof(fc.integer({ min: 1, max: 12 }), fc.constantFrom(100, 1000)), windowMs: fc.constantFrom(100, 1000, 60_000), shares: sharesArb })
  .map(({ limit, windowMs, shares }) => ({ type: 'sliding_window_log', limit, windowMs, global: { policyId: 'p', shares: compileShares(shares, limit) } }));

type OpName = 'consume' | 'peek' | 'refund';
interface Op {
  op: OpName;
  region: number;
  key: number;
  units: number;
  stepMs: number;
}

const opArb = (regions: number): fc.Arbitrary<Op> =>
  fc.record({
    op: fc.constantFrom<OpName>('consume', 'consume', 'consume', 'peek', 'refund'),
    region: fc.nat({ max: regions - 1 }),
    key: fc.nat({ max: 1 }),
    units: fc.oneof({ weight: 5, arbitrary: fc.integer({ min: 1, max: 6 }) }, { weight: 1, arbitrary: fc.integer({ min: 7, max: 1_500 }) }),
    stepMs: fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 0, max: 30 }) }, { weight: 1, arbitrary: fc.integer({ min: 31, max: 70_000 }) }),
  });

const scenarioArb = fc.boolean().chain((unregioned) =>
  fc.record({
    spec: specArb,
    startMs: fc.integer({ min: T0, max: T0 + DAY_MS - 1 }),
    unregioned: fc.constant(unregioned),
    ops: fc.array(opArb(unregioned ? REGIONS.length : REGIONS.length - 1), { minLength: 1, maxLength: 60 }),
  }),
);

function apply(store: CounterStore, op: Op, spec: RateSpec, keys: string[], now: number): Promise<CounterResult> {
  const region = REGIONS[op.region] || undefined;
  if (op.op === 'consume') return store.consume(keys, spec, op.units, now, region);
  if (op.op === 'peek') return store.peek(keys, spec, now, region);
  return store.refund(keys, spec, op.units, now, region);
}

/** Counts of what the property met: each kind of answer is exercised. */
const met = { guaranteed: 0, refusedByShare: 0, admittedPastGuarantee: 0 };

/** The shares on one answer: within the limit and the common share, and a consume within its guarantee admitted. */
function checkShares(spec: RateSpec & { limit: number }, op: Op, answer: CounterResult, before: Record<string, number>, guaranteeChecked: boolean, what: string): void {
  const { guaranteed, common } = spec.global!.shares!;
  const taken = answer.shareTaken ?? {};
  const total = Object.values(taken).reduce((a, b) => a + b, 0);
  expect(total, `${what}: all regions together`).to.be.at.most(spec.limit);
  let fromCommon = 0;
  for (const [region, units] of Object.entries(taken)) fromCommon += Math.max(0, units - (guaranteed[region] ?? 0));
  expect(fromCommon, `${what}: units past the guarantees`).to.be.at.most(common);
  const region = REGIONS[op.region];
  const own = guaranteed[region] ?? 0;
  if (op.op !== 'consume') return;
  if (guaranteeChecked && op.units <= own - (before[region] ?? 0)) {
    expect(answer.allowed, `${what}: a consume within ${region}'s guarantee`).to.equal(true);
    met.guaranteed++;
  }
  if (answer.allowed && (taken[region] ?? 0) > own) met.admittedPastGuarantee++;
  if (!answer.allowed && answer.remaining < op.units) met.refusedByShare++;
}

async function replay(redis: CounterStore, scenario: { spec: RateSpec; startMs: number; unregioned: boolean; ops: Op[] }): Promise<void> {
  const prefix = randomPrefix();
  let now = scenario.startMs;
  const memory = new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0 });
  /** What the last answer on each key said each region held (later, it can only hold less). */
  const seen = new Map<string, Record<string, number>>();
  const trace: string[] = [];
  try {
    for (const [i, op] of scenario.ops.entries()) {
      now += op.stepMs;
      const { spec } = scenario;
      const keys = counterKeys(prefix, 'p', spec, [`k${op.key}`]);
      const fromRedis = await apply(redis, op, spec, keys, now);
      const fromMemory = await apply(memory, op, spec, keys, now);
      const what = `#${i} ${op.op}(${op.units}) by ${REGIONS[op.region] || 'no region'} on k${op.key} at +${now - scenario.startMs} ${JSON.stringify(spec)}`;
      trace.push(`${what} -> ${JSON.stringify(fromMemory)}`);
      expect(fromRedis, `${what}\n    ${trace.slice(-12).join('\n    ')}`).to.deep.equal(fromMemory);
      if (REGIONS[op.region] === '') {
        expect(fromMemory.shareTaken, what).to.equal(undefined);
        continue;
      }
      expect(fromMemory.shareTaken, what).to.be.an('object');
      checkShares(spec as RateSpec & { limit: number }, op, fromMemory, seen.get(keys[0]) ?? {}, !scenario.unregioned, what);
      seen.set(keys[0], fromMemory.shareTaken!);
    }
  } finally {
    await memory.close();
  }
}

describe('shares on a sliding log: emulator ≡ Lua, and the shares hold (fast-check)', function () {
  this.timeout(120_000);
  let redis: CounterStore | undefined;

  before(async () => {
    redis = connectRedisStore((await getSuiteRedis()).url, { commandTimeoutMs: 5_000 });
  });

  after(async () => {
    await redis?.close();
  });

  it('random consumes, peeks and refunds of three regions (and of none) answer identically, within every share', async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, async (scenario) => replay(redis!, scenario)),
      {
        numRuns: Number(process.env.SHARES_LOG_PARITY_RUNS ?? 1_000),
        seed: process.env.SHARES_LOG_PARITY_SEED === undefined ? undefined : Number(process.env.SHARES_LOG_PARITY_SEED),
        interruptAfterTimeLimit: 60_000,
      },
    );
    console.log(`      consumes within a guarantee ${met.guaranteed}, admitted past the guarantee ${met.admittedPastGuarantee}, refused by a share ${met.refusedByShare}`);
    for (const [kind, n] of Object.entries(met)) expect(n, kind).to.be.above(0);
  });

  it('a region flooding first leaves the other its guarantee, and its refund takes back only its own entries', async () => {
    // limit 10, eu 3, us 1, * 1: eu 6, us 2, common 2. us floods, then eu gets its 6.
    const spec: RateSpec = { type: 'sliding_window_log', limit: 10, windowMs: 60_000, global: { policyId: 'p', shares: compileShares({ eu: 3, us: 1, '*': 1 }, 10) } };
    for (const store of [redis!, new MemoryCounterStore({ now: () => T0, sweepIntervalMs: 0 })]) {
      const keys = counterKeys(randomPrefix(), 'p', spec, ['k']);
      const floods: CounterResult[] = [];
      for (let i = 0; i < 6; i++) floods.push(await store.consume(keys, spec, 1, T0 + i, 'us'));
      expect(floods.map((f) => f.allowed)).to.deep.equal([true, true, true, true, false, false]);
      // us has its 2 and the common 2; it waits until its first entry leaves the window.
      expect([floods[5].remaining, floods[5].retryAfterMs, floods[5].shareTaken]).to.deep.equal([0, 60_000 - 5, { us: 4 }]);
      const stranger = await store.consume(keys, spec, 1, T0 + 10, 'ap');
      expect([stranger.allowed, stranger.remaining]).to.deep.equal([false, 0]);
      const quiet = await store.consume(keys, spec, 6, T0 + 20, 'eu');
      expect([quiet.allowed, quiet.remaining, quiet.shareTaken]).to.deep.equal([true, 0, { eu: 6, us: 4 }]);
      // us refunds 3: its own newest entries (2 of the common share, then 1 of its guarantee), none of eu's.
      const back = await store.refund(keys, spec, 3, T0 + 30, 'us');
      expect(back.shareTaken).to.deep.equal({ eu: 6, us: 1 });
      const more = await store.consume(keys, spec, 2, T0 + 40, 'eu');
      expect([more.allowed, more.shareTaken]).to.deep.equal([true, { eu: 8, us: 1 }]);
      // The window slides: us's first entry leaves it at +60 s, and with it its units.
      const later = await store.peek(keys, spec, T0 + 60_000, 'us');
      expect([later.allowed, later.shareTaken]).to.deep.equal([true, { eu: 8 }]);
      if (store instanceof MemoryCounterStore) await store.close();
    }
  });
});
