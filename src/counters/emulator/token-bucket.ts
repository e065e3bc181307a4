import { leaseResult, type DecisionAnswer } from './answers.js';
import type { AlgorithmCall } from './mode.js';
import type { BucketState } from './bucket-state.js';

/**
 * The emulator's token_bucket: mirrors lua/token_bucket.lua. A take's or a give's answer names no window
 * (windowTag and windowLeftMs 0): finishLeaseOp gives a bucket's, from the take's hold.
 */

export function tokenBucket(call: AlgorithmCall, capacity: number, rateUnits: number, ratePeriodMs: number): DecisionAnswer {
  const { space, now, peeking, refunding, cost, refund, taking, giving, tag: giveTag } = call;
  const key = call.keys[0];
  // amount = tokens in the bucket; settledAt = when it is full again.
  const stored = space.get<BucketState>(key, now);
  let tokens = capacity;
  let fullAt = now;
  if (stored && now < stored.settledAt) {
    tokens = Math.min(capacity, stored.amount + (Math.max(0, now - stored.updatedAt) * rateUnits) / ratePeriodMs);
    fullAt = stored.settledAt;
  }
  // A return that arrives after the instant it had to be back by: the units lapsed, and nothing goes back.
  if (giving && now >= giveTag) return leaseResult({ allowed: true, remaining: Math.floor(tokens), retryAfterMs: 0, resetAfterMs: fullAt - now, units: 0, windowTag: 0, windowLeftMs: 0 });
  if (refunding) {
    // What went back (a return answers it): never above capacity, so a full bucket takes nothing back.
    const room = capacity - tokens;
    tokens = Math.min(capacity, tokens + refund);
    const settledAt = now + Math.ceil(((capacity - tokens) * ratePeriodMs) / rateUnits);
    if (stored) space.put<BucketState>(key, { amount: tokens, updatedAt: now, settledAt }, settledAt);
    if (giving) return leaseResult({ allowed: true, remaining: Math.floor(tokens), retryAfterMs: 0, resetAfterMs: settledAt - now, units: Math.floor(Math.min(refund, room)), windowTag: 0, windowLeftMs: 0 });
    return { allowed: true, remaining: Math.floor(tokens), retryAfterMs: 0, resetAfterMs: settledAt - now };
  }
  if (taking) {
    const granted = Math.max(0, Math.min(cost, Math.floor(tokens)));
    // The retry_after of the rest, or, all of it granted, of one more unit.
    const retryFor = granted < cost ? cost : cost + 1;
    const retry = tokens < retryFor ? Math.ceil(((retryFor - tokens) * ratePeriodMs) / rateUnits) : 0;
    if (granted > 0) {
      tokens = tokens - granted;
      fullAt = now + Math.ceil(((capacity - tokens) * ratePeriodMs) / rateUnits);
      space.put<BucketState>(key, { amount: tokens, updatedAt: now, settledAt: fullAt }, fullAt);
    }
    return leaseResult({ allowed: granted > 0, remaining: Math.floor(tokens), retryAfterMs: retry, resetAfterMs: fullAt - now, units: granted, windowTag: 0, windowLeftMs: 0 });
  }
  if (peeking && tokens >= cost) return { allowed: true, remaining: Math.floor(tokens), retryAfterMs: 0, resetAfterMs: fullAt - now };
  if (tokens >= cost) {
    tokens = tokens - cost;
    const settledAt = now + Math.ceil(((capacity - tokens) * ratePeriodMs) / rateUnits);
    space.put<BucketState>(key, { amount: tokens, updatedAt: now, settledAt }, settledAt);
    return { allowed: true, remaining: Math.floor(tokens), retryAfterMs: 0, resetAfterMs: settledAt - now };
  }
  const retry = Math.ceil(((cost - tokens) * ratePeriodMs) / rateUnits);
  return { allowed: false, remaining: Math.floor(tokens), retryAfterMs: retry, resetAfterMs: fullAt - now };
}
