import type { CounterResult, LeaseCounterResult } from '../counter-store.js';

/** The answers of the emulator's algorithms, as the scripts reply. */

export function result(allowed: boolean, remaining: number, retryAfterMs: number, resetAfterMs: number): CounterResult {
  return { allowed, remaining, retryAfterMs, resetAfterMs };
}

/** What an algorithm answers a take or a give with (the script's lease_reply). */
export type AlgorithmLeaseAnswer = Omit<LeaseCounterResult, 'storeNow' | 'outcome' | 'lapsed' | 'shareTaken'>;

/**
 * A lease operation's answer as the algorithm gives it, completed in place to a LeaseCounterResult;
 * finishLeaseOp (parent-take-ledger.ts) fills in the rest.
 */
export function leaseResult(answer: AlgorithmLeaseAnswer): LeaseCounterResult {
  const lease = answer as LeaseCounterResult;
  lease.storeNow = 0;
  lease.outcome = 'done';
  lease.lapsed = 0;
  return lease;
}

/** A bucket's answer to a take or a give: its tag and the time left are finishLeaseOp's (a take's hold). */
export function bucketLeaseResult(allowed: boolean, remaining: number, retryAfterMs: number, resetAfterMs: number, units: number): LeaseCounterResult {
  return leaseResult({ allowed, remaining, retryAfterMs, resetAfterMs, units, windowTag: 0, windowLeftMs: 0 });
}
