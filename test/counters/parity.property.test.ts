/**
 * Parity is proven, not hoped (the emulator and the Lua scripts must agree): random operation
 * sequences, random keys and random clock steps are replayed through the emulator
 * (MemoryCounterStore) and the Lua scripts (RedisCounterStore) with the same explicit times, and
 * every CounterResult must be identical.
 *
 * Environment knobs: PARITY_RUNS (number of sequences), PARITY_SEED (replay a reported seed; fast-check
 * prints the seed and the path of a failing run, pass PARITY_PATH too to replay exactly that one).
 */
import { expect } from 'chai';
import fc from 'fast-check';
import type { CounterResult, CounterStore, LeaseCounterResult } from '../../src/counters/counter-store.js';
import { isCalendarSpec, type CalendarSpec, type CounterSpec, type ConcurrencySpec, type RateSpec } from '../../src/counters/counter-spec.js';
import { CALENDAR_UNITS, calendarPeriods } from '../../src/util/calendar-period.js';
import { counterKeys } from '../../src/counters/keys.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DAY_MS, T0, connectRedisStore, getSuiteRedis } from '../support/counter-stores.js';
import { randomPrefix } from '../support/redis.js';

// ---------------------------------------------------------------------------------------------------
// Specs: small limits and windows, the defaults (100 per 60s), non-integer rates, odd sub-windows
// ---------------------------------------------------------------------------------------------------

const limitArb = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 10 }) },
  { weight: 1, arbitrary: fc.constantFrom(100, 1000) },
);
const windowArb = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(1, 7, 100, 250, 1000, 1500, 60_000) },
  { weight: 2, arbitrary: fc.integer({ min: 1, max: 5_000 }) },
);
const subWindowsArb = fc.constantFrom(1, 1, 2, 3, 4, 6, 7, 10);
/** Rate = rateUnits per ratePeriodMs: refill_rate/leak_rate (per second, any positive number) or limit/window. */
const rateArb = fc.oneof(
  { weight: 3, arbitrary: fc.record({ rateUnits: fc.constantFrom(1, 2.5, 0.5, 3, 0.1, 7.3, 100), ratePeriodMs: fc.constant(1000) }) },
  { weight: 1, arbitrary: fc.record({ rateUnits: fc.double({ min: 0.01, max: 50, noNaN: true, noDefaultInfinity: true }), ratePeriodMs: fc.constant(1000) }) },
  { weight: 3, arbitrary: fc.record({ rateUnits: limitArb, ratePeriodMs: windowArb }) },
);

/** Calendar periods (algorithm.calendar): zones with daylight saving and with 30-minute offsets. */
const CALENDAR_ZONES = ['UTC', 'Europe/Berlin', 'Australia/Adelaide', 'Asia/Kolkata'] as const;
const calendarSpecArb: fc.Arbitrary<RateSpec> = fc
  .record({ type: fc.constantFrom('fixed_window' as const, 'quota' as const), limit: limitArb, unit: fc.constantFrom(...CALENDAR_UNITS), zone: fc.constantFrom(...CALENDAR_ZONES) })
  .map(({ type, limit, unit, zone }): RateSpec =>
    type === 'fixed_window'
      ? { type, limit, windowMs: 0, calendar: calendarPeriods(unit, zone) }
      : { type, limit, periodMs: 0, calendar: calendarPeriods(unit, zone) });

/** The first instant after T0 at which each zone's offset changes (by the offset's name), to the minute. */
const CLOCK_CHANGES: number[] = CALENDAR_ZONES.filter((z) => z !== 'UTC' && z !== 'Asia/Kolkata').map((zone) => {
  const format = new Intl.DateTimeFormat('en', { timeZone: zone, timeZoneName: 'longOffset' });
  const name = (t: number) => format.format(t);
  let t = T0;
  while (name(t + 3_600_000) === name(T0)) t += 3_600_000;
  while (name(t) === name(T0)) t += 60_000;
  return t;
});

