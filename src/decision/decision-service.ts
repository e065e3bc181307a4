import { performance } from 'node:perf_hooks';
import { invalidField, type CounterStoreUnavailableError } from '../errors.js';
import type { CounterStore } from '../counters/counter-store.js';
import type { Decision } from '../model/decision.js';
import { IGNORED_FIELDS, withIgnoredFields, type RequestContext } from '../model/request-context.js';
import type { Matcher, MatchResult, PolicyFamily, PolicyMatch } from '../matching/matcher.js';
import type { MatcherSource } from '../matching/live-matcher.js';
import type { FailureMode } from '../policy/types.js';
import { acquireCall, consumeCall, peekCall, refundCall, releaseCall } from './counter-calls.js';
import { CounterEvaluator, type CounterAsk } from './counter-evaluator.js';
import type { CounterCall, Evaluation, Operation } from './decision-types.js';
import { enforcedDecision, shadowOnlyDecision, unmatchedDecision, withSlotId } from './decisions.js';
import { DenyCache, type DenyCacheOptions } from './deny-cache.js';
import { decideLayers, decideTogether, shadowAction, type LayerHost } from './layered-decision.js';
import { slotHolderOf, slotIdOf } from './slot-id.js';
import { ProcessLeases, type LendingStore } from '../lease/process-leases.js';
import { DEFAULT_COMMAND_TIMEOUT_MS } from '../redis/redis-connection.js';
import { DEFAULT_LEASE_MAX_WAIT_MS, holdsUnits, type LeaseEvents, type UnitHolders } from '../lease/types.js';

export type { CounterCall, Evaluation, Operation } from './decision-types.js';
export { unmatchedDecision } from './decisions.js';

/** What the recorder (metrics, analytics) learns about each decision. */
export interface DecisionEvent {
  operation: Operation;
  ctx: RequestContext;
  decision: Decision;
  durationSeconds: number;
  /** The shadow policy evaluated beside the deciding one, and whether it would have limited. */
  shadow?: { policyId: string; limited: boolean };
  /** Set when the counter store failed and a failure mode decided. */
  failureMode?: FailureMode;
}

export interface DecisionRecorder {
  record(event: DecisionEvent): void;
}

export interface DecisionServiceDeps {
  policies: MatcherSource;
  counters: CounterStore;
  keyPrefix: string;
  recorder?: DecisionRecorder;
  /** Called once per counter operation that failed (the failure mode then decided). */
  onCounterStoreError?: (error: CounterStoreUnavailableError) => void;
  now?: () => number;
  random?: () => number;
  /**
   * Identities per generation in the counter key cache (see CounterKeyCache); default 32,768: room for
   * a hot working set of tens of thousands of users (its memory when full: BENCHMARKS.md).
   */
  counterKeyCacheSize?: number;
  /**
   * The exact deny cache (deny-cache.ts) for a store that has to wait (Redis): a refused counter and
   * cost is answered in-process until its retry_after. `false` turns it off. A synchronous store
   * (the in-memory emulator) never uses it: its answer already costs no more than the cache's.
   */
  denyCache?: DenyCacheOptions | false;
  /** Called once per decision (or peek) answered from the deny cache instead of the counter store. */
  onDenyCacheHit?: () => void;
  /**
   * Called once per counter a refused decision over several layers gave back (what its plan took in
   * another Cluster slot, a process lease or a global budget): rl_layer_compensations_total.
   */
  onLayerCompensation?: (policyId: string) => void;
  /** Called once per decision (or peek) whose request had fields the parse ignored, with their number. */
  onIgnoredFields?: (count: number) => void;
  /** RL_REGION: named in `metadata.region` of every decision on a `budget: "global"` policy. */
  region?: string;
  /**
   * Process leases (docs/reference.md "Two kinds of lease", src/lease): with a store that has to wait and can lend
   * units (Redis), the counters of policies with a `lease` are answered from units this process took
   * in advance. `events` gives a holder its metric hooks, `maxWaitMs` is RL_LEASE_MAX_WAIT_MS (default
   * 100), `takeTimeoutMs` the store's command timeout RL_COUNTERSTORE_TIMEOUT_MS (default the store's
   * default), a take's deadline at the store; `false` turns leases off. A synchronous store (memory
   * mode) never leases: the field is accepted and changes nothing.
   */
  leases?: { events?: (policyId: string) => LeaseEvents; maxWaitMs?: number; takeTimeoutMs?: number } | false;
}

