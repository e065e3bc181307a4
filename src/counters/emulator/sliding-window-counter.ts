import { leaseResult, type DecisionAnswer } from './answers.js';
import type { AlgorithmCall } from './mode.js';

/** The emulator's sliding_window_counter: mirrors lua/sliding_window_counter.lua. */

interface SlidingCounterState { buckets: Map<number, number> }

export function slidingCounter(call: AlgorithmCall, limit: number, windowMs: number, subWindows: number): DecisionAnswer {
  const { space, now, peeking, refunding, cost, taking, giving, tag: giveTag } = call;
  const key = call.keys[0];
  let { refund } = call;
  const bucketMs = windowMs / subWindows;
  const current = (now - (now % bucketMs)) / bucketMs;
  const elapsed = now - current * bucketMs;
  const buckets = space.get<SlidingCounterState>(key, now)?.buckets ?? new Map<number, number>();
  let full = 0;
  let oldest = 0;
  let newest = -1;
  for (const [index, count] of buckets) {
    if (index < current - subWindows) {
      // Stale: dropped from the stored state, except by a peek, which writes nothing (a later live
      // change of the window could bring the bucket back into it).
      if (!peeking) buckets.delete(index);
    } else {
      if (index === current - subWindows) oldest = count;
      else full = full + count;
      if (index > newest) newest = index;
    }
  }
  if (giving) {
    if (giveTag !== current) {
      // The units' sub-window has ended: they lapsed, and nothing goes back.
      const reset = newest >= 0 ? (newest + subWindows + 1) * bucketMs - now : 0;
      const remaining = Math.max(0, Math.floor(limit - (full + (oldest * (bucketMs - elapsed)) / bucketMs)));
      return leaseResult({ allowed: true, remaining, retryAfterMs: 0, resetAfterMs: reset, units: 0, windowTag: current, windowLeftMs: bucketMs - elapsed });
    }
    // They go back to the sub-window they were taken in, and to no other.
    refund = Math.min(refund, buckets.get(current) ?? 0);
  }
  if (refunding) {
    giveBackNewest(buckets, refund);
    full = 0;
    oldest = 0;
    newest = -1;
    for (const [index, count] of buckets) {
      if (index === current - subWindows) oldest = count;
      else full = full + count;
      if (index > newest) newest = index;
    }
    const reset = newest >= 0 ? (newest + subWindows + 1) * bucketMs - now : 0;
    const remaining = Math.max(0, Math.floor(limit - (full + (oldest * (bucketMs - elapsed)) / bucketMs)));
    if (giving) return leaseResult({ allowed: true, remaining, retryAfterMs: 0, resetAfterMs: reset, units: refund, windowTag: current, windowLeftMs: bucketMs - elapsed });
    return { allowed: true, remaining, retryAfterMs: 0, resetAfterMs: reset };
  }
  const estimate = full + (oldest * (bucketMs - elapsed)) / bucketMs;
  // A take is granted what fits now; the rest is refused as a consume of `cost` would be, and a take
  // granted all of it answers the retry_after of one more unit (0 while one more fits).
  const granted = taking ? Math.max(0, Math.min(cost, Math.floor(limit - estimate))) : cost;
  const retryFor = taking && granted === cost ? cost + 1 : cost;
  let retry = 0;
  if (estimate + retryFor > limit) {
    retry = bucketMs - elapsed;
    if (full + retryFor <= limit && oldest > 0) {
      retry = Math.ceil(bucketMs - ((limit - retryFor - full) * bucketMs) / oldest) - elapsed;
      if (retry < 1) retry = 1;
    }
  }
  if (granted === 0 || (!taking && estimate + cost > limit)) {
    const reset = newest >= 0 ? (newest + subWindows + 1) * bucketMs - now : 0;
    if (taking) return leaseResult({ allowed: false, remaining: Math.max(0, Math.floor(limit - estimate)), retryAfterMs: retry, resetAfterMs: reset, units: 0, windowTag: current, windowLeftMs: bucketMs - elapsed });
    return { allowed: false, remaining: Math.max(0, Math.floor(limit - estimate)), retryAfterMs: retry, resetAfterMs: reset };
  }
  if (peeking) {
    const reset = newest >= 0 ? (newest + subWindows + 1) * bucketMs - now : 0;
    return { allowed: true, remaining: Math.max(0, Math.floor(limit - estimate)), retryAfterMs: 0, resetAfterMs: reset };
  }
  buckets.set(current, (buckets.get(current) ?? 0) + granted);
  const resetAt = (current + subWindows + 1) * bucketMs;
  space.put<SlidingCounterState>(key, { buckets }, resetAt);
  if (taking) {
    return leaseResult({ allowed: true, remaining: Math.max(0, Math.floor(limit - (estimate + granted))), retryAfterMs: retry, resetAfterMs: resetAt - now, units: granted, windowTag: current, windowLeftMs: bucketMs - elapsed });
  }
  return { allowed: true, remaining: Math.max(0, Math.floor(limit - (estimate + cost))), retryAfterMs: 0, resetAfterMs: resetAt - now };
}

/** A refund's units go back from the newest bucket first; an emptied bucket is removed. */
function giveBackNewest(buckets: Map<number, number>, refund: number): void {
  let left = refund;
  for (const index of [...buckets.keys()].sort((a, b) => b - a)) {
    if (left <= 0) break;
    const taken = Math.min(buckets.get(index)!, left);
    left = left - taken;
    if (buckets.get(index)! - taken === 0) buckets.delete(index);
    else buckets.set(index, buckets.get(index)! - taken);
  }
}
