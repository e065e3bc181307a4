import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { CounterStoreUnavailableError } from '../errors.js';
import type { CounterResult, CounterStore } from '../counters/counter-store.js';
import { capacityOf, type LeaseSpec, type RateSpec } from '../counters/counter-spec.js';
import { counterKeys, lengthPrefixed } from '../counters/keys.js';
import type { Decision, DecisionReason } from '../model/decision.js';
import { CONTEXT_STRING_FIELDS, type RequestContext } from '../model/request-context.js';
import type { CompiledPolicy, Matcher, PolicyFamily, PolicyMatch } from '../policy/matcher.js';
import type { FailureMode } from '../policy/types.js';
import { applyLimitAction } from './actions.js';

export type Operation = 'check' | 'acquire' | 'release';

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

/** The current compiled policy snapshot; swapped when policies change, read on every decision. */
export interface MatcherSource {
  current(): Matcher;
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
}

/** The result of running one matched policy's counter operation. */
type Evaluation =
  | { match: PolicyMatch; result: CounterResult; failed?: undefined }
  | { match: PolicyMatch; result?: undefined; failed: CounterStoreUnavailableError };

/**
 * The decision logic, free of any transport: HTTP, gRPC and the Envoy adapter call these three
 * methods with a validated RequestContext and map the Decision to their wire format.
 */
export class DecisionService {
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly fixedKeys = new WeakMap<CompiledPolicy, string[]>();

  constructor(private readonly deps: DecisionServiceDeps) {
    this.now = deps.now ?? Date.now;
    this.random = deps.random ?? Math.random;
  }

  async check(ctx: RequestContext): Promise<Decision> {
    return this.decide('check', ctx, 'rate', (match) => {
      const spec = match.compiled.spec as RateSpec;
      const cost = Math.min(ctx.quantity * (match.compiled.policy.algorithm.cost_per_request ?? 1), 2 ** 53);
      return this.deps.counters.consume(this.keysOf(match), spec, cost);
    });
  }

  async acquire(ctx: RequestContext): Promise<Decision> {
    const leaseId = leaseIdOf(ctx);
    const decision = await this.decide('acquire', ctx, 'concurrency', (match) =>
      this.deps.counters.acquire(this.keysOf(match), match.compiled.spec as LeaseSpec, leaseId),
    );
    if (decision.matched_policy_id !== '') decision.metadata.lease_id = leaseId;
    return decision;
  }

  async release(ctx: RequestContext): Promise<Decision> {
    const leaseId = leaseIdOf(ctx);
    const decision = await this.decide('release', ctx, 'concurrency', (match) =>
      this.deps.counters.release(this.keysOf(match), match.compiled.spec as LeaseSpec, leaseId),
    );
    if (decision.matched_policy_id !== '') decision.metadata.lease_id = leaseId;
    return decision;
  }

  private async decide(
    operation: Operation,
    ctx: RequestContext,
    family: PolicyFamily,
    run: (match: PolicyMatch) => Promise<CounterResult>,
  ): Promise<Decision> {
    const recorder = this.deps.recorder;
    const started = recorder ? performance.now() : 0;
    const { enforce, shadow } = this.deps.policies.current().match(ctx, family, this.now());
    let enforced: Evaluation | undefined;
    let shadowed: Evaluation | undefined;
    if (enforce && shadow) {
      // The shadow policy counts beside the enforcing one, concurrently: it costs no extra latency.
      [enforced, shadowed] = await Promise.all([this.evaluate(enforce, run), this.evaluate(shadow, run)]);
    } else if (enforce) {
      enforced = await this.evaluate(enforce, run);
    } else if (shadow) {
      shadowed = await this.evaluate(shadow, run);
    }

    let decision: Decision;
    if (enforced) {
      decision = this.enforcedDecision(operation, ctx, enforced);
      if (shadowed) {
        decision.metadata.shadow_policy_id = shadowed.match.compiled.policy.policy_id;
        decision.metadata.shadow_action = shadowAction(shadowed);
      }
    } else if (shadowed) {
      decision = this.shadowOnlyDecision(operation, shadowed);
    } else {
      decision = noMatchDecision();
    }

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
      failureMode: enforced?.failed ? enforced.match.compiled.policy.failure_mode : undefined,
    });
    return decision;
  }

  /** Decisions are built by filling in one fresh object: this runs once per request. */
  private enforcedDecision(operation: Operation, ctx: RequestContext, evaluation: Evaluation): Decision {
    const { policy, spec } = evaluation.match.compiled;
    const decision = baseDecision(evaluation.match, capacityOf(spec));
    if (evaluation.failed) return failureModeDecision(decision, policy.failure_mode);
    if (applyResult(decision, operation, evaluation.result) === 'limited') {
      const outcome = applyLimitAction(policy, ctx, evaluation.result.retryAfterMs, this.random);
      decision.allowed = outcome.allowed;
      decision.action = outcome.action;
      decision.retry_after = outcome.retryAfterMs;
    }
    return decision;
  }

  /** No enforcing policy: the shadow one answers, but never blocks. */
  private shadowOnlyDecision(operation: Operation, evaluation: Evaluation): Decision {
    const decision = baseDecision(evaluation.match, capacityOf(evaluation.match.compiled.spec));
    decision.shadow_mode = true;
    if (evaluation.failed) {
      decision.reason = 'counter_store_unavailable';
    } else if (applyResult(decision, operation, evaluation.result) === 'limited') {
      decision.action = 'shadow_only';
      decision.retry_after = evaluation.result.retryAfterMs;
    }
    return decision;
  }

  private async evaluate(match: PolicyMatch, run: (match: PolicyMatch) => Promise<CounterResult>): Promise<Evaluation> {
    try {
      return { match, result: await run(match) };
    } catch (error) {
      if (!(error instanceof CounterStoreUnavailableError)) throw error;
      this.deps.onCounterStoreError?.(error);
      return { match, failed: error };
    }
  }

  private keysOf(match: PolicyMatch): string[] {
    const { compiled, identity } = match;
    if (identity.length > 0) return counterKeys(this.deps.keyPrefix, compiled.policy.policy_id, compiled.spec, identity);
    // A policy without `*` fields has one counter: its keys are built once per compiled policy (a new
    // Matcher after a policy change brings new CompiledPolicy objects, and the old entries go with them).
    let keys = this.fixedKeys.get(compiled);
    if (!keys) this.fixedKeys.set(compiled, (keys = counterKeys(this.deps.keyPrefix, compiled.policy.policy_id, compiled.spec, identity)));
    return keys;
  }
}

