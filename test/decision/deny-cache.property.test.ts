/**
 * The deny cache is exact (docs/algorithms.md, "Deny cache"): random sequences of checks, peeks,
 * refunds, policy changes and clock steps go through a DecisionService with the cache and one without,
 * each on its own counters, and every decision must be identical — field for field, retry_after and
 * reset_after included. Once with the emulator behind an asynchronous interface (the cache is only
 * used with a store that has to wait), once with Redis (both services hand their injected clock to the
 * scripts, so Redis counts at the same instants).
 *
 * Environment knobs: DENY_CACHE_RUNS (sequences per store), DENY_CACHE_SEED / DENY_CACHE_PATH (replay).
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService, type DecisionServiceDeps, type DecisionTestSeams } from '../../src/decision/decision-service.js';
import type { Decision } from '../../src/model/decision.js';
import type { RequestContext } from '../../src/model/request-context.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import type { Policy } from '../../src/policy/types.js';
import { T0, connectRedisStore, getSuiteRedis } from '../support/counter-stores.js';
import { awaitingOnly } from '../support/async-store.js';
import { makePolicy } from '../support/policies.js';
import { randomPrefix } from '../support/redis.js';

const DEFAULT_RUNS = 1000;

// ---------------------------------------------------------------------------------------------------
// Policies: every algorithm but concurrency, every action, costs > 1, a shadow policy, a rollout
// ---------------------------------------------------------------------------------------------------

const limitArb = fc.integer({ min: 1, max: 5 });
const windowArb = fc.constantFrom('7ms', '100ms', '400ms', '1s', '4s');
const rateArb = fc.constantFrom(0.5, 2.5, 7.3, 10, 100);

const algorithmArb: fc.Arbitrary<Record<string, unknown>> = fc.oneof(
  fc.record({ type: fc.constant('fixed_window'), limit: limitArb, window: windowArb }),
  fc.record({ type: fc.constant('sliding_window_log'), limit: limitArb, window: windowArb }),
  fc.record({ type: fc.constant('sliding_window_counter'), limit: limitArb, window: fc.constantFrom('100ms', '400ms', '4s'), sub_window_count: fc.constantFrom(1, 2, 4) }),
  fc.record({ type: fc.constant('token_bucket'), limit: limitArb, window: windowArb }),
  fc.record({ type: fc.constant('token_bucket'), limit: limitArb, window: windowArb, refill_rate: rateArb, burst: limitArb }),
  fc.record({ type: fc.constant('leaky_bucket'), limit: limitArb, window: windowArb }),
  fc.record({ type: fc.constant('leaky_bucket'), limit: limitArb, window: windowArb, leak_rate: rateArb }),
  fc.record({ type: fc.constant('quota'), limit: limitArb, quota_period: windowArb }),
);

const actionArb = fc.constantFrom('deny', 'deny', 'delay', 'drop', 'sample', 'downgrade', 'drop_low_priority');

interface PolicyDraft {
  algorithm: Record<string, unknown>;
  action: string;
  costPerRequest: number;
}

const draftArb: fc.Arbitrary<PolicyDraft> = fc.record({
  algorithm: algorithmArb,
  action: actionArb,
  costPerRequest: fc.constantFrom(1, 1, 1, 2, 3),
});

interface PolicySet {
  /** service "a", one counter per user_id. */
  perUser: PolicyDraft;
  /** service "b", one counter for everyone. */
  shared: PolicyDraft;
  /** A shadow policy beside perUser. */
  shadow?: PolicyDraft;
  /** perUser's rollout; below 100 some users fall through to the catch-all. */
  rollout: number;
  catchAll: PolicyDraft;
}

const policySetArb: fc.Arbitrary<PolicySet> = fc.record({
  perUser: draftArb,
  shared: draftArb,
  shadow: fc.option(draftArb, { nil: undefined }),
  rollout: fc.constantFrom(100, 100, 50),
  catchAll: draftArb,
});

function policyOf(id: string, scope: Record<string, string>, draft: PolicyDraft, extra: Record<string, unknown> = {}): Policy {
  return makePolicy({
    policy_id: id,
    scope,
    action: draft.action,
    algorithm: { ...draft.algorithm, cost_per_request: draft.costPerRequest, ...(draft.action === 'sample' ? { sample_rate: 0.5 } : {}) },
    ...extra,
  });
}

function policiesOf(set: PolicySet, limits: Record<string, number>): Policy[] {
  const limited = (d: PolicyDraft, id: string): PolicyDraft => (limits[id] === undefined ? d : { ...d, algorithm: { ...d.algorithm, limit: limits[id] } });
  const list = [
    policyOf('per-user', { service: 'a', user_id: '*' }, limited(set.perUser, 'per-user'), { rollout_percent: set.rollout }),
    policyOf('shared', { service: 'b' }, limited(set.shared, 'shared')),
    policyOf('catch-all', { service: '*' }, limited(set.catchAll, 'catch-all')),
  ];
  if (set.shadow) list.push(policyOf('shadow', { service: 'a', user_id: '*' }, set.shadow, { enforcement_mode: 'shadow' }));
  return list;
}