const rateSpecArb: fc.Arbitrary<RateSpec> = fc.oneof(
  fc.record({ type: fc.constant('fixed_window' as const), limit: limitArb, windowMs: windowArb }),
  fc.record({ type: fc.constant('sliding_window_log' as const), limit: limitArb, windowMs: windowArb }),
  // Validation makes sub_window_count divide the window; a few specs that do not (fractional
  // sub-windows) check that even those give the same numbers on both stores.
  fc.oneof(
    { weight: 4, arbitrary: fc.record({ limit: limitArb, subWindows: subWindowsArb, bucketMs: fc.oneof(fc.constantFrom(1, 10, 250, 1000), fc.integer({ min: 1, max: 2_000 })) })
      .map(({ limit, subWindows, bucketMs }): RateSpec => ({ type: 'sliding_window_counter', limit, windowMs: subWindows * bucketMs, subWindows })) },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('sliding_window_counter' as const), limit: limitArb, windowMs: windowArb, subWindows: subWindowsArb }) },
  ),
  fc.tuple(fc.constant('token_bucket' as const), limitArb, rateArb).map(([type, capacity, rate]) => ({ type, capacity, ...rate })),
  fc.tuple(fc.constant('leaky_bucket' as const), limitArb, rateArb).map(([type, capacity, rate]) => ({ type, capacity, ...rate })),
  fc.record({ type: fc.constant('quota' as const), limit: limitArb, periodMs: windowArb }),
  calendarSpecArb,
  // The defaults of a typical policy file.
  fc.constantFrom<RateSpec>(
    { type: 'fixed_window', limit: 100, windowMs: 60_000 },
    { type: 'token_bucket', capacity: 100, rateUnits: 100, ratePeriodMs: 60_000 },
    { type: 'leaky_bucket', capacity: 100, rateUnits: 100, ratePeriodMs: 60_000 },
  ),
);

const leaseSpecArb: fc.Arbitrary<ConcurrencySpec> = fc.record({
  type: fc.constant('concurrency' as const),
  maxConcurrency: fc.integer({ min: 1, max: 4 }),
  leaseTtlMs: fc.constantFrom(1, 50, 1000, 1000, 5000, 5000, 120_000, 120_000),
});

/** The same algorithm with another limit: a live policy change on the same counter key. */
function withOtherLimit(spec: CounterSpec, value: number): CounterSpec {
  switch (spec.type) {
    case 'token_bucket':
    case 'leaky_bucket':
      return { ...spec, capacity: value };
    case 'concurrency':
      return { ...spec, maxConcurrency: Math.min(value, 6) };
    default:
      return { ...spec, limit: value };
  }
}

// ---------------------------------------------------------------------------------------------------
// Operations and clock steps
// ---------------------------------------------------------------------------------------------------

/** A clock step before an operation, resolved against the operation's spec at replay time. */
type Step =
  | { kind: 'fixed'; ms: number }
  /** Around the spec's natural period: window, sub-window, time per unit, lease ttl. */
  | { kind: 'period'; times: number; delta: number }
  /** Around the next multiple of that period (window boundaries are aligned to the epoch). */
  | { kind: 'boundary'; delta: number };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fc.constant<Step>({ kind: 'fixed', ms: 0 }) },
  { weight: 3, arbitrary: fc.integer({ min: 1, max: 50 }).map((ms): Step => ({ kind: 'fixed', ms })) },
  { weight: 1, arbitrary: fc.integer({ min: 51, max: 5_000 }).map((ms): Step => ({ kind: 'fixed', ms })) },
  {
    weight: 3,
    arbitrary: fc
      .record({ times: fc.constantFrom(0.5, 1, 1, 2), delta: fc.integer({ min: -1, max: 1 }) })
      .map((p): Step => ({ kind: 'period', ...p })),
  },
  { weight: 3, arbitrary: fc.integer({ min: -1, max: 1 }).map((delta): Step => ({ kind: 'boundary', delta })) },
  { weight: 1, arbitrary: fc.integer({ min: 10_000, max: 100_000_000 }).map((ms): Step => ({ kind: 'fixed', ms })) },
);

/**
 * take/give: a capacity lease's partial take and window-checked return (give names the window of the
 * key's last take, or the one before it); take_named/give_named/reclaim: named takes and gives (ids from
 * one small pool, so repeats, reclaims before and after their take or give, and a take and a give under
 * one id are common), each with a deadline (ms from now: before, at or after it) or none; a reclaim by one
of two reclaimers, or none.
 */
type RateOpName = 'consume' | 'peek' | 'refund' | 'take' | 'give' | 'give_stale' | 'take_named' | 'give_named' | 'reclaim';
type Op =
  /** `cost`: units consumed, or refunded; ignored by a peek. */
  | { op: RateOpName; spec: number; key: number; cost: number; step: Step; id?: number; deadline?: number; by?: number }
  | { op: 'acquire' | 'release'; spec: number; key: number; lease: number; step: Step };