/** What the shadow policy would have done, for metadata.shadow_action. */
function shadowAction(evaluation: Evaluation): string {
  if (evaluation.failed) return evaluation.match.compiled.policy.failure_mode === 'fail_open' ? 'allow' : 'deny';
  return evaluation.result.allowed ? 'allow' : evaluation.match.compiled.policy.action;
}

function baseDecision(match: PolicyMatch, limit: number): Decision {
  return {
    allowed: true,
    action: 'allow',
    reason: 'within_limit',
    matched_policy_id: match.compiled.policy.policy_id,
    remaining: 0,
    retry_after: 0,
    reset_after: 0,
    limit,
    shadow_mode: false,
    metadata: {},
  };
}

/**
 * Fills in what the counter operation answered; returns 'limited' when a check or acquire exceeded
 * the limit, for the caller to apply its action (enforced) or shadow_only (shadow).
 */
function applyResult(decision: Decision, operation: Operation, result: CounterResult): 'done' | 'limited' {
  decision.remaining = result.remaining;
  decision.reset_after = result.resetAfterMs;
  if (operation === 'release') {
    decision.reason = result.allowed ? 'lease_released' : 'lease_not_found';
  } else if (result.allowed) {
    decision.reason = operation === 'acquire' ? 'lease_acquired' : 'within_limit';
  } else {
    decision.reason = 'limit_exceeded';
    return 'limited';
  }
  return 'done';
}

/** The counter store could not answer: the policy's failure_mode decides (CONTRACT.md). */
function failureModeDecision(decision: Decision, mode: FailureMode): Decision {
  decision.reason = 'counter_store_unavailable';
  if (mode === 'fail_closed') {
    decision.allowed = false;
    decision.action = 'deny';
  }
  return decision;
}

function noMatchDecision(): Decision {
  return unmatchedDecision('no_matching_policy');
}

/** An allowing decision that no policy made (no policy matched, or none is known yet). */
export function unmatchedDecision(reason: DecisionReason): Decision {
  return {
    allowed: true,
    action: 'allow',
    reason,
    matched_policy_id: '',
    remaining: 0,
    retry_after: 0,
    reset_after: 0,
    limit: 0,
    shadow_mode: false,
    metadata: {},
  };
}

/**
 * A lease is named by `request_id` when the caller gives one; otherwise by a digest of every
 * identifying field, so an acquire and its release that carry the same fields find the same lease.
 */
export function leaseIdOf(ctx: RequestContext): string {
  if (ctx.request_id !== undefined && ctx.request_id !== '') return ctx.request_id;
  const parts: string[] = [];
  for (const field of CONTEXT_STRING_FIELDS) {
    const value = ctx[field];
    if (value !== undefined) parts.push(field, value);
  }
  for (const key of Object.keys(ctx.tags).sort()) parts.push(`tags.${key}`, ctx.tags[key]);
  return createHash('sha256').update(lengthPrefixed(parts)).digest('base64url').slice(0, 22);
}
