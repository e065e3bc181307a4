/**
 * Parity is proven, not hoped (as test/counters/parity.property.test.ts does for the counter scripts):
 * random sequences of region-pool operations at explicit instants run through lua/region_pool.lua on a
 * real Redis and through its in-memory port (MemoryRegionPool), both behind the same RegionPool. Every
 * answer must be identical, and after each operation the stored state too: the hash's fields, and
 * whether the operation (re)set the key's expiry, and to when.
 *
 * The key's expiry: with an explicit `now` Redis expires keys by its own real clock (with a pad,
 * lua/includes/time.lua), so this test plays the store's expiry itself: before each operation it clears
 * the key's TTL (PERSIST), so that a TTL found after it was set by that very operation, and it deletes
 * the key once the simulated time passes the expiry the port holds, which is checked against the TTL the
 * script set. Deterministic: a fixed seed (POOL_PARITY_SEED to explore others), POOL_PARITY_RUNS runs.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import type { RedisCounterStore } from '../../src/redis/redis-store.js';
import { MemoryRegionPool } from './support/memory-region-pool.js';
import { poolKey, RegionPool, type PoolAnswer } from '../../src/regions/region-pool.js';
import { T0, connectRedisStore, getSuiteRedis } from '../support/counter-stores.js';
import { randomPrefix } from '../support/redis.js';

/** lua/includes/time.lua's EXPIRE_PAD_MS: what Redis adds to every TTL set at an explicit time. */
const EXPIRE_PAD_MS = 60_000;
const STRING_FIELDS = new Set<string>(['a_t', 'b_t', 'lk']);

// ---------------------------------------------------------------------------------------------------
// Operations: few keys, tokens and tags, so that locks, generations and windows meet
// ---------------------------------------------------------------------------------------------------

const tokenArb = fc.constantFrom('s1', 's2', 's3');
/** Tags as RegionCounterStore passes them: windows' or buckets' instants; a return's may be none (null). */
const tagArb = fc.constantFrom(1800000000000, 1800000000100, 1800000000250);
const measureArb = fc.constantFrom(100, 1000, 1000);
/**
 * Whose refill an add or a fail is: the one the lock was last given for (0), the one before (1: its lock
 * taken over, or its refill already landed), or one the lock never was given for (2): refused.
 */
const ownerArb = fc.constantFrom(0, 0, 0, 1, 2);

/** Steps of the clock before an operation: mostly none or small, some past lock, hold and window lengths, a few past the key's TTL. */
const stepArb = fc.oneof(
  { weight: 5, arbitrary: fc.constant(0) },
  { weight: 4, arbitrary: fc.integer({ min: 1, max: 20 }) },
  { weight: 3, arbitrary: fc.integer({ min: 21, max: 1_500 }) },
  // On and around the measure periods, lock and down times, and expiries the operations use.
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom(30, 50, 100, 200, 500, 1_000, 2_000), fc.integer({ min: -1, max: 1 })).map(([ms, d]) => ms + d) },
  { weight: 1, arbitrary: fc.integer({ min: -1, max: 1 }).map((d) => 600_000 + d) },
  { weight: 1, arbitrary: fc.integer({ min: 1_500, max: 2_000_000 }) },
);

type PoolOp =
  | { op: 'spend' | 'take'; cost: number; lockMs: number; token: string; measureMs: number; fresh: boolean; waitsFor: number }
  | { op: 'add'; units: number; expiresIn: number; tag: number; window: boolean; parentRemaining: number; owner: number; retryAfterMs: number; asked: number; measureMs: number }
  | { op: 'fail'; owner: number; downMs: number }
  | { op: 'drain'; idleMs: number; window: boolean }
  | { op: 'refund'; units: number; below: number | null | undefined }
  | { op: 'peek' };

type Step = PoolOp & { key: number; step: number };

const poolOpArb: fc.Arbitrary<PoolOp> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      op: fc.constantFrom('spend' as const, 'spend' as const, 'take' as const),
      cost: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 6 }) }, { weight: 1, arbitrary: fc.integer({ min: 7, max: 40 }) }),
      lockMs: fc.constantFrom(1, 50, 1_500),
      token: tokenArb,
      measureMs: measureArb,
      fresh: fc.boolean(),
      // The refill a waiting decision waits for: none yet, or one of the first few (refused or counted
      // again once it has landed; mostly the first, which lands more often than the later ones).
      waitsFor: fc.oneof({ weight: 2, arbitrary: fc.constant(0) }, { weight: 3, arbitrary: fc.constant(1) }, { weight: 2, arbitrary: fc.integer({ min: 2, max: 4 }) }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('add' as const),
      // Often only a few: the pool runs short, and waiting decisions are refused or wait on.
      units: fc.oneof({ weight: 1, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: fc.integer({ min: 1, max: 3 }) }, { weight: 3, arbitrary: fc.integer({ min: 1, max: 30 }) }),
      expiresIn: fc.constantFrom(-1, 0, 1, 50, 500, 1_000, 5_000, 700_000),
      tag: tagArb,
      // A window's tags (other windows' units lapse) or a bucket's (generations side by side).
      window: fc.boolean(),
      parentRemaining: fc.oneof(fc.constantFrom(-1, 0, 0, 1, 2), fc.integer({ min: 0, max: 60 })),
      owner: ownerArb,
      // The parent's retry_after (0: it may admit more): the pool pauses on it (nothing granted) or tells
      // the waiting decisions it refuses what is left of it, so steps land before, on and after its end.
      retryAfterMs: fc.oneof(fc.constantFrom(0, 0, 1, 40, 500), fc.integer({ min: 2, max: 2_000 })),
      asked: fc.integer({ min: 1, max: 30 }),
      measureMs: measureArb,
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('fail' as const), owner: ownerArb, downMs: fc.constantFrom(0, 30, 1_000) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('drain' as const), idleMs: fc.constantFrom(0, 100, 1_000), window: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('refund' as const), units: fc.integer({ min: 1, max: 8 }), below: fc.option(fc.oneof(tagArb, fc.constant(null)), { nil: undefined }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('peek' as const) }) },
);