const costArb = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 1, max: 5 }) },
  { weight: 1, arbitrary: fc.integer({ min: 6, max: 2_000 }) },
);

/** Lease operations mostly close together, so that leases are still held when released. */
const leaseStepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fc.constant<Step>({ kind: 'fixed', ms: 0 }) },
  { weight: 4, arbitrary: fc.integer({ min: 1, max: 50 }).map((ms): Step => ({ kind: 'fixed', ms })) },
  { weight: 2, arbitrary: stepArb },
);

const leaseOpArb: fc.Arbitrary<Op> = fc.record({
  op: fc.constantFrom('acquire' as const, 'acquire' as const, 'release' as const),
  spec: fc.nat(),
  key: fc.nat({ max: 1 }),
  lease: fc.nat({ max: 3 }),
  step: leaseStepArb,
});

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ op: fc.constant('consume' as const), spec: fc.nat(), key: fc.nat({ max: 2 }), cost: costArb, step: stepArb }) },
  // Peeks and refunds mixed into the same sequences: the same scripts in their other two modes.
  { weight: 1, arbitrary: fc.record({ op: fc.constantFrom<RateOpName>('peek', 'refund'), spec: fc.nat(), key: fc.nat({ max: 2 }), cost: costArb, step: stepArb }) },
  // Lease operations: the same scripts in their partial-take and window-checked return modes.
  { weight: 1, arbitrary: fc.record({ op: fc.constantFrom<RateOpName>('take', 'take', 'give', 'give_stale'), spec: fc.nat(), key: fc.nat({ max: 2 }), cost: costArb, step: stepArb }) },
  {
    weight: 2,
    arbitrary: fc.record(
      {
        op: fc.constantFrom<RateOpName>('take_named', 'take_named', 'give_named', 'give_named', 'reclaim'),
        spec: fc.nat(),
        key: fc.nat({ max: 1 }),
        cost: costArb,
        step: leaseStepArb,
        id: fc.nat({ max: 4 }),
        deadline: fc.oneof(fc.integer({ min: -20, max: 20 }), fc.integer({ min: 21, max: 100_000 })),
        by: fc.nat({ max: 1 }),
      },
      { requiredKeys: ['op', 'spec', 'key', 'cost', 'step', 'id'] },
    ),
  },
  { weight: 1, arbitrary: leaseOpArb },
);

function isRateOp(op: Op): op is Extract<Op, { op: RateOpName }> {
  return op.op !== 'acquire' && op.op !== 'release';
}

interface Scenario {
  rateSpecs: RateSpec[];
  leaseSpecs: ConcurrencySpec[];
  startMs: number;
  ops: Op[];
}

const scenarioArb: fc.Arbitrary<Scenario> = fc
  .record({
    rateSpecs: fc.array(rateSpecArb, { minLength: 1, maxLength: 3 }),
    leaseSpecs: fc.array(leaseSpecArb, { minLength: 1, maxLength: 2 }),
    variant: fc.option(limitArb, { nil: undefined }),
    startMs: fc.oneof(
      fc.constant(T0),
      fc.integer({ min: T0, max: T0 + DAY_MS - 1 }),
      // Just before a daylight-saving change: the calendar day around it is 23 or 25 hours.
      fc.tuple(fc.constantFrom(...CLOCK_CHANGES), fc.integer({ min: -3 * 3_600_000, max: 0 })).map(([at, d]) => at + d),
    ),
    ops: fc.oneof(
      { weight: 3, arbitrary: fc.array(opArb, { minLength: 1, maxLength: 60 }) },
      { weight: 1, arbitrary: fc.array(leaseOpArb, { minLength: 1, maxLength: 60 }) },
    ),
  })
  .map(({ rateSpecs, leaseSpecs, variant, startMs, ops }) => ({
    rateSpecs: variant === undefined ? rateSpecs : [...rateSpecs, withOtherLimit(rateSpecs[0], variant) as RateSpec],
    leaseSpecs: variant === undefined ? leaseSpecs : [...leaseSpecs, withOtherLimit(leaseSpecs[0], variant) as ConcurrencySpec],
    startMs,
    ops,
  }));

