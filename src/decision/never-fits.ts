import type { CounterResult } from '../counters/counter-store.js';
import { capacityOf, type RateSpec } from '../counters/counter-spec.js';
import type { LimitAction } from '../policy/types.js';
import type { PolicyMatch } from '../matching/matcher.js';
import type { RequestContext } from '../model/request-context.js';
import type { LimitedOutcome } from './actions.js';
import type { CounterCall } from './decision-types.js';

/**
 * Requests that can never fit (docs/algorithms.md, "Requests larger than the limit"): a check whose cost
 * exceeds what the counter can ever admit at once (a window's or quota's limit, a bucket's burst) would
 * wait forever, so it is refused with reason `quantity_exceeds_limit` and nothing to wait for
 * (`retry_after` 0). The counter is only peeked: nothing is consumed, and `remaining` and `reset_after`
 * say what they always say about it (a whole counter answers `reset_after` 0).
 */

/** A refusal of a request that can never fit, told apart from one that may fit later. */
export interface NeverFittingResult extends CounterResult {
  neverFits: true;
}

/** Whether `cost` units exceed what the counter admits at once even when whole. */
export function neverFits(spec: RateSpec, cost: number): boolean {
  return cost > capacityOf(spec);
}

/** The answer to such a check from the peek of its counter (a result, or a promise of one, as the store answers). */
export function refusedAsNeverFitting<R>(peeked: R): R {
  if (peeked instanceof Promise) return peeked.then(neverFittingResult) as R;
  return neverFittingResult(peeked as CounterResult) as R;
}

function neverFittingResult(peeked: CounterResult): NeverFittingResult {
  return { allowed: false, remaining: peeked.remaining, retryAfterMs: 0, resetAfterMs: peeked.resetAfterMs, neverFits: true };
}

export function isNeverFitting(result: CounterResult): result is NeverFittingResult {
  return (result as Partial<NeverFittingResult>).neverFits === true;
}

/**
 * What the policy's action makes of it: refused whatever the action (a downgrade or a sample would let
 * through what the limit can never hold), `drop` kept as the caller's cue, every other as `deny` (a
 * `delay` of 0 would only ask again).
 */
export function neverFittingOutcome(action: LimitAction): LimitedOutcome {
  return { allowed: false, action: action === 'drop' ? 'drop' : 'deny', retryAfterMs: 0 };
}

/** Units a request of `quantity` counts for under this policy (refunds give back the same measure). */
export function costOf(match: PolicyMatch, quantity: number): number {
  return Math.min(quantity * (match.compiled.policy.algorithm.cost_per_request ?? 1), 2 ** 53);
}

/** Whether this layer of a check can never admit it: then no layer of the check writes (layered-decision.ts). */
export function neverFitsMatch(match: PolicyMatch, ctx: RequestContext): boolean {
  return ctx.quantity > 0 && neverFits(match.compiled.spec as RateSpec, costOf(match, ctx.quantity));
}

/** Each layer of a check that one of its layers can never admit: read, never written; a layer that can never fit refuses. */
export const readingCheckCall: CounterCall = (ops, keys, match, ctx, _slotId, nowMs) => {
  const spec = match.compiled.spec as RateSpec;
  const peeked = ops.peek(keys, spec, nowMs);
  return neverFits(spec, costOf(match, ctx.quantity)) ? refusedAsNeverFitting(peeked) : peeked;
};