/**
 * Mostly, as in production, every add and drain of a sequence says the same of its tags (a pool holds one
 * algorithm's units: a window's or a bucket's), so that a bucket's generations pile up side by side.
 */
function stepsArb(step: fc.Arbitrary<number>): fc.Arbitrary<Step[]> {
  const steps = fc.array(
    fc.tuple(poolOpArb, fc.constantFrom(0, 0, 0, 1), step).map(([op, key, ms]): Step => ({ ...op, key, step: ms })),
    { minLength: 1, maxLength: 60 },
  );
  return fc.tuple(steps, fc.constantFrom<boolean | undefined>(true, false, undefined)).map(([all, window]) =>
    window === undefined ? all : all.map((s) => (s.op === 'add' || s.op === 'drain' ? { ...s, window } : s)),
  );
}

/** The refills the lock was given for on a key, in order: what adds and fails name. */
type Refills = string[];

function ownerOf(s: { owner: number }, refills: Refills): string {
  return s.owner === 2 ? 'never-locked:1:1' : (refills[refills.length - 1 - s.owner] ?? 'never-locked:1:1');
}

function apply(pool: RegionPool, key: string, s: Step, now: number, refills: Refills): Promise<PoolAnswer> {
  switch (s.op) {
    case 'spend':
    case 'take':
      return pool.spend(key, s);
    case 'add':
      return pool.add(
        key,
        { units: s.units, expiresAt: now + s.expiresIn, tag: s.tag, window: s.window, parentRemaining: s.parentRemaining, retryAfterMs: s.retryAfterMs, asked: s.asked },
        ownerOf(s, refills),
        s.measureMs,
      );
    case 'fail':
      return pool.fail(key, ownerOf(s, refills), s.downMs);
    case 'drain':
      return pool.drain(key, s.idleMs, s.window);
    case 'refund':
      return pool.refund(key, s.units, s.below === undefined ? undefined : { tag: s.below });
    case 'peek':
      return pool.peek(key);
  }
}

function describeStep(i: number, s: Step, now: number): string {
  const { step: _step, key, ...op } = s;
  return `#${i} k${key} at start+${now - T0}: ${JSON.stringify(op)}`;
}

// ---------------------------------------------------------------------------------------------------
// Replay against both
// ---------------------------------------------------------------------------------------------------