/** What only tests set, apart from the service's configuration (the second argument of its constructor). */
export interface DecisionTestSeams {
  /**
   * Hand this service's clock reading to an asynchronous store as the operation's time (the Redis
   * scripts then count at that instant instead of Redis TIME), so a test with an injected clock drives
   * Redis deterministically.
   */
  clockToStore?: boolean;
}

/** What a decision's last steps need: the operation, the request and when it started (for the recorder). */
interface Finishing {
  readonly operation: Operation;
  readonly ctx: RequestContext;
  readonly started: number;
}

/** One decision under way: what it asks of its counters and what its last steps need. */
interface DecisionRun extends CounterAsk, Finishing {}

/** A DecisionRun the synchronous path refills for each decision: nothing keeps it past the decision. */
type SyncRun = { -readonly [K in keyof DecisionRun]: DecisionRun[K] };



/**
 * The decision logic, free of any transport: HTTP, gRPC and the Envoy adapter call its four methods
 * (check, acquire, release, refund) with a validated RequestContext and map the Decision to their wire format.
 *
 * Two paths, one logic: when the counter store can answer synchronously (`CounterStore.sync`, the
 * in-memory emulator) a decision runs start to finish without awaiting anything and returns one
 * settled promise; otherwise (Redis) the counter operations are awaited. Matching, key lookup, the
 * counter calls, failure handling and the decision itself are the same functions on both paths.
 */
export class DecisionService {
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly counters: CounterEvaluator;
  /** The policy snapshot the cached keys belong to; a new snapshot brings new CompiledPolicy objects. */
  private keysMatcher: Matcher | undefined;
  /** Only with a store that has to wait (see DecisionServiceDeps.denyCache). */
  readonly denyCache: DenyCache | undefined;
  /** Only with a store that has to wait and can lend units (see DecisionServiceDeps.leases). */
  readonly leases: ProcessLeases | undefined;
  /**
   * Everything that holds units for this process: its process leases, then its counter store when that
   * holds units itself (a region's). The one door to let go: policy changes and drain reach them here.
   */
  private readonly holders: UnitHolders[] = [];
  /** What a decision over several layers uses of this service (layered-decision.ts). */
  private readonly layers: LayerHost;
  /** The synchronous path's run: it decides start to finish before returning, so one object serves every decision. */
  private readonly syncRun: SyncRun = { operation: 'check', call: consumeCall, ctx: undefined as unknown as RequestContext, slotId: '', nowMs: 0, started: 0 };

  constructor(private readonly deps: DecisionServiceDeps, seams: DecisionTestSeams = {}) {
    this.now = deps.now ?? Date.now;
    this.random = deps.random ?? Math.random;
    this.denyCache = deps.counters.sync === undefined && deps.denyCache !== false ? new DenyCache(deps.denyCache) : undefined;
    const store = deps.counters;
    if (store.sync === undefined && deps.leases !== false && store.take !== undefined && store.giveBack !== undefined) {
      this.leases = new ProcessLeases({
        store: store as LendingStore,
        events: deps.leases?.events,
        maxWaitMs: deps.leases?.maxWaitMs ?? DEFAULT_LEASE_MAX_WAIT_MS,
        takeTimeoutMs: deps.leases?.takeTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
      });
      this.holders.push(this.leases);
    }
    if (holdsUnits(store)) this.holders.push(store);
    const clockToStore = seams.clockToStore === true;
    this.counters = new CounterEvaluator({ ...deps, denyCache: this.denyCache, leases: this.leases, clockToStore });
    this.layers = this.layerHost(clockToStore);
    if (this.holders.length > 0) {
      deps.policies.onChange?.(() => {
        const matcher = deps.policies.current();
        for (const holder of this.holders) void holder.policiesChanged((policyId) => matcher.get(policyId));
      });
    }
  }

