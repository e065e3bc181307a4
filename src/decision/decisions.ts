import { capacityOf, windowMsOf } from '../counters/counter-spec.js';
import type { CounterResult } from '../counters/counter-store.js';
import type { PolicyMatch } from '../matching/matcher.js';
import type { Decision, DecisionReason } from '../model/decision.js';
import type { RequestContext } from '../model/request-context.js';
import type { FailureMode, LimitAction } from '../policy/types.js';
import { applyLimitAction } from './actions.js';
import type { Evaluation, Operation } from './decision-types.js';
import { isNeverFitting, neverFittingOutcome } from './never-fits.js';

/** The decision objects every answer is filled in from, and what a counter's answer writes into them. */

/** acquire and release name the lease they acted on (docs/reference.md "Slots, leases and pools"); a decision no policy made has none. */
export function withSlotId(decision: Decision, slotId: string): Decision {
  if (decision.matched_policy_id !== '') decision.metadata.lease_id = slotId;
  return decision;
}

/** The allowing decision every other is filled in from: this runs once per request. */
export function freshDecision(reason: DecisionReason, matchedPolicyId: string, limit: number, window: number): Decision {
  return {
    allowed: true,
    action: 'allow',
    reason,
    matched_policy_id: matchedPolicyId,
    remaining: 0,
    retry_after: 0,
    reset_after: 0,
    limit,
    window,
    shadow_mode: false,
    metadata: {},
  };
}

/** One layer's decision (or the one policy's); `random` draws for a `sample` action (a layer's draw is made before its counter ran). */
export function enforcedDecision(operation: Operation, ctx: RequestContext, evaluation: Evaluation, random: () => number): Decision {
  const { policy } = evaluation.match.compiled;
  const decision = baseDecision(evaluation.match);
  if (evaluation.failed) return operation === 'refund' ? unrefundedDecision(decision) : failureModeDecision(decision, policy.failure_mode);
  if (evaluation.leased) decision.metadata.lease = 'local';
  if (applyResult(decision, operation, evaluation) === 'limited') {
    if (ctx.quantity === 0) return peekLimitedDecision(decision, policy.action, evaluation.result.retryAfterMs);
    const { result } = evaluation;
    const outcome = isNeverFitting(result) ? neverFittingOutcome(policy.action) : applyLimitAction(policy, ctx, result.retryAfterMs, random);
    decision.allowed = outcome.allowed;
    decision.action = outcome.action;
    decision.retry_after = outcome.retryAfterMs;
  }
  return decision;
}

/** No enforcing policy: the shadow one answers, but never blocks. */
export function shadowOnlyDecision(operation: Operation, evaluation: Evaluation): Decision {
  const decision = baseDecision(evaluation.match);
  decision.shadow_mode = true;
  if (evaluation.failed) {
    decision.reason = 'counter_store_unavailable';
  } else if (applyResult(decision, operation, evaluation) === 'limited') {
    decision.action = 'shadow_only';
    decision.retry_after = evaluation.result.retryAfterMs;
  }
  return decision;
}

/** A decision of the matched policy, before its counter's answer is filled in. */
function baseDecision(match: PolicyMatch): Decision {
  const { spec } = match.compiled;
  return freshDecision('within_limit', match.compiled.policy.policy_id, capacityOf(spec), windowMsOf(spec));
}

/** A peek that 1 unit would not pass: refused with the policy's action, whatever that action would do to a real request. */
function peekLimitedDecision(decision: Decision, action: LimitAction, retryAfterMs: number): Decision {
  decision.allowed = false;
  decision.action = action;
  decision.retry_after = retryAfterMs;
  return decision;
}

/** The counter store could not take the refund back: the units stay spent (the safe side), the caller is told why. */
function unrefundedDecision(decision: Decision): Decision {
  decision.reason = 'counter_store_unavailable';
  return decision;
}

/**
 * Fills in what the counter operation answered; returns 'limited' when a check or acquire exceeded
 * the limit, for the caller to apply its action (enforced) or shadow_only (shadow).
 */
function applyResult(decision: Decision, operation: Operation, { result, waitTimedOut }: Evaluation & { result: CounterResult }): 'done' | 'limited' {
  decision.remaining = result.remaining;
  decision.reset_after = result.resetAfterMs;
  if (operation === 'release') {
    decision.reason = result.allowed ? 'lease_released' : 'lease_not_found';
  } else if (operation === 'refund') {
    decision.reason = 'refunded';
  } else if (result.allowed) {
    decision.reason = operation === 'acquire' ? 'lease_acquired' : 'within_limit';
  } else {
    decision.reason = waitTimedOut ? 'lease_wait_timeout' : isNeverFitting(result) ? 'quantity_exceeds_limit' : 'limit_exceeded';
    return 'limited';
  }
  return 'done';
}

/** The counter store could not answer: the policy's failure_mode decides (docs/algorithms.md). */
function failureModeDecision(decision: Decision, mode: FailureMode): Decision {
  decision.reason = 'counter_store_unavailable';
  if (mode === 'fail_closed') {
    decision.allowed = false;
    decision.action = 'deny';
  }
  return decision;
}

/** An allowing decision that no policy made (no policy matched, or none is known yet). */
export function unmatchedDecision(reason: DecisionReason): Decision {
  return freshDecision(reason, '', 0, 0);
}