// ---------------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------------

type Op =
  | { op: 'check'; service: string; user: string; quantity: number; severity?: string; requestId?: string }
  | { op: 'refund'; service: string; user: string; quantity: number }
  /** The last check again, `times` times in a row: a key hammered while refused. */
  | { op: 'repeat'; times: number }
  /** Clock step; `toRetry`: to the last refusal's retry_after plus `ms` (−1, 0, 1), the cache's edge. */
  | { op: 'step'; ms: number; toRetry: boolean }
  /** A live limit change: the one policy updated in place (`incremental`, as PolicyService does), or a rebuild. */
  | { op: 'change'; policy: string; limit: number; incremental: boolean };

const serviceArb = fc.constantFrom('a', 'a', 'b', 'c');
const userArb = fc.constantFrom('u1', 'u1', 'u2', 'u3');

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.record(
      {
        op: fc.constant('check' as const),
        service: serviceArb,
        user: userArb,
        quantity: fc.oneof({ weight: 6, arbitrary: fc.constant(1) }, { weight: 2, arbitrary: fc.integer({ min: 2, max: 4 }) }, { weight: 2, arbitrary: fc.constant(0) }),
        severity: fc.constantFrom('debug', 'warn', 'error'),
        requestId: fc.constantFrom('r1', 'r2', 'r3'),
      },
      { requiredKeys: ['op', 'service', 'user', 'quantity'] },
    ),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('refund' as const), service: serviceArb, user: userArb, quantity: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('repeat' as const), times: fc.integer({ min: 1, max: 6 }) }) },
  {
    weight: 5,
    arbitrary: fc.oneof(
      fc.record({ op: fc.constant('step' as const), ms: fc.constantFrom(0, 1, 2, 5, 30, 100, 333, 1000, 5000), toRetry: fc.constant(false) }),
      fc.record({ op: fc.constant('step' as const), ms: fc.integer({ min: -1, max: 1 }), toRetry: fc.constant(true) }),
    ),
  },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('change' as const), policy: fc.constantFrom('per-user', 'shared', 'catch-all'), limit: fc.integer({ min: 1, max: 6 }), incremental: fc.boolean() }),
  },
);

interface Scenario {
  policies: PolicySet;
  ops: Op[];
}

const scenarioArb: fc.Arbitrary<Scenario> = fc.record({ policies: policySetArb, ops: fc.array(opArb, { minLength: 1, maxLength: 80 }) });

// ---------------------------------------------------------------------------------------------------
// Replay
// ---------------------------------------------------------------------------------------------------


/** The same pseudo-random draws for both services (`sample` without a request_id). */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
}

interface Pair {
  cached: DecisionService;
  reference: DecisionService;
  close(): Promise<void>;
}

type PairFactory = (matcher: LiveMatcher, clock: { now: number }) => Pair;

/** Runs one scenario through both services; returns the deny cache hits. Throws on the first difference. */
async function replay(scenario: Scenario, makePair: PairFactory): Promise<number> {
  const limits: Record<string, number> = {};
  const matcher = new LiveMatcher(policiesOf(scenario.policies, limits));
  const clock = { now: T0 + 12_345 };
  const pair = makePair(matcher, clock);
  let hits = 0;
  const cache = pair.cached.denyCache!;
  let lastRetry = 0;
  let lastCheck: Op | undefined;
  try {
    const ops = scenario.ops.flatMap((op) => {
      if (op.op === 'check') lastCheck = op;
      return op.op === 'repeat' ? Array.from({ length: lastCheck ? op.times : 0 }, () => lastCheck!) : [op];
    });
    for (const [i, op] of ops.entries()) {
      if (op.op === 'step') {
        clock.now += Math.max(0, op.toRetry ? lastRetry + op.ms : op.ms);
        continue;
      }
      if (op.op === 'repeat') continue;
      if (op.op === 'change') {
        limits[op.policy] = op.limit;
        const policies = policiesOf(scenario.policies, limits);
        if (op.incremental) matcher.apply(op.policy, policies.find((p) => p.policy_id === op.policy));
        else matcher.replace(policies);
        continue;
      }
      const ctx: RequestContext = { service: op.service, user_id: op.user, quantity: op.quantity, tags: {} };
      if (op.op === 'check') {
        if (op.severity !== undefined) ctx.severity = op.severity;
        if (op.requestId !== undefined) ctx.request_id = op.requestId;
      }
      const size = cache.size;
      const answeredBefore = cache.answered;
      const call = (service: DecisionService): Promise<Decision> => (op.op === 'check' ? service.check(ctx) : service.refund(ctx));
      const cached = await call(pair.cached);
      const reference = await call(pair.reference);
      // The enforcing side may come from the cache while a shadow policy still asks the store: such a
      // decision is no hit, but its retry_after carries the cache's documented bucket millisecond.
      const fromCache = cache.answered > answeredBefore;
      if (!sameDecision(cached, reference, fromCache ? algorithmOf(matcher, cached.matched_policy_id) : undefined)) {
        throw new Error(
          `op ${i} ${JSON.stringify(op)} at T0+${clock.now - T0}ms (cache held ${size})\n` +
            `  with cache    ${JSON.stringify(cached)}\n  without cache ${JSON.stringify(reference)}`,
        );
      }
      if (!reference.allowed && reference.retry_after > 0) lastRetry = reference.retry_after;
    }
  } finally {
    hits = hitsOf(pair.cached);
    await pair.close();
  }
  return hits;
}