  private layerHost(clockToStore: boolean): LayerHost {
    const { deps, counters } = this;
    return {
      random: this.random,
      counters: deps.counters,
      onLayerCompensation: deps.onLayerCompensation,
      clockToStore,
      keysOf: (match) => counters.keysOf(match),
      // Each layer's request is handed on as it is: no object per counter asked.
      evaluateSync: (ops, run, match, nowMs) => counters.evaluateSync(ops, run, match, nowMs),
      evaluate: (run, match) => counters.evaluate(run, match),
      grouped: (run, match, answer) => counters.grouped(run, match, answer),
      enforcedDecision,
      shadowOnlyDecision,
      unmatched: () => unmatchedDecision('no_matching_policy'),
      finish: (run, decision, enforced, shadowed) => this.finish(run, decision, enforced, shadowed),
      storeNow: (sync, nowMs) => (sync.clock === this.now ? nowMs : undefined),
      giveBack: (run, match) => counters.giveBack(run, match),
      giveBackSync: (sync, run, match, nowMs) => counters.giveBackSync(sync, run, match, nowMs),
    };
  }

  /**
   * Drain (before the counter store closes): process leases give their unspent units back first (to
   * the region's units, when below a region), then the region's go back to the global counter.
   */
  async letGoLeases(): Promise<void> {
    for (const holder of this.holders) await holder.letGoAll();
  }

