import type { CounterResult, LeaseCounterResult } from '../counter-store.js';
import { leaseResult, result } from './answers.js';
import type { MemoryKeyspace, StateSlot } from './keyspace.js';
import { mode, type AlgorithmOperation } from './mode.js';

/**
 * The partial take of fixed_window and quota (lua/includes/window_count.lua): min(cost, what is left),
 * possibly nothing, refused (or, all taken, the next unit) until the window ends; `write(used)` stores
 * the new count when something was taken.
 */
export function windowTake(
  cost: number, used: number, limit: number, windowStart: number, windowEnd: number, reset: number, now: number, write: (used: number) => void,
): LeaseCounterResult {
  const granted = Math.max(0, Math.min(cost, limit - used));
  const retry = granted < cost || used + granted >= limit ? windowEnd - now : 0;
  if (granted > 0) {
    used = used + granted;
    write(used);
    reset = windowEnd - now;
  }
  return leaseResult(granted > 0, Math.max(0, limit - used), retry, reset, granted, windowStart, windowEnd - now);
}

/** The state of a window kept beside its expiry (quota, and calendar periods): its start and the units used. */
export interface WindowState {
  periodStart: number;
  used: number;
}

/**
 * Every operation on the window [windowStart, windowEnd) of `key`, which has `used` units counted in
 * the state of its live `slot` (absent when nothing is): count_in_window of lua/includes/window_count.lua,
 * for the algorithms that keep a WindowState (quota, calendar periods).
 */
export function countInWindow(
  space: MemoryKeyspace, key: string, slot: StateSlot<WindowState> | undefined, limit: number, windowStart: number, windowEnd: number, used: number,
  op: AlgorithmOperation, units: number, now: number, giveTag: number,
): CounterResult {
  const stored = slot?.state;
  // The decision's own operation first, as the script's last branch: nothing to sort out per call.
  if (op === 'consume') {
    if (used + units > limit) return result(false, Math.max(0, limit - used), windowEnd - now, windowEnd - now);
    writeWindow(space, key, slot, windowStart, windowEnd, used + units);
    return result(true, Math.max(0, limit - (used + units)), 0, windowEnd - now);
  }
  const { refunding, cost, refund, taking, giving } = mode(op, units);
  const reset = used > 0 ? windowEnd - now : 0;
  if (giving && giveTag !== windowStart) {
    // The units' window has ended: they lapsed, and nothing goes back.
    return leaseResult(true, Math.max(0, limit - used), 0, reset, 0, windowStart, windowEnd - now);
  }
  if (refunding) {
    const before = used;
    if (used > 0) {
      used = Math.max(0, used - refund);
      stored!.used = used;
    }
    // Refunded to zero usage, the window is whole again: reset 0, as a peek would then say.
    if (giving) return leaseResult(true, Math.max(0, limit - used), 0, used === 0 ? 0 : reset, before - used, windowStart, windowEnd - now);
    return result(true, Math.max(0, limit - used), 0, used === 0 ? 0 : reset);
  }
  if (taking) return windowTake(cost, used, limit, windowStart, windowEnd, reset, now, (taken) => writeWindow(space, key, slot, windowStart, windowEnd, taken));
  // A peek or a check: what consuming `cost` would answer, nothing written.
  if (used + cost > limit) return result(false, Math.max(0, limit - used), windowEnd - now, windowEnd - now);
  return result(true, Math.max(0, limit - used), 0, reset);
}

/**
 * Stores the window's count and, as the script's PEXPIRE, its expiry at the window's end: in the live
 * slot when it holds that window (no allocation and no Map lookup per decision), else a new state.
 */
function writeWindow(space: MemoryKeyspace, key: string, slot: StateSlot<WindowState> | undefined, windowStart: number, windowEnd: number, used: number): void {
  const stored = slot?.state;
  if (stored !== undefined && stored.periodStart === windowStart) {
    stored.used = used;
    // Usually already the window's end; not when a counter of another period wrote the key last.
    slot!.expireAt = windowEnd;
  } else space.put<WindowState>(key, { periodStart: windowStart, used }, windowEnd);
}
