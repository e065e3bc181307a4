import type { CounterResult } from '../counter-store.js';
import { bucketLeaseResult, result } from './answers.js';
import type { AlgorithmCall } from './mode.js';
import type { BucketState } from './bucket-state.js';

/** The emulator's token_bucket: mirrors lua/token_bucket.lua. */

export function tokenBucket(call: AlgorithmCall, capacity: number, rateUnits: number, ratePeriodMs: number): CounterResult {
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
  if (giving && now >= giveTag) return bucketLeaseResult(true, Math.floor(tokens), 0, fullAt - now, 0);
  if (refunding) {
    // What went back (a return answers it): never above capacity, so a full bucket takes nothing back.
    const room = capacity - tokens;
    tokens = Math.min(capacity, tokens + refund);
    const settledAt = now + Math.ceil(((capacity - tokens) * ratePeriodMs) / rateUnits);
    if (stored) space.put<BucketState>(key, { amount: tokens, updatedAt: now, settledAt }, settledAt);
    if (giving) return bucketLeaseResult(true, Math.floor(tokens), 0, settledAt - now, Math.floor(Math.min(refund, room)));
    return result(true, Math.floor(tokens), 0, settledAt - now);
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
    return bucketLeaseResult(granted > 0, Math.floor(tokens), retry, fullAt - now, granted);
  }
  if (peeking && tokens >= cost) return result(true, Math.floor(tokens), 0, fullAt - now);
  if (tokens >= cost) {
    tokens = tokens - cost;
    const settledAt = now + Math.ceil(((capacity - tokens) * ratePeriodMs) / rateUnits);
    space.put<BucketState>(key, { amount: tokens, updatedAt: now, settledAt }, settledAt);
    return result(true, Math.floor(tokens), 0, settledAt - now);
  }
  const retry = Math.ceil(((cost - tokens) * ratePeriodMs) / rateUnits);
  return result(false, Math.floor(tokens), retry, fullAt - now);
}