/**
 * Identical, field for field — with the one documented difference: a bucket refusal answered from the
 * cache may have a retry_after 1 ms off the store's (the store's float rounding, see deny-cache.ts).
 */
function sameDecision(cached: Decision, reference: Decision, cachedAlgorithm: string | undefined): boolean {
  if (JSON.stringify(cached) === JSON.stringify(reference)) return true;
  if (cachedAlgorithm !== 'token_bucket' && cachedAlgorithm !== 'leaky_bucket') return false;
  if (Math.abs(cached.retry_after - reference.retry_after) !== 1) return false;
  return JSON.stringify({ ...cached, retry_after: reference.retry_after }) === JSON.stringify(reference);
}

function algorithmOf(matcher: LiveMatcher, policyId: string): string | undefined {
  return matcher.current().get(policyId)?.policy.algorithm.type;
}

const hitCounts = new WeakMap<DecisionService, { hits: number }>();
function hitsOf(service: DecisionService): number {
  return hitCounts.get(service)?.hits ?? 0;
}

/** A service with the cache, counting its hits. */
function cachedService(deps: DecisionServiceDeps, seams?: DecisionTestSeams): DecisionService {
  const count = { hits: 0 };
  const service = new DecisionService({ ...deps, onDenyCacheHit: () => count.hits++ }, seams);
  hitCounts.set(service, count);
  return service;
}

function runOptions(divisor = 1): fc.Parameters<[Scenario, number]> {
  const seed = process.env.DENY_CACHE_SEED === undefined ? undefined : Number(process.env.DENY_CACHE_SEED);
  return {
    numRuns: Math.max(10, Math.round(Number(process.env.DENY_CACHE_RUNS ?? DEFAULT_RUNS) / divisor)),
    seed,
    path: process.env.DENY_CACHE_PATH,
    endOnFailure: false,
  };
}

describe('deny cache: identical decisions with and without it (property)', function () {
  this.timeout(180_000);

  it('emulator: every decision identical, field for field', async () => {
    let hits = 0;
    await fc.assert(
      fc.asyncProperty(scenarioArb, fc.integer({ min: 1, max: 2 ** 31 }), async (scenario, seed) => {
        hits += await replay(scenario, (matcher, clock) => {
          const now = () => clock.now;
          const cachedStore = new MemoryCounterStore({ now, sweepIntervalMs: 0 });
          const referenceStore = new MemoryCounterStore({ now, sweepIntervalMs: 0 });
          return {
            cached: cachedService({ policies: matcher, counters: awaitingOnly(cachedStore), keyPrefix: 'rl:', now, random: seededRandom(seed) }),
            reference: new DecisionService({ policies: matcher, counters: referenceStore, keyPrefix: 'rl:', now, random: seededRandom(seed) }),
            close: async () => {
              await cachedStore.close();
              await referenceStore.close();
            },
          };
        });
      }),
      runOptions(),
    );
    // Not vacuous: refusals were answered from the cache, many times (about one per sequence on average).
    expect(hits).to.be.greaterThan(runOptions().numRuns! / 4);
  });

  it('Redis: every decision identical, field for field', async function () {
    const redis = await getSuiteRedis();
    // A generous timeout: a call that timed out on a loaded machine would be answered by failure mode
    // on one side only, and the two sides' counters would part for reasons that are not the cache's.
    const store = connectRedisStore(redis.url, { commandTimeoutMs: 15_000 });
    let hits = 0;
    try {
      await fc.assert(
        fc.asyncProperty(scenarioArb, fc.integer({ min: 1, max: 2 ** 31 }), async (scenario, seed) => {
          hits += await replay(scenario, (matcher, clock) => {
            const now = () => clock.now;
            const common = { policies: matcher, counters: store, now };
            const seams = { clockToStore: true };
            return {
              cached: cachedService({ ...common, keyPrefix: randomPrefix(), random: seededRandom(seed) }, seams),
              reference: new DecisionService({ ...common, keyPrefix: randomPrefix(), random: seededRandom(seed), denyCache: false }, seams),
              close: async () => {},
            };
          });
        }),
        runOptions(3),
      );
    } finally {
      await store.close();
    }
    expect(hits).to.be.greaterThan(runOptions(3).numRuns! / 4);
  });
});
