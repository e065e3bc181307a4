/**
 * Runs the same counter tests against both backends: `forEachStore((name, getStore) => { it(...) })`
 * defines one mocha `describe` per store. Each test gets a fresh key prefix; the memory store gets a
 * controllable clock (`clock.now`), the Redis store a connection to the suite Redis (one redis-server
 * per test process, started on first use, see redis.ts). Tests that want determinism pass `nowMs`
 * explicitly (`at(ms)`), which both stores honour.
 */
import type { CounterStore } from '../../src/counters/counter-store.js';
import type { CounterSpec } from '../../src/counters/counter-spec.js';
import { counterKeys } from '../../src/counters/keys.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { connectRedisCounterStore, type RedisCounterStore } from '../../src/redis/redis-store.js';
import { randomPrefix, startRedis, type RedisHandle } from './redis.js';

export type StoreName = 'memory' | 'redis';

export interface StoreFixture {
  name: StoreName;
  store: CounterStore;
  /** Fresh per test. */
  prefix: string;
  /** The memory store's clock in epoch ms (the Redis store reads Redis TIME unless `nowMs` is given). */
  clock: { now: number };
  /** `counterKeys` under this test's prefix. */
  keys(policyId: string, spec: CounterSpec, identity?: readonly string[]): string[];
}

/**
 * The start of test time: a whole day boundary at least a day in the future, so every window that
 * divides a day starts exactly at T0, and explicit times never lie in Redis's past (a store that
 * turns explicit times into absolute expiries would otherwise see keys vanish at once).
 */
export const DAY_MS = 86_400_000;
export const T0 = Math.ceil((Date.now() + DAY_MS) / DAY_MS) * DAY_MS;

/** `T0 + offsetMs`. */
export function at(offsetMs: number): number {
  return T0 + offsetMs;
}

let suiteRedis: Promise<RedisHandle> | undefined;

/**
 * The Redis shared by every suite of this test process: started on first use, stopped by a root
 * `after` hook once every test has run (and killed on process exit whatever happens).
 */
export function getSuiteRedis(): Promise<RedisHandle> {
  suiteRedis ??= startRedis();
  return suiteRedis;
}

// Loaded while mocha loads the test files, so this `after` belongs to the root suite.
if (typeof after === 'function') {
  after(async function () {
    const started = suiteRedis;
    suiteRedis = undefined;
    if (started) await (await started).stop();
  });
}

/**
 * A RedisCounterStore on `addr` (any RL_COUNTERSTORE_ADDR form). Tests use a generous command
 * timeout: they check semantics, and a GC pause on a loaded CI machine must not fail them.
 */
export function connectRedisStore(addr: string, options: { commandTimeoutMs?: number } = {}): RedisCounterStore {
  return connectRedisCounterStore(addr, { commandTimeoutMs: 2_000, ...options });
}

export interface RedisNodes {
  readonly a: RedisCounterStore;
  readonly b: RedisCounterStore;
}

/**
 * Two connections to the suite's Redis for the enclosing describe() (two server nodes, as far as Redis
 * can tell), ready before its tests and closed after. Generous timeouts: 1,000 commands in flight on a
 * 2-core machine must not time out.
 */
export function twoRedisNodes(): RedisNodes {
  const nodes: { a?: RedisCounterStore; b?: RedisCounterStore } = {};
  before(async () => {
    const redis = await getSuiteRedis();
    nodes.a = connectRedisStore(redis.url, { commandTimeoutMs: 10_000 });
    nodes.b = connectRedisStore(redis.url, { commandTimeoutMs: 10_000 });
    await Promise.all([nodes.a.waitUntilReady(), nodes.b.waitUntilReady()]);
  });
  after(async () => {
    await Promise.all([nodes.a?.close(), nodes.b?.close()]);
  });
  return nodes as RedisNodes;
}

export interface ForEachStoreOptions {
  /** Restrict to some stores (default both). */
  only?: StoreName[];
  /** Mocha timeout for the Redis variant's hooks (starting redis-server). */
  hookTimeoutMs?: number;
}