describe('parity: lua/region_pool.lua ≡ MemoryRegionPool (fast-check)', function () {
  this.timeout(120_000);
  let store: RedisCounterStore;
  let admin: Redis;

  before(async function () {
    const handle = await getSuiteRedis();
    store = connectRedisStore(handle.url, { commandTimeoutMs: 5_000 });
    admin = new Redis(handle.url);
  });

  after(async () => {
    await store?.close();
    admin?.disconnect();
  });

  /** The hash as Redis holds it, read as the script reads it (numbers as numbers). */
  async function redisFields(key: string): Promise<Record<string, string | number> | undefined> {
    const hash = await admin.hgetall(key);
    if (Object.keys(hash).length === 0) return undefined;
    return Object.fromEntries(Object.entries(hash).map(([f, v]) => [f, STRING_FIELDS.has(f) ? v : Number(v)]));
  }

  /** The script on Redis and the port, each behind a RegionPool, at the instants of `clock`; two fresh pool keys. */
  function bothPools() {
    const clock = { now: T0 };
    const memory = new MemoryRegionPool(() => clock.now);
    const prefix = randomPrefix();
    return {
      clock,
      redisPool: new RegionPool(store, () => clock.now),
      memory,
      memoryPool: new RegionPool(memory),
      keys: [poolKey(`${prefix}{k0}:fixed_window`), poolKey(`${prefix}{k1}:fixed_window`)],
    };
  }

  it('random operation sequences give identical answers and leave identical pools', async () => {
    // The refill lock's turns, seen across the runs: each must occur, or the property proves nothing of them.
    const seen = { takenOver: 0, refusedTakenOver: 0, refused: 0, landed: 0, failedOwn: 0 };
    await fc.assert(
      fc.asyncProperty(stepsArb(stepArb), async (steps) => {
        const { clock, redisPool, memory, memoryPool, keys } = bothPools();
        const refills: Refills[] = keys.map(() => []);
        const takenOver = new Set<string>();
        const trace: string[] = [];
        for (const [i, s] of steps.entries()) {
          clock.now += s.step;
          const now = clock.now;
          const key = keys[s.key];
          const what = describeStep(i, s, now);
          // The store's expiry, by the simulated clock: the port's, checked below against the script's TTL.
          const stale = memory.stored(key);
          const before = stale !== undefined && now <= stale.expireAt ? stale : undefined;
          if (stale !== undefined && before === undefined) await admin.del(key);
          await admin.persist(key);

          const owner = s.op === 'add' || s.op === 'fail' ? ownerOf(s, refills[s.key]) : undefined;
          const fromRedis = await apply(redisPool, key, s, now, refills[s.key]);
          const fromMemory = await apply(memoryPool, key, s, now, refills[s.key]);
          trace.push(`${what} -> ${JSON.stringify(fromMemory)}`);
          const history = `\n  history (port's answers):\n    ${trace.slice(-12).join('\n    ')}`;
          expect(fromMemory, `answer of ${what}${history}`).to.deep.equal(fromRedis);
          if (fromRedis.refill !== undefined) refills[s.key].push(fromRedis.refill);
          if (fromRedis.stale !== undefined) {
            takenOver.add(`${s.key} ${fromRedis.stale}`);
            seen.takenOver++;
          }
          if (s.op === 'add') seen[fromRedis.spent ? 'landed' : 'refused']++;
          if (s.op === 'add' && takenOver.has(`${s.key} ${owner}`)) {
            // Its take is being reclaimed: its units never join the pool.
            expect(fromRedis.spent, `the add of a refill whose lock was taken over, ${what}${history}`).to.equal(false);
            seen.refusedTakenOver++;
          }
          if (s.op === 'fail' && s.owner === 0) seen.failedOwn++;

          // (The port drops an expired pool when an operation reads it, as Redis does.)
          const after = memory.stored(key);
          expect(after?.fields, `pool after ${what}${history}`).to.deep.equal(await redisFields(key));
          if (after === undefined) continue;
          // A TTL now was set by this operation (PERSIST cleared it before): the port's expiry is then
          // the one the script set, counted down since by Redis's real clock (for far less than the pad,
          // the assumption lua/includes/time.lua makes too). No TTL: the expiry stays where it was.
          const pttl = await admin.pttl(key);
          if (pttl === -1) {
            expect(after.expireAt, `the script left the key's expiry at ${what}${history}`).to.equal(before?.expireAt);
          } else {
            expect(pttl, `the TTL the script set at ${what}${history}`).to.be.at.most(after.expireAt - now + EXPIRE_PAD_MS);
            expect(pttl, `the TTL the script set at ${what}${history}`).to.be.above(after.expireAt - now);
          }
        }
      }),
      { numRuns: Number(process.env.POOL_PARITY_RUNS ?? 2_000), seed: Number(process.env.POOL_PARITY_SEED ?? 21) },
    );
    for (const [turn, count] of Object.entries(seen)) expect(count, turn).to.be.above(0);
  });

  it('operations batched into one script call give the answers of running them one by one', async () => {
    // Within the key's TTL (sequences of at most 60 steps of at most 1.5 s), so no expiry to play.
    const shortStep = fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 3, arbitrary: fc.integer({ min: 1, max: 1_500 }) });
    await fc.assert(
      fc.asyncProperty(stepsArb(shortStep), fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 4 }), async (steps, groupSizes) => {
        const { clock, redisPool, memory, memoryPool, keys } = bothPools();
        const refills: Refills[] = keys.map(() => []);
        for (let start = 0, group = 0; start < steps.length; group++) {
          const batch = steps.slice(start, start + groupSizes[group % groupSizes.length]);
          // All issued in one turn (one batch script call), each at its own instant, naming the refills known before it.
          const known = refills.map((r) => [...r]);
          const fromRedis = batch.map((s) => {
            clock.now += s.step;
            return { s, at: clock.now, answer: apply(redisPool, keys[s.key], s, clock.now, known[s.key]) };
          });
          for (const [i, { s, at, answer }] of fromRedis.entries()) {
            clock.now = at;
            const fromMemory = await apply(memoryPool, keys[s.key], s, at, known[s.key]);
            expect(fromMemory, describeStep(start + i, s, at)).to.deep.equal(await answer);
            if (fromMemory.refill !== undefined) refills[s.key].push(fromMemory.refill);
          }
          for (const key of keys) expect(memory.stored(key)?.fields, `pool ${key} after the batch from #${start}`).to.deep.equal(await redisFields(key));
          start += batch.length;
        }
      }),
      { numRuns: Math.max(10, Math.round(Number(process.env.POOL_PARITY_RUNS ?? 2_000) / 6)), seed: Number(process.env.POOL_PARITY_SEED ?? 21) },
    );
  });
});