  check(ctx: RequestContext): Promise<Decision> {
    // settled() inlined: the embedded hot path (no closure per call).
    try {
      const decided = this.decideNow('check', ctx);
      return decided instanceof Promise ? decided : Promise.resolve(decided);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  acquire(ctx: RequestContext): Promise<Decision> {
    return settled(() => this.decideNow('acquire', ctx));
  }

  /**
   * Checks of several requests decided together, all or nothing (Envoy's descriptors of one call): when
   * any is refused, none consumes, in any of its layers. One decision per request.
   */
  checkTogether(contexts: readonly RequestContext[]): Promise<Decision[]> {
    try {
      const started = this.deps.recorder ? performance.now() : 0;
      const nowMs = this.now();
      const requests = contexts.map((ctx) => {
        const matched = this.match(ctx, 'rate', nowMs);
        return { ctx, call: ctx.quantity === 0 ? peekCall : consumeCall, started, layers: matched.layers ?? [matched] };
      });
      const decided = decideTogether(this.layers, nowMs, requests);
      return decided instanceof Promise ? decided : Promise.resolve(decided);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  release(ctx: RequestContext): Promise<Decision> {
    return settled(() => this.decideNow('release', ctx));
  }

  /** Gives back `quantity` units the same context consumed and did not use (README "Calling it"). */
  refund(ctx: RequestContext): Promise<Decision> {
    return settled(() => this.decideNow('refund', ctx));
  }

  /**
   * One of the four operations, answered synchronously (a Decision) when the counter store can answer
   * synchronously or the deny cache answers a check (Redis mode), else a promise. For callers that
   * answer from a callback (the HTTP fast path): a settled promise still costs a microtask and two
   * closures per request. May throw, where the four methods above reject.
   */
  decideNow(operation: Operation, ctx: RequestContext): Decision | Promise<Decision> {
    if (operation === 'check') return this.decide('check', ctx, 'rate', ctx.quantity === 0 ? peekCall : consumeCall, '');
    if (ctx.quantity === 0) throw invalidField('quantity', `must be at least 1 for ${operation} (0 is a peek, on check only)`);
    if (operation === 'refund') return this.decide('refund', ctx, 'rate', refundCall, '');
    const slotId = slotIdOf(ctx);
    const call = operation === 'acquire' ? acquireCall : releaseCall;
    const decided = this.decide(operation, ctx, 'concurrency', call, slotHolderOf(ctx, slotId));
    return decided instanceof Promise ? decided.then((decision) => withSlotId(decision, slotId)) : withSlotId(decided, slotId);
  }

  private decide(operation: Operation, ctx: RequestContext, family: PolicyFamily, call: CounterCall, slotId: string): Decision | Promise<Decision> {
    const started = this.deps.recorder ? performance.now() : 0;
    const nowMs = this.now();
    const matched = this.match(ctx, family, nowMs);
    if (matched.layers !== undefined) return decideLayers(this.layers, { operation, call, ctx, slotId, nowMs, started, layers: matched.layers });
    const { enforce, shadow } = matched;
    if (operation === 'refund' && enforce === undefined && shadow === undefined) this.refuseLeaseRefund(ctx, nowMs);
    const sync = this.deps.counters.sync;
    if (sync === undefined) return this.decideAsync({ operation, call, ctx, slotId, nowMs, started }, enforce, shadow);
    const run = this.syncRun;
    run.operation = operation;
    run.call = call;
    run.ctx = ctx;
    run.slotId = slotId;
    run.nowMs = nowMs;
    run.started = started;
    // A store on the same clock (both Date.now by default) counts at the instant matching used: one
    // clock read per decision instead of two.
    const counterNowMs = sync.clock === this.now ? nowMs : undefined;
    const enforced = enforce && this.counters.evaluateSync(sync, run, enforce, counterNowMs);
    const shadowed = shadow && this.counters.evaluateSync(sync, run, shadow, counterNowMs);
    return this.conclude(run, enforced, shadowed);
  }

  /**
   * A store that has to wait. A check whose every matched counter has a standing refusal in the deny
   * cache is answered at once, as the store would answer it; otherwise the store is asked (for the
   * counters the cache could not answer).
   */
  private decideAsync(run: DecisionRun, enforce: PolicyMatch | undefined, shadow: PolicyMatch | undefined): Decision | Promise<Decision> {
    const { counters } = this;
    const cache = run.operation === 'check' ? this.denyCache : undefined;
    const enforced = enforce && cache && counters.cachedRefusal(cache, enforce, run.ctx, run.nowMs);
    const shadowed = shadow && cache && counters.cachedRefusal(cache, shadow, run.ctx, run.nowMs);
    if ((enforced || shadowed) && (enforce === undefined || enforced) && (shadow === undefined || shadowed)) {
      // Counted here, once per decision, and only when no store call is made (a partial hit still waits).
      this.deps.onDenyCacheHit?.();
      return this.conclude(run, enforced, shadowed);
    }
    // Each side is an Evaluation already (from the deny cache), a match for the store to evaluate, or absent.
    const enforceAt = enforced ?? enforce;
    const shadowAt = shadowed ?? shadow;
    const enforcing = enforceAt && !isEvaluation(enforceAt) ? counters.evaluate(run, enforceAt) : enforceAt;
    const shadowing = shadowAt && !isEvaluation(shadowAt) ? counters.evaluate(run, shadowAt) : shadowAt;
    // Answered at once by a process lease (the other side, if any, by the deny cache or a lease too): no promise.
    if (!(enforcing instanceof Promise) && !(shadowing instanceof Promise) && (enforcing?.leased || shadowing?.leased)) {
      return this.conclude(run, enforcing, shadowing);
    }
    return this.awaitCounters(run, enforcing, shadowing);
  }

  private async awaitCounters(
    run: DecisionRun,
    enforcing: Evaluation | Promise<Evaluation> | undefined,
    shadowing: Evaluation | Promise<Evaluation> | undefined,
  ): Promise<Decision> {
    let enforced: Evaluation | undefined;
    let shadowed: Evaluation | undefined;
    if (enforcing instanceof Promise && shadowing instanceof Promise) {
      // The shadow policy counts beside the enforcing one, concurrently: it costs no extra latency.
      [enforced, shadowed] = await Promise.all([enforcing, shadowing]);
    } else {
      // At most one of them waits (the common case: one policy matched): no Promise.all per decision.
      enforced = enforcing instanceof Promise ? await enforcing : enforcing;
      shadowed = shadowing instanceof Promise ? await shadowing : shadowing;
    }
    return this.conclude(run, enforced, shadowed);
  }

  /** A refund that only a concurrency policy would count: leases go back with release, not refund. */
  private refuseLeaseRefund(ctx: RequestContext, nowMs: number): void {
    const lease = this.match(ctx, 'concurrency', nowMs);
    const policy = (lease.enforce ?? lease.shadow)?.compiled.policy;
    if (policy === undefined) return;
    throw invalidField('quantity', `cannot be refunded to concurrency policy "${policy.policy_id}": release its lease instead`);
  }

  private match(ctx: RequestContext, family: PolicyFamily, nowMs: number): MatchResult {
    const matcher = this.deps.policies.current();
    if (matcher !== this.keysMatcher) {
      // Keys are cached per CompiledPolicy: those of an older snapshot will not be asked for again.
      this.counters.forgetKeys();
      this.keysMatcher = matcher;
    }
    return matcher.match(ctx, family, nowMs);
  }

  /** The decision from what the counters answered, recorded. */
  private conclude(run: DecisionRun, enforced: Evaluation | undefined, shadowed: Evaluation | undefined): Decision {
    let decision: Decision;
    if (enforced) {
      decision = enforcedDecision(run.operation, run.ctx, enforced, this.random);
      if (shadowed) {
        decision.metadata.shadow_policy_id = shadowed.match.compiled.policy.policy_id;
        decision.metadata.shadow_action = shadowAction(shadowed);
      }
    } else if (shadowed) {
      decision = shadowOnlyDecision(run.operation, shadowed);
    } else {
      decision = unmatchedDecision('no_matching_policy');
    }
    return this.finish(run, decision, enforced, shadowed);
  }

  /** What every decision gets last: its budget and ignored fields named, recorded unless a peek. */
  private finish({ operation, ctx, started }: Finishing, decision: Decision, enforced: Evaluation | undefined, shadowed: Evaluation | undefined): Decision {
    if ((enforced ?? shadowed)?.match.compiled.spec.global) {
      decision.metadata.budget = 'global';
      if (this.deps.region !== undefined) decision.metadata.region = this.deps.region;
    }
    const ignored = ctx[IGNORED_FIELDS];
    if (ignored !== undefined) {
      withIgnoredFields(decision, ctx);
      this.deps.onIgnoredFields?.(ignored.count);
    }

    if (operation === 'check' && ctx.quantity === 0) {
      // A peek is not a decision: it is answered, never recorded (README "The request", quantity).
      decision.metadata.peek = 'true';
      return decision;
    }
    const recorder = this.deps.recorder;
    if (!recorder) return decision;
    recorder.record({
      operation,
      ctx,
      decision,
      durationSeconds: (performance.now() - started) / 1000,
      shadow: shadowed && {
        policyId: shadowed.match.compiled.policy.policy_id,
        limited: shadowed.result !== undefined && !shadowed.result.allowed,
      },
      // A refund the store could not take is not decided by the failure mode (the units stay spent).
      failureMode: enforced?.failed && operation !== 'refund' ? enforced.match.compiled.policy.failure_mode : undefined,
    });
    return decision;
  }
}

function isEvaluation(value: Evaluation | PolicyMatch): value is Evaluation {
  return 'result' in value || 'failed' in value;
}

/** A decision or a promise of one as a promise that never throws synchronously, as from an async function. */
function settled(decide: () => Decision | Promise<Decision>): Promise<Decision> {
  try {
    const decided = decide();
    return decided instanceof Promise ? decided : Promise.resolve(decided);
  } catch (error) {
    return Promise.reject(error);
  }
}
