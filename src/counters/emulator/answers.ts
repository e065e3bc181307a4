import type { AlgorithmLeaseAnswer } from '../counter-replies.js';
import type { LeaseCounterResult } from '../counter-store.js';

/**
 * The emulator's algorithms answer as the scripts reply, with objects of the declared reply fields
 * (counter-replies.ts: DecisionAnswer, AlgorithmLeaseAnswer, AcquireAnswer), always written in the
 * declared order so every answer has one shape.
 */

export type { AcquireAnswer, AlgorithmLeaseAnswer, DecisionAnswer } from '../counter-replies.js';

/**
 * A lease operation's answer as the algorithm gives it, completed in place to a LeaseCounterResult;
 * finishLeaseOp (parent-take-ledger.ts) fills in the rest (a bucket's window tag and time left too: its take's hold).
 */
export function leaseResult(answer: AlgorithmLeaseAnswer): LeaseCounterResult {
  const lease = answer as LeaseCounterResult;
  lease.storeNow = 0;
  lease.outcome = 'done';
  lease.lapsed = 0;
  return lease;
}