/** The spec's natural period in ms (at least 1). */
function periodOf(spec: CounterSpec): number {
  switch (spec.type) {
    case 'fixed_window':
    case 'sliding_window_log':
      return spec.windowMs;
    case 'sliding_window_counter':
      return spec.windowMs / spec.subWindows;
    case 'quota':
      return spec.periodMs;
    case 'token_bucket':
    case 'leaky_bucket':
      return spec.ratePeriodMs / spec.rateUnits; // time per unit
    case 'concurrency':
      return spec.leaseTtlMs;
  }
}

function advance(now: number, step: Step, spec: CounterSpec): number {
  if (isCalendarSpec(spec)) return advanceCalendar(now, step, spec);
  const period = Math.max(1, periodOf(spec));
  return stepTo(now, step, Math.round(period * (step.kind === 'period' ? step.times : 0)), Math.ceil(period - (now % period)));
}

/** A calendar spec's steps: its period is the one holding `now`, its boundary that period's end. */
function advanceCalendar(now: number, step: Step, spec: CalendarSpec): number {
  const [start, end] = spec.calendar.periodAt(now);
  return stepTo(now, step, Math.round((end - start) * Math.min(step.kind === 'period' ? step.times : 0, 1)), end - now);
}

/** `now` after `step`, given what a 'period' step moves by (before its delta) and how far the boundary is. */
function stepTo(now: number, step: Step, periodMs: number, toBoundary: number): number {
  const dt = step.kind === 'fixed' ? step.ms : (step.kind === 'period' ? periodMs : toBoundary) + step.delta;
  // Time never runs backwards (the Redis clock does not either).
  return now + Math.max(0, dt);
}

// ---------------------------------------------------------------------------------------------------
// Replay
// ---------------------------------------------------------------------------------------------------

/** A bucket's max_hold in the gives: steps land before, on and after the instant it ends. */
const BUCKET_HOLD_MS = 1000;

/** The window tag of the last take per key (as the emulator answered it): what a give names. */
type TakenTags = Map<string, number>;

async function apply(store: CounterStore, op: Op, spec: CounterSpec, keys: string[], now: number, tags: TakenTags): Promise<CounterResult> {
  if (isRateOp(op)) {
    // sliding_window_log takes no lease: a lease operation on it is a plain consume.
    const leased = spec.type !== 'sliding_window_log';
    if (op.op === 'take' && leased) return store.take!(keys, spec as RateSpec, op.cost, now, { holdMs: BUCKET_HOLD_MS });
    const deadline = op.deadline === undefined ? undefined : now + op.deadline;
    if (op.op === 'take_named' && leased) {
      return store.take!(keys, spec as RateSpec, op.cost, now, { takeId: `id-${op.id}`, deadline, holdMs: BUCKET_HOLD_MS });
    }
    if (op.op === 'reclaim' && leased) {
      const by = op.by === undefined ? undefined : `holder-${op.by}`;
      return store.reclaim!(keys, spec as RateSpec, { takeId: `id-${op.id}`, deadline, by }, now);
    }
    if ((op.op === 'give' || op.op === 'give_stale' || op.op === 'give_named') && leased) {
      const last = tags.get(keys[0]) ?? 0;
      const stale = op.op === 'give_stale';
      // A bucket's give names the instant its units must be back by, as the take answered it (stale: the
      // take's own instant, already past); a window's, the window of the last take or the one before it.
      const tag = spec.type.endsWith('bucket') ? last - (stale ? BUCKET_HOLD_MS : 0) : last - (stale ? 1 : 0);
      const named = op.op === 'give_named' ? { takeId: `id-${op.id}`, deadline } : undefined;
      return store.giveBack!(keys, spec as RateSpec, { units: op.cost, windowTag: tag, nowMs: now, named });
    }
    if (op.op === 'peek') return store.peek(keys, spec as RateSpec, now);
    if (op.op === 'refund') return store.refund(keys, spec as RateSpec, op.cost, now);
    return store.consume(keys, spec as RateSpec, op.cost, now);
  }
  if (op.op === 'acquire') return store.acquire(keys, spec as ConcurrencySpec, `lease-${op.lease}`, now);
  return store.release(keys, spec as ConcurrencySpec, `lease-${op.lease}`, now);
}