/** Defines `describe(<store name>)` for each store, with `getStore()` valid inside its tests. */
export function forEachStore(
  body: (name: StoreName, getStore: () => StoreFixture) => void,
  options: ForEachStoreOptions = {},
): void {
  const names = options.only ?? (['memory', 'redis'] as StoreName[]);
  for (const name of names) {
    describe(`[${name} store]`, function () {
      this.timeout(options.hookTimeoutMs ?? 20_000);
      let fixture: StoreFixture | undefined;
      let shared: CounterStore | undefined;
      const clock = { now: T0 };

      before(async function () {
        if (name === 'redis') {
          const redis = await getSuiteRedis();
          shared = connectRedisStore(redis.url);
        }
      });

      beforeEach(function () {
        clock.now = T0;
        const prefix = randomPrefix();
        const store =
          name === 'memory'
            ? new MemoryCounterStore({ now: () => clock.now, sweepIntervalMs: 0 })
            : (shared as CounterStore);
        fixture = {
          name,
          store,
          prefix,
          clock,
          keys: (policyId, spec, identity = []) => counterKeys(prefix, policyId, spec, identity),
        };
      });

      afterEach(async function () {
        if (fixture?.name === 'memory') await fixture.store.close();
        fixture = undefined;
      });

      after(async function () {
        await shared?.close();
        shared = undefined;
      });

      body(name, () => {
        if (!fixture) throw new Error('getStore() is only valid inside a test');
        return fixture;
      });
    });
  }
}

// ---------------------------------------------------------------------------------------------------
// Contract scenarios: step tables with the exact results both stores must give (explicit times).
// The counter scenarios run them against memory and single Redis, the cluster suite against a cluster.
// ---------------------------------------------------------------------------------------------------

/** `[allowed, remaining, retryAfterMs?, resetAfterMs?]`; omitted fields are not checked. */
export type Expect = [allowed: boolean, remaining: number, retryAfterMs?: number, resetAfterMs?: number];

interface StepBase {
  /** ms after T0 */
  t: number;
  /** Another counter identity (default: the scenario's main one). */
  identity?: string[];
  expect: Expect;
}
export type Step =
  | (StepBase & { consume: number; spec?: CounterSpec })
  | (StepBase & { acquire: string; spec?: CounterSpec })
  | (StepBase & { release: string; spec?: CounterSpec });

export interface Scenario {
  name: string;
  spec: CounterSpec;
  steps: Step[];
}

/** Runs one scenario, failing with the step number and both results on the first mismatch. */
export async function runScenario(
  store: CounterStore,
  keysOf: (policyId: string, spec: CounterSpec, identity?: readonly string[]) => string[],
  scenario: Scenario,
  policyId = 'contract',
): Promise<void> {
  for (const [i, step] of scenario.steps.entries()) {
    const spec = step.spec ?? scenario.spec;
    const keys = keysOf(policyId, spec, step.identity ?? []);
    const now = at(step.t);
    let got;
    let what: string;
    if ('consume' in step) {
      if (spec.type === 'concurrency') throw new Error('consume with a lease spec');
      what = `consume(${step.consume})`;
      got = await store.consume(keys, spec, step.consume, now);
    } else if ('acquire' in step) {
      if (spec.type !== 'concurrency') throw new Error('acquire needs a lease spec');
      what = `acquire(${step.acquire})`;
      got = await store.acquire(keys, spec, step.acquire, now);
    } else {
      if (spec.type !== 'concurrency') throw new Error('release needs a lease spec');
      what = `release(${step.release})`;
      got = await store.release(keys, spec, step.release, now);
    }
    const [allowed, remaining, retryAfterMs, resetAfterMs] = step.expect;
    const want = {
      allowed,
      remaining,
      retryAfterMs: retryAfterMs ?? got.retryAfterMs,
      resetAfterMs: resetAfterMs ?? got.resetAfterMs,
    };
    const gotCmp = { allowed: got.allowed, remaining: got.remaining, retryAfterMs: got.retryAfterMs, resetAfterMs: got.resetAfterMs };
    if (JSON.stringify(gotCmp) !== JSON.stringify(want)) {
      throw new Error(
        `${scenario.name}: step ${i} ${what} at T0+${step.t}ms with ${JSON.stringify(spec)}` +
          `${step.identity ? ` identity ${JSON.stringify(step.identity)}` : ''}\n` +
          `  expected ${JSON.stringify(want)}\n  got      ${JSON.stringify(got)}`,
      );
    }
  }
}

