import type { LeaseCounterResult } from '../counter-store.js';
import { leaseResult, type DecisionAnswer } from './answers.js';
import type { StateSlot } from './keyspace.js';
import type { AlgorithmCall, CountedWindow } from './mode.js';

/**
 * The partial take of fixed_window and quota (lua/includes/window_count.lua): min(cost, what is left of
 * `window`), possibly nothing, refused (or, all taken, the next unit) until the window ends; `write(used)`
 * stores the new count when something was taken.
 */
export function windowTake(call: AlgorithmCall, window: CountedWindow, reset: number, write: (used: number) => void): LeaseCounterResult {
  const { cost, now } = call;
  const { limit, start, end } = window;
  let used = window.used;
  const granted = Math.max(0, Math.min(cost, limit - used));
  const retry = granted < cost || used + granted >= limit ? end - now : 0;
  if (granted > 0) {
    used = used + granted;
    write(used);
    reset = end - now;
  }
  return leaseResult({ allowed: granted > 0, remaining: Math.max(0, limit - used), retryAfterMs: retry, resetAfterMs: reset, units: granted, windowTag: start, windowLeftMs: end - now });
}

/** The state of a window kept beside its expiry (quota, and calendar periods): its start and the units used. */
export interface WindowState {
  periodStart: number;
  used: number;
}

/**
 * Every operation on `window` of the call's key, which has `window.used` units counted in the state of
 * its live `slot` (absent when nothing is): count_in_window of lua/includes/window_count.lua, for the
 * algorithms that keep a WindowState (quota, calendar periods).
 */
export function countInWindow(call: AlgorithmCall, slot: StateSlot<WindowState> | undefined, window: CountedWindow): DecisionAnswer {
  const { op, units, now } = call;
  const { limit, start, end } = window;
  let used = window.used;
  const stored = slot?.state;
  // The decision's own operation first, as the script's last branch: nothing to sort out per call.
  if (op === 'consume') {
    if (used + units > limit) return { allowed: false, remaining: Math.max(0, limit - used), retryAfterMs: end - now, resetAfterMs: end - now };
    writeWindow(call, slot, window, used + units);
    return { allowed: true, remaining: Math.max(0, limit - (used + units)), retryAfterMs: 0, resetAfterMs: end - now };
  }
  const { refunding, cost, refund, taking, giving } = call;
  const reset = used > 0 ? end - now : 0;
  if (giving && call.tag !== start) {
    // The units' window has ended: they lapsed, and nothing goes back.
    return leaseResult({ allowed: true, remaining: Math.max(0, limit - used), retryAfterMs: 0, resetAfterMs: reset, units: 0, windowTag: start, windowLeftMs: end - now });
  }
  if (refunding) {
    const before = used;
    if (used > 0) {
      used = Math.max(0, used - refund);
      stored!.used = used;
    }
    // Refunded to zero usage, the window is whole again: reset 0, as a peek would then say.
    const refunded = used === 0 ? 0 : reset;
    if (giving) {
      return leaseResult({ allowed: true, remaining: Math.max(0, limit - used), retryAfterMs: 0, resetAfterMs: refunded, units: before - used, windowTag: start, windowLeftMs: end - now });
    }
    return { allowed: true, remaining: Math.max(0, limit - used), retryAfterMs: 0, resetAfterMs: refunded };
  }
  if (taking) return windowTake(call, window, reset, (taken) => writeWindow(call, slot, window, taken));
  // A peek or a check: what consuming `cost` would answer, nothing written.
  if (used + cost > limit) return { allowed: false, remaining: Math.max(0, limit - used), retryAfterMs: end - now, resetAfterMs: end - now };
  return { allowed: true, remaining: Math.max(0, limit - used), retryAfterMs: 0, resetAfterMs: reset };
}

/**
 * Stores `used` as the count of `window` and, as the script's PEXPIRE, its expiry at the window's end:
 * in the live slot when it holds that window (no allocation and no Map lookup per decision), else a new state.
 */
function writeWindow(call: AlgorithmCall, slot: StateSlot<WindowState> | undefined, window: CountedWindow, used: number): void {
  const stored = slot?.state;
  if (stored !== undefined && stored.periodStart === window.start) {
    stored.used = used;
    // Usually already the window's end; not when a counter of another period wrote the key last.
    slot!.expireAt = window.end;
  } else call.space.put<WindowState>(call.keys[0], { periodStart: window.start, used }, window.end);
}