async function replay(redis: CounterStore, scenario: Scenario): Promise<void> {
  const prefix = randomPrefix();
  let now = scenario.startMs;
  const memory = new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0 });
  const trace: string[] = [];
  const tags: TakenTags = new Map();
  try {
    for (const [i, op] of scenario.ops.entries()) {
      const pool = isRateOp(op) ? scenario.rateSpecs : scenario.leaseSpecs;
      const spec = pool[op.spec % pool.length];
      now = advance(now, op.step, spec);
      const keys = counterKeys(prefix, 'parity', spec, [`k${op.key}`]);
      const fromRedis = await apply(redis, op, spec, keys, now, tags);
      const fromMemory = await apply(memory, op, spec, keys, now, tags);
      if ('windowTag' in fromMemory) tags.set(keys[0], (fromMemory as LeaseCounterResult).windowTag);
      const what =
        `#${i} ${op.op}(${isRateOp(op) ? op.cost : `lease-${op.lease}`}) key k${op.key} ` +
        `at start+${now - scenario.startMs} (now=${now}) ${JSON.stringify(spec)}`;
      trace.push(`${what} -> ${JSON.stringify(fromMemory)}`);
      if (JSON.stringify(fromMemory) !== JSON.stringify(fromRedis)) {
        throw new Error(
          `parity broken at ${what}\n  memory: ${JSON.stringify(fromMemory)}\n  redis:  ${JSON.stringify(fromRedis)}\n` +
            `  history (memory results):\n    ${trace.slice(-15).join('\n    ')}`,
        );
      }
      expect(fromRedis).to.deep.equal(fromMemory);
    }
  } finally {
    await memory.close();
  }
}

/**
 * The same sequence with the Redis operations issued in groups (`groupSizes`, cycled) without waiting
 * in between, so each group reaches Redis as one batch-script call (RedisCounterStore batches what
 * arrives in one event-loop turn): every result must still equal the emulator's, run one by one.
 */
async function replayBatched(redis: CounterStore, scenario: Scenario, groupSizes: number[]): Promise<void> {
  const prefix = randomPrefix();
  let now = scenario.startMs;
  const memory = new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0 });
  const tags: TakenTags = new Map();
  const prepared = scenario.ops.map((op) => {
    const pool = isRateOp(op) ? scenario.rateSpecs : scenario.leaseSpecs;
    const spec = pool[op.spec % pool.length];
    now = advance(now, op.step, spec);
    return { op, spec, keys: counterKeys(prefix, 'parity-batch', spec, [`k${op.key}`]), now };
  });
  try {
    for (let start = 0, group = 0; start < prepared.length; group++) {
      const batch = prepared.slice(start, start + groupSizes[group % groupSizes.length]);
      // All issued in this turn: one script call.
      // The tags known before the group: both stores' gives in it name the same windows.
      const fromRedis = batch.map((p) => apply(redis, p.op, p.spec, p.keys, p.now, tags));
      const fromMemory: CounterResult[] = [];
      const before = new Map(tags);
      for (const p of batch) {
        now = p.now;
        fromMemory.push(await apply(memory, p.op, p.spec, p.keys, p.now, before));
      }
      for (const [i, p] of batch.entries()) {
        if ('windowTag' in fromMemory[i]) tags.set(p.keys[0], (fromMemory[i] as LeaseCounterResult).windowTag);
      }
      const results = await Promise.all(fromRedis);
      for (const [i, p] of batch.entries()) {
        const what = `#${start + i} (batch of ${batch.length}) ${p.op.op} key k${p.op.key} at start+${p.now - scenario.startMs} ${JSON.stringify(p.spec)}`;
        expect(results[i], what).to.deep.equal(fromMemory[i]);
      }
      start += batch.length;
    }
  } finally {
    await memory.close();
  }
}

/** About 9 s + 8 s on a 2-core machine (each property stops at 90 s whatever happens). */
const DEFAULT_RUNS = 7_000;

