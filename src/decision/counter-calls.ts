import type { ConcurrencySpec, RateSpec } from '../counters/counter-spec.js';
import type { PolicyMatch } from '../matching/matcher.js';
import type { RequestContext } from '../model/request-context.js';
import type { CounterCall } from './decision-types.js';
import { costOf, neverFits, refusedAsNeverFitting } from './never-fits.js';

/** What each operation asks of a matched policy's counter (module-level: no closure per call). */

/** The cost a check's refusal is cached under: a peek is answered as a consume of 1 would be (docs/algorithms.md, "Peek"). */
export function deniedCostOf(match: PolicyMatch, ctx: RequestContext): number {
  return ctx.quantity === 0 ? 1 : costOf(match, ctx.quantity);
}

export const consumeCall: CounterCall = (ops, keys, match, ctx, _slotId, nowMs) => {
  const spec = match.compiled.spec as RateSpec;
  const cost = costOf(match, ctx.quantity);
  return neverFits(spec, cost) ? refusedAsNeverFitting(ops.peek(keys, spec, nowMs)) : ops.consume(keys, spec, cost, nowMs);
};
export const peekCall: CounterCall = (ops, keys, match, _ctx, _slotId, nowMs) => ops.peek(keys, match.compiled.spec as RateSpec, nowMs);
export const refundCall: CounterCall = (ops, keys, match, ctx, _slotId, nowMs) =>
  ops.refund(keys, match.compiled.spec as RateSpec, costOf(match, ctx.quantity), nowMs);
export const acquireCall: CounterCall = (ops, keys, match, _ctx, slotId, nowMs) =>
  ops.acquire(keys, match.compiled.spec as ConcurrencySpec, slotId, nowMs);
export const releaseCall: CounterCall = (ops, keys, match, _ctx, slotId, nowMs) =>
  ops.release(keys, match.compiled.spec as ConcurrencySpec, slotId, nowMs);
