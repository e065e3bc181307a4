import { leaseResult, type DecisionAnswer } from './answers.js';
import type { AlgorithmCall } from './mode.js';
import type { BucketState } from './bucket-state.js';

/**
 * The emulator's leaky_bucket: mirrors lua/leaky_bucket.lua. A take's or a give's answer names no window
 * (windowTag and windowLeftMs 0): finishLeaseOp gives a bucket's, from the take's hold.
 */

export function leakyBucket(call: AlgorithmCall, capacity: number, rateUnits: number, ratePeriodMs: number): DecisionAnswer {
  const { space, now, peeking, refunding, cost, refund, taking, giving, tag: giveTag } = call;
  const key = call.keys[0];
  // amount = level of the bucket; settledAt = when it has drained empty.
  const stored = space.get<BucketState>(key, now);
  let level = 0;
  let emptyAt = now;
  if (stored && now < stored.settledAt) {
    level = Math.max(0, stored.amount - (Math.max(0, now - stored.updatedAt) * rateUnits) / ratePeriodMs);
    emptyAt = stored.settledAt;
  }
  // A return that arrives after the instant it had to be back by: the units lapsed, and nothing goes back.
  if (giving && now >= giveTag) return leaseResult({ allowed: true, remaining: Math.max(0, Math.floor(capacity - level)), retryAfterMs: 0, resetAfterMs: emptyAt - now, units: 0, windowTag: 0, windowLeftMs: 0 });
  if (refunding) {
    // What went back (a return answers it): never below empty, so an empty bucket takes nothing back.
    const room = level;
    level = Math.max(0, level - refund);
    const settledAt = now + Math.ceil((level * ratePeriodMs) / rateUnits);
    if (stored) space.put<BucketState>(key, { amount: level, updatedAt: now, settledAt }, settledAt);
    if (giving) return leaseResult({ allowed: true, remaining: Math.max(0, Math.floor(capacity - level)), retryAfterMs: 0, resetAfterMs: settledAt - now, units: Math.floor(Math.min(refund, room)), windowTag: 0, windowLeftMs: 0 });
    return { allowed: true, remaining: Math.max(0, Math.floor(capacity - level)), retryAfterMs: 0, resetAfterMs: settledAt - now };
  }
  if (taking) {
    const granted = Math.max(0, Math.min(cost, Math.floor(capacity - level)));
    // The retry_after of the rest, or, all of it granted, of one more unit.
    const retryFor = granted < cost ? cost : cost + 1;
    const retry = level + retryFor > capacity ? Math.ceil(((level + retryFor - capacity) * ratePeriodMs) / rateUnits) : 0;
    if (granted > 0) {
      level = level + granted;
      emptyAt = now + Math.ceil((level * ratePeriodMs) / rateUnits);
      space.put<BucketState>(key, { amount: level, updatedAt: now, settledAt: emptyAt }, emptyAt);
    }
    return leaseResult({ allowed: granted > 0, remaining: Math.max(0, Math.floor(capacity - level)), retryAfterMs: retry, resetAfterMs: emptyAt - now, units: granted, windowTag: 0, windowLeftMs: 0 });
  }
  if (peeking && level + cost <= capacity) return { allowed: true, remaining: Math.max(0, Math.floor(capacity - level)), retryAfterMs: 0, resetAfterMs: emptyAt - now };
  if (level + cost <= capacity) {
    level = level + cost;
    const settledAt = now + Math.ceil((level * ratePeriodMs) / rateUnits);
    space.put<BucketState>(key, { amount: level, updatedAt: now, settledAt }, settledAt);
    return { allowed: true, remaining: Math.max(0, Math.floor(capacity - level)), retryAfterMs: 0, resetAfterMs: settledAt - now };
  }
  const retry = Math.ceil(((level + cost - capacity) * ratePeriodMs) / rateUnits);
  return { allowed: false, remaining: Math.max(0, Math.floor(capacity - level)), retryAfterMs: retry, resetAfterMs: emptyAt - now };
}