describe('parity: MemoryCounterStore ≡ RedisCounterStore (fast-check)', function () {
  this.timeout(120_000);
  let redis: CounterStore | undefined;

  before(async function () {
    const handle = await getSuiteRedis();
    redis = connectRedisStore(handle.url, { commandTimeoutMs: 5_000 });
  });

  after(async () => {
    await redis?.close();
  });

  it('random operation sequences give identical results on both stores', async () => {
    const numRuns = Number(process.env.PARITY_RUNS ?? DEFAULT_RUNS);
    const seed = process.env.PARITY_SEED === undefined ? undefined : Number(process.env.PARITY_SEED);
    const path = process.env.PARITY_PATH;
    await fc.assert(
      fc.asyncProperty(scenarioArb, async (scenario) => {
        await replay(redis as CounterStore, scenario);
      }),
      { numRuns, seed, path, endOnFailure: false, interruptAfterTimeLimit: 90_000 },
    );
  });

  it('operations batched into one script call give the results of running them one by one', async () => {
    const numRuns = Math.max(10, Math.round(Number(process.env.PARITY_RUNS ?? DEFAULT_RUNS) / 7));
    await fc.assert(
      fc.asyncProperty(scenarioArb, fc.array(fc.integer({ min: 1, max: 30 }), { minLength: 1, maxLength: 5 }), async (scenario, groupSizes) => {
        await replayBatched(redis as CounterStore, scenario, groupSizes);
      }),
      {
        numRuns,
        seed: process.env.PARITY_SEED === undefined ? undefined : Number(process.env.PARITY_SEED),
        interruptAfterTimeLimit: 90_000,
      },
    );
  });

  it('a full take ledger (a 1 h window): its expired entries dropped, then its least recently written, alike', async () => {
    // Named takes and gives two a second, then ten; reclaims of takes about a minute old and of gives
    // still to come; old takes asked again (forgotten, evicted or answered). Two counters (even and odd ids).
    const ops: Op[] = [];
    const now: Step = { kind: 'fixed', ms: 0 };
    for (let i = 0; i < 900; i++) {
      const spec = i % 2;
      ops.push({ op: 'take_named', spec, key: 0, cost: 1, step: { kind: 'fixed', ms: i < 500 ? 500 : 100 }, id: i, deadline: 100 });
      if (i % 3 === 0) ops.push({ op: 'give_named', spec, key: 0, cost: 1, step: now, id: 10_000 + i, deadline: 100 });
      if (i % 5 === 0) ops.push({ op: 'reclaim', spec, key: 0, cost: 0, step: now, id: i - 118 - 2 * (i % 3) });
      if (i % 7 === 0) ops.push({ op: 'reclaim', spec, key: 0, cost: 0, step: now, id: 10_000 + i + 6, deadline: 1_000 });
      if (i % 11 === 0) ops.push({ op: 'take_named', spec, key: 0, cost: 1, step: now, id: i - 2 * (140 + (i % 20)) });
    }
    await replay(redis as CounterStore, {
      rateSpecs: [
        { type: 'fixed_window', limit: 100_000, windowMs: 3_600_000 },
        { type: 'token_bucket', capacity: 1_000, rateUnits: 1_000, ratePeriodMs: 3_600_000 },
      ],
      leaseSpecs: [{ type: 'concurrency', maxConcurrency: 1, leaseTtlMs: 1 }],
      startMs: T0,
      ops,
    });
  });

  it('each algorithm, many steps on one key (long histories)', async () => {
    const numRuns = Math.max(10, Math.round(Number(process.env.PARITY_RUNS ?? DEFAULT_RUNS) / 20));
    const longArb = fc.record({
      spec: fc.oneof(rateSpecArb.map((s): CounterSpec => s), leaseSpecArb.map((s): CounterSpec => s)),
      startMs: fc.integer({ min: T0, max: T0 + DAY_MS - 1 }),
      ops: fc.array(opArb.map((o) => ({ ...o, key: 0 })), { minLength: 100, maxLength: 300 }),
    });
    await fc.assert(
      fc.asyncProperty(longArb, async ({ spec, startMs, ops }) => {
        const isLease = spec.type === 'concurrency';
        const fitted: Op[] = ops.map((o) =>
          isLease
            ? { op: isRateOp(o) ? 'acquire' : o.op, spec: 0, key: 0, lease: isRateOp(o) ? o.cost % 6 : o.lease, step: o.step }
            : { op: isRateOp(o) ? o.op : 'consume', spec: 0, key: 0, cost: isRateOp(o) ? o.cost : o.lease + 1, step: o.step },
        );
        await replay(redis as CounterStore, {
          rateSpecs: isLease ? [{ type: 'quota', limit: 1, periodMs: 1 }] : [spec as RateSpec],
          leaseSpecs: isLease ? [spec as ConcurrencySpec] : [{ type: 'concurrency', maxConcurrency: 1, leaseTtlMs: 1 }],
          startMs,
          ops: fitted,
        });
      }),
      {
        numRuns,
        seed: process.env.PARITY_SEED === undefined ? undefined : Number(process.env.PARITY_SEED),
        interruptAfterTimeLimit: 90_000,
      },
    );
  });
});