/** n steps consuming `cost` at time t, expecting remaining to count down from `startRemaining`. */
function admitRun(
  n: number, t: number, cost: number, startRemaining: number, reset?: (i: number) => number,
): Step[] {
  return Array.from({ length: n }, (_, i) => ({
    t,
    consume: cost,
    expect: [true, startRemaining - (i + 1) * cost, 0, reset?.(i)] as Expect,
  }));
}

const FW = { type: 'fixed_window', limit: 5, windowMs: 1000 } as const;
const SWL = { type: 'sliding_window_log', limit: 3, windowMs: 1000 } as const;
const SWC1 = { type: 'sliding_window_counter', limit: 10, windowMs: 1000, subWindows: 1 } as const;
const SWC4 = { type: 'sliding_window_counter', limit: 4, windowMs: 1000, subWindows: 4 } as const;
const TB = { type: 'token_bucket', capacity: 5, rateUnits: 1, ratePeriodMs: 200 } as const;
const LB = { type: 'leaky_bucket', capacity: 5, rateUnits: 1, ratePeriodMs: 200 } as const;
const Q = { type: 'quota', limit: 5, periodMs: 1000 } as const;
const L = { type: 'concurrency', maxConcurrency: 2, leaseTtlMs: 1000 } as const;

export const COUNTER_SCENARIOS: Record<string, Scenario[]> = {
  fixed_window: [
    {
      name: 'a fresh key admits exactly limit, then denies until the window ends',
      spec: FW,
      steps: [
        ...admitRun(5, 0, 1, 5, () => 1000),
        { t: 0, consume: 1, expect: [false, 0, 1000, 1000] },
        { t: 999, consume: 1, expect: [false, 0, 1, 1] },
      ],
    },
    {
      name: 'retry_after leads to the next window, which starts from zero',
      spec: FW,
      steps: [
        ...admitRun(5, 0, 1, 5),
        { t: 400, consume: 1, expect: [false, 0, 600, 600] },
        { t: 1000, consume: 1, expect: [true, 4, 0, 1000] }, // 400 + 600
        { t: 1999, consume: 4, expect: [true, 0, 0, 1] },
        { t: 2000, consume: 1, expect: [true, 4, 0, 1000] },
      ],
    },
    {
      name: 'cost > 1, and a denied request consumes nothing',
      spec: FW,
      steps: [
        { t: 0, consume: 3, expect: [true, 2, 0, 1000] },
        { t: 0, consume: 3, expect: [false, 2, 1000, 1000] },
        { t: 10, consume: 3, expect: [false, 2, 990, 990] },
        { t: 20, consume: 2, expect: [true, 0, 0, 980] },
        { t: 0, identity: ['fresh'], consume: 6, expect: [false, 5] },
        { t: 0, identity: ['fresh'], consume: 5, expect: [true, 0, 0, 1000] },
      ],
    },
    {
      name: 'a limit change keeps the counter',
      spec: FW,
      steps: [
        { t: 0, consume: 4, expect: [true, 1, 0, 1000] },
        { t: 100, consume: 1, spec: { ...FW, limit: 10 }, expect: [true, 5, 0, 900] },
        { t: 200, consume: 1, spec: { ...FW, limit: 3 }, expect: [false, 0, 800, 800] },
        { t: 1000, consume: 1, spec: { ...FW, limit: 3 }, expect: [true, 2, 0, 1000] },
      ],
    },
    {
      name: 'default shape: 100 per 60s',
      spec: { type: 'fixed_window', limit: 100, windowMs: 60_000 },
      steps: [
        ...admitRun(100, 30_000, 1, 100, () => 30_000),
        { t: 59_999, consume: 1, expect: [false, 0, 1, 1] },
        { t: 60_000, consume: 100, expect: [true, 0, 0, 60_000] },
      ],
    },
  ],

  sliding_window_log: [
    {
      name: 'a fresh key admits exactly limit; retry_after is when the oldest entry leaves',
      spec: SWL,
      steps: [
        { t: 0, consume: 1, expect: [true, 2, 0, 1000] },
        { t: 100, consume: 1, expect: [true, 1, 0, 1000] },
        { t: 200, consume: 1, expect: [true, 0, 0, 1000] },
        { t: 300, consume: 1, expect: [false, 0, 700, 900] },
        { t: 999, consume: 1, expect: [false, 0, 1, 201] },
        { t: 1000, consume: 1, expect: [true, 0, 0, 1000] }, // 300 + 700: entry at 0 has left
        { t: 1000, consume: 1, expect: [false, 0, 100, 1000] },
        { t: 1099, consume: 1, expect: [false, 0, 1, 901] },
        { t: 1100, consume: 1, expect: [true, 0, 0, 1000] },
      ],
    },
    {
      name: 'cost > 1: retry_after waits for enough entries, denied requests consume nothing',
      spec: SWL,
      steps: [
        { t: 0, consume: 2, expect: [true, 1, 0, 1000] },
        { t: 100, consume: 2, expect: [false, 1, 900, 900] },
        { t: 100, consume: 2, expect: [false, 1, 900, 900] },
        { t: 100, consume: 1, expect: [true, 0, 0, 1000] },
        { t: 500, consume: 3, expect: [false, 0, 600, 600] }, // needs both entries gone: 100 + 1000 - 500
        { t: 1000, consume: 2, expect: [true, 0, 0, 1000] }, // the entry at 0 (cost 2) has left
        { t: 0, identity: ['fresh'], consume: 4, expect: [false, 3] },
        { t: 0, identity: ['fresh'], consume: 3, expect: [true, 0, 0, 1000] },
      ],
    },
    {
      name: 'a limit change keeps the log',
      spec: SWL,
      steps: [
        ...admitRun(3, 0, 1, 3),
        { t: 300, consume: 1, spec: { ...SWL, limit: 5 }, expect: [true, 1, 0, 1000] },
        { t: 400, consume: 1, spec: { ...SWL, limit: 2 }, expect: [false, 0, 600, 900] }, // 4 held: wait for 3 to leave
        { t: 1000, consume: 1, spec: { ...SWL, limit: 2 }, expect: [true, 0, 0, 1000] }, // only the one at 300 is left
      ],
    },
  ],

  sliding_window_counter: [
    {
      name: 'a fresh key admits exactly limit; the previous window is weighted',
      spec: SWC1,
      steps: [
        ...admitRun(10, 0, 1, 10, () => 2000),
        { t: 0, consume: 1, expect: [false, 0, 1000, 2000] },
        { t: 1000, consume: 1, expect: [false, 0, 100, 1000] }, // estimate 10 × 1000/1000 = 10
        { t: 1099, consume: 1, expect: [false, 0, 1, 901] },
        { t: 1100, consume: 1, expect: [true, 0, 0, 1900] }, // 1000 + 100: estimate 9
        { t: 1500, consume: 1, expect: [true, 3, 0, 1500] }, // 1 + 10 × 0.5 = 6, +1
        { t: 2000, consume: 1, expect: [true, 7, 0, 2000] }, // previous window now holds 2
        { t: 3000, consume: 1, expect: [true, 8, 0, 2000] }, // 1 × 1.0 + 1
        { t: 5000, consume: 10, expect: [true, 0, 0, 2000] }, // everything older has gone
      ],
    },
    {
      name: 'cost > 1 and denied requests consume nothing',
      spec: SWC1,
      steps: [
        { t: 0, consume: 6, expect: [true, 4, 0, 2000] },
        { t: 0, consume: 6, expect: [false, 4, 1000, 2000] },
        { t: 0, consume: 4, expect: [true, 0, 0, 2000] },
        { t: 1500, consume: 6, expect: [false, 5, 100, 500] }, // 10 × 0.5 = 5; cost 6 needs ≤ 4 → 600 ms in
        { t: 1600, consume: 6, expect: [true, 0, 0, 1400] }, // 10 × 0.4 = 4, +6
        { t: 0, identity: ['fresh'], consume: 11, expect: [false, 10] },
      ],
    },
    {
      name: 'sub-windows: counts leave one sub-window at a time',
      spec: SWC4,
      steps: [
        { t: 0, consume: 2, expect: [true, 2, 0, 1250] },
        { t: 250, consume: 2, expect: [true, 0, 0, 1250] },
        { t: 500, consume: 1, expect: [false, 0, 250, 1000] },
        { t: 1000, consume: 1, expect: [false, 0, 125, 500] }, // 2 + 2 × 250/250 = 4; need ≤ 3 → 125 ms
        { t: 1125, consume: 1, expect: [true, 0, 0, 1125] }, // 2 + 2 × 0.5 = 3, +1
      ],
    },
    {
      name: 'a limit change keeps the counter',
      spec: SWC1,
      steps: [
        { t: 0, consume: 8, expect: [true, 2, 0, 2000] },
        { t: 0, consume: 5, spec: { ...SWC1, limit: 20 }, expect: [true, 7, 0, 2000] },
        { t: 0, consume: 1, spec: { ...SWC1, limit: 10 }, expect: [false, 0, 1000, 2000] },
      ],
    },
  ],

  token_bucket: [
    {
      name: 'a fresh key admits exactly burst, then refills at the rate',
      spec: TB,
      steps: [
        ...admitRun(5, 0, 1, 5, (i) => (i + 1) * 200),
        { t: 0, consume: 1, expect: [false, 0, 200, 1000] },
        { t: 200, consume: 1, expect: [true, 0, 0, 1000] }, // retry_after later: one token
        { t: 300, consume: 1, expect: [false, 0, 100, 900] }, // half a token
        { t: 400, consume: 1, expect: [true, 0, 0, 1000] },
        { t: 10_000, consume: 1, expect: [true, 4, 0, 200] }, // refill stops at burst
      ],
    },
    {
      name: 'cost > 1 and denied requests consume nothing',
      spec: TB,
      steps: [
        { t: 0, consume: 3, expect: [true, 2, 0, 600] },
        { t: 0, consume: 3, expect: [false, 2, 200, 600] },
        { t: 0, consume: 3, expect: [false, 2, 200, 600] },
        { t: 200, consume: 3, expect: [true, 0, 0, 1000] },
        { t: 0, identity: ['fresh'], consume: 6, expect: [false, 5] },
        { t: 0, identity: ['fresh'], consume: 5, expect: [true, 0, 0, 1000] },
      ],
    },
    {
      name: 'non-integer rate: 2.5 tokens/s',
      spec: { type: 'token_bucket', capacity: 2, rateUnits: 2.5, ratePeriodMs: 1000 },
      steps: [
        { t: 0, consume: 2, expect: [true, 0, 0, 800] },
        { t: 0, consume: 1, expect: [false, 0, 400, 800] },
        { t: 399, consume: 1, expect: [false, 0, 1, 401] },
        { t: 400, consume: 1, expect: [true, 0, 0, 800] },
        { t: 1000, consume: 2, expect: [false, 1, 200, 200] }, // 1.5 tokens
        { t: 1200, consume: 2, expect: [true, 0, 0, 800] },
      ],
    },
    {
      name: 'default rate: 100 per 60s refills exactly 100 in one window',
      spec: { type: 'token_bucket', capacity: 100, rateUnits: 100, ratePeriodMs: 60_000 },
      steps: [
        ...admitRun(100, 0, 1, 100, (i) => (i + 1) * 600),
        { t: 0, consume: 1, expect: [false, 0, 600, 60_000] },
        { t: 600, consume: 1, expect: [true, 0, 0, 60_000] },
        { t: 60_600, consume: 100, expect: [true, 0, 0, 60_000] },
      ],
    },
    {
      name: 'a burst change keeps the tokens',
      spec: TB,
      steps: [
        { t: 0, consume: 5, expect: [true, 0, 0, 1000] },
        { t: 0, consume: 1, spec: { ...TB, capacity: 10 }, expect: [false, 0, 200, 1000] },
        { t: 200, consume: 1, spec: { ...TB, capacity: 10 }, expect: [true, 0, 0, 2000] },
        { t: 0, identity: ['other'], consume: 1, expect: [true, 4, 0, 200] },
        { t: 0, identity: ['other'], consume: 1, spec: { ...TB, capacity: 2 }, expect: [true, 1, 0, 200] },
      ],
    },
  ],

  leaky_bucket: [
    {
      name: 'a fresh key admits exactly burst, then drains at the rate',
      spec: LB,
      steps: [
        ...admitRun(5, 0, 1, 5, (i) => (i + 1) * 200),
        { t: 0, consume: 1, expect: [false, 0, 200, 1000] },
        { t: 200, consume: 1, expect: [true, 0, 0, 1000] },
        { t: 300, consume: 1, expect: [false, 0, 100, 900] },
        { t: 400, consume: 1, expect: [true, 0, 0, 1000] },
        { t: 10_000, consume: 1, expect: [true, 4, 0, 200] },
      ],
    },
    {
      name: 'cost > 1 and denied requests consume nothing',
      spec: LB,
      steps: [
        { t: 0, consume: 3, expect: [true, 2, 0, 600] },
        { t: 0, consume: 3, expect: [false, 2, 200, 600] },
        { t: 0, consume: 3, expect: [false, 2, 200, 600] },
        { t: 200, consume: 3, expect: [true, 0, 0, 1000] },
        { t: 0, identity: ['fresh'], consume: 6, expect: [false, 5] },
        { t: 0, identity: ['fresh'], consume: 5, expect: [true, 0, 0, 1000] },
      ],
    },
    {
      name: 'non-integer rate: 2.5 units/s',
      spec: { type: 'leaky_bucket', capacity: 2, rateUnits: 2.5, ratePeriodMs: 1000 },
      steps: [
        { t: 0, consume: 2, expect: [true, 0, 0, 800] },
        { t: 0, consume: 1, expect: [false, 0, 400, 800] },
        { t: 400, consume: 1, expect: [true, 0, 0, 800] },
        { t: 1000, consume: 2, expect: [false, 1, 200, 200] }, // level 0.5
        { t: 1200, consume: 2, expect: [true, 0, 0, 800] },
      ],
    },
    {
      name: 'a burst change keeps the level',
      spec: LB,
      steps: [
        { t: 0, consume: 5, expect: [true, 0, 0, 1000] },
        { t: 0, consume: 1, spec: { ...LB, capacity: 10 }, expect: [true, 4, 0, 1200] },
        { t: 0, consume: 1, spec: { ...LB, capacity: 3 }, expect: [false, 0, 800, 1200] },
      ],
    },
  ],

  quota: [
    {
      name: 'the period starts with the first use; exactly limit per period',
      spec: Q,
      steps: [
        ...admitRun(5, 300, 1, 5, () => 1000),
        { t: 800, consume: 1, expect: [false, 0, 500, 500] },
        { t: 1299, consume: 1, expect: [false, 0, 1, 1] },
        { t: 1300, consume: 1, expect: [true, 4, 0, 1000] }, // 800 + 500
        { t: 5000, consume: 5, expect: [true, 0, 0, 1000] },
      ],
    },
    {
      name: 'cost > 1 and denied requests consume nothing',
      spec: Q,
      steps: [
        { t: 0, consume: 4, expect: [true, 1, 0, 1000] },
        { t: 10, consume: 2, expect: [false, 1, 990, 990] },
        { t: 20, consume: 1, expect: [true, 0, 0, 980] },
        { t: 0, identity: ['fresh'], consume: 6, expect: [false, 5] },
      ],
    },
    {
      name: 'a quota change keeps the budget used',
      spec: Q,
      steps: [
        { t: 0, consume: 5, expect: [true, 0, 0, 1000] },
        { t: 100, consume: 3, spec: { ...Q, limit: 10 }, expect: [true, 2, 0, 900] },
        { t: 200, consume: 1, spec: { ...Q, limit: 6 }, expect: [false, 0, 800, 800] },
      ],
    },
  ],

  concurrency: [
    {
      name: 'acquire up to max, deny beyond until the oldest lease expires',
      spec: L,
      steps: [
        { t: 0, acquire: 'a', expect: [true, 1, 0, 1000] },
        { t: 100, acquire: 'b', expect: [true, 0, 0, 1000] },
        { t: 200, acquire: 'c', expect: [false, 0, 800, 900] },
        { t: 999, acquire: 'c', expect: [false, 0, 1, 101] },
        { t: 1000, acquire: 'c', expect: [true, 0, 0, 1000] }, // a expired after lease_ttl
        { t: 1000, acquire: 'd', expect: [false, 0, 100, 1000] },
      ],
    },
    {
      name: 're-acquiring a held lease refreshes it and takes no second slot',
      spec: L,
      steps: [
        { t: 0, acquire: 'a', expect: [true, 1, 0, 1000] },
        { t: 100, acquire: 'a', expect: [true, 1, 0, 1000] },
        { t: 200, acquire: 'a', expect: [true, 1, 0, 1000] },
        { t: 300, acquire: 'b', expect: [true, 0, 0, 1000] },
        { t: 400, acquire: 'c', expect: [false, 0, 800, 900] }, // a now expires at 1200
        { t: 1200, acquire: 'c', expect: [true, 0, 0, 1000] },
      ],
    },
    {
      name: 'release frees a slot; unknown leases are not found; counts never go negative',
      spec: L,
      steps: [
        { t: 0, release: 'x', expect: [false, 2, 0, 0] },
        { t: 0, acquire: 'a', expect: [true, 1, 0, 1000] },
        { t: 0, acquire: 'b', expect: [true, 0, 0, 1000] },
        { t: 100, release: 'a', expect: [true, 1, 0, 900] },
        { t: 100, release: 'a', expect: [false, 1, 0, 900] },
        { t: 100, release: 'zz', expect: [false, 1, 0, 900] },
        { t: 100, acquire: 'c', expect: [true, 0, 0, 1000] },
        { t: 200, release: 'b', expect: [true, 1, 0, 900] },
        { t: 200, release: 'c', expect: [true, 2, 0, 0] },
        { t: 200, release: 'c', expect: [false, 2, 0, 0] },
        { t: 200, release: 'b', expect: [false, 2, 0, 0] },
        { t: 300, acquire: 'd', expect: [true, 1, 0, 1000] },
        { t: 300, acquire: 'e', expect: [true, 0, 0, 1000] },
        { t: 300, acquire: 'f', expect: [false, 0, 1000, 1000] },
      ],
    },
    {
      name: 'an expired lease frees its slot and can no longer be released',
      spec: L,
      steps: [
        { t: 0, acquire: 'a', expect: [true, 1, 0, 1000] },
        { t: 0, acquire: 'b', expect: [true, 0, 0, 1000] },
        { t: 1000, release: 'a', expect: [false, 2, 0, 0] },
        { t: 1000, acquire: 'c', expect: [true, 1, 0, 1000] },
      ],
    },
    {
      name: 'a max_concurrency change keeps the leases',
      spec: L,
      steps: [
        { t: 0, acquire: 'a', expect: [true, 1, 0, 1000] },
        { t: 0, acquire: 'b', expect: [true, 0, 0, 1000] },
        { t: 0, acquire: 'c', spec: { ...L, maxConcurrency: 3 }, expect: [true, 0, 0, 1000] },
        { t: 0, acquire: 'd', spec: { ...L, maxConcurrency: 1 }, expect: [false, 0, 1000, 1000] },
        { t: 0, release: 'a', spec: { ...L, maxConcurrency: 1 }, expect: [true, 0, 0, 1000] },
      ],
    },
  ],
};
