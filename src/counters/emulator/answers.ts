import type { CounterResult, LeaseCounterResult } from '../counter-store.js';

/** The answers of the emulator's algorithms, as the scripts reply. */

export function result(allowed: boolean, remaining: number, retryAfterMs: number, resetAfterMs: number): CounterResult {
  return { allowed, remaining, retryAfterMs, resetAfterMs };
}

/** A lease operation's answer as the algorithm gives it; finishLeaseOp (parent-take-ledger.ts) completes the rest. */
export function leaseResult(
  allowed: boolean, remaining: number, retryAfterMs: number, resetAfterMs: number, units: number, windowTag: number, windowLeftMs: number,
): LeaseCounterResult {
  return { allowed, remaining, retryAfterMs, resetAfterMs, units, windowTag, windowLeftMs, storeNow: 0, outcome: 'done', lapsed: 0 };
}
