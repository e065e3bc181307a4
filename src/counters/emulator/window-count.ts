import type { LeaseCounterResult } from '../counter-store.js';
import { leaseResult } from './answers.js';

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
