import type { CounterResult } from '../counter-store.js';
import { leaseResult, result } from './answers.js';
import type { MemoryKeyspace } from './keyspace.js';
import { mode, type AlgorithmOperation } from './mode.js';
import { windowTake } from './window-count.js';

/** The emulator's quota: mirrors lua/quota.lua. */

interface QuotaState { periodStart: number; used: number }

export function quota(space: MemoryKeyspace, key: string, limit: number, periodMs: number, op: AlgorithmOperation, units: number, now: number, giveTag: number): CounterResult {
  const { peeking, refunding, cost, refund, taking, giving } = mode(op, units);
  // The period starts with the first consumption and lasts periodMs.
  const stored = space.get<QuotaState>(key, now);
  let periodStart = now;
  let used = 0;
  if (stored && now < stored.periodStart + periodMs) {
    periodStart = stored.periodStart;
    used = stored.used;
  }
  const periodEnd = periodStart + periodMs;
  const reset = used > 0 ? periodEnd - now : 0;
  if (giving && giveTag !== periodStart) {
    // The units' period has ended: they lapsed, and nothing goes back.
    return leaseResult(true, Math.max(0, limit - used), 0, reset, 0, periodStart, periodEnd - now);
  }
  if (refunding) {
    const before = used;
    if (used > 0) {
      used = Math.max(0, used - refund);
      stored!.used = used;
    }
    // Refunded to zero usage, the budget is whole again: reset 0, as a peek would then say.
    if (giving) return leaseResult(true, Math.max(0, limit - used), 0, used === 0 ? 0 : reset, before - used, periodStart, periodEnd - now);
    return result(true, Math.max(0, limit - used), 0, used === 0 ? 0 : reset);
  }
  if (taking) return windowTake(cost, used, limit, periodStart, periodEnd, reset, now, (taken) => space.put<QuotaState>(key, { periodStart, used: taken }, periodEnd));
  if (used + cost > limit) {
    return result(false, Math.max(0, limit - used), periodEnd - now, periodEnd - now);
  }
  if (peeking) return result(true, Math.max(0, limit - used), 0, reset);
  space.put<QuotaState>(key, { periodStart, used: used + cost }, periodEnd);
  return result(true, Math.max(0, limit - (used + cost)), 0, periodEnd - now);
}
