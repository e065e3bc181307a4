import type { CounterResult } from '../counters/counter-store.js';
import type { ConcurrencySpec, RateSpec } from '../counters/counter-spec.js';
import type { PolicyMatch } from '../matching/matcher.js';
import type { RequestContext } from '../model/request-context.js';
import type { CounterStoreUnavailableError } from '../errors.js';

/** The types the decision path's modules share (the service, its layered plan, the never-fit rule). */

export type Operation = 'check' | 'acquire' | 'release' | 'refund';

/** The result of running one matched policy's counter operation. */
export type Evaluation =
  /**
   * `leased`: answered by this process's capacity lease (metadata.lease "local"). `waitTimedOut`: a
   * refusal because the lease's refill took longer than RL_LEASE_MAX_WAIT_MS (reason lease_wait_timeout).
   */
  | { match: PolicyMatch; result: CounterResult; failed?: undefined; leased?: boolean; waitTimedOut?: boolean }
  | { match: PolicyMatch; result?: undefined; failed: CounterStoreUnavailableError; leased?: undefined };

/** The store's operations in either form: R is CounterResult (`CounterStore.sync`) or a promise of one. */
export interface CounterOperations<R> {
  consume(keys: string[], spec: RateSpec, cost: number, nowMs?: number): R;
  peek(keys: string[], spec: RateSpec, nowMs?: number): R;
  refund(keys: string[], spec: RateSpec, amount: number, nowMs?: number): R;
  acquire(keys: string[], spec: ConcurrencySpec, slotId: string, nowMs?: number): R;
  release(keys: string[], spec: ConcurrencySpec, slotId: string, nowMs?: number): R;
}

/**
 * What one decision asks of the counter of one matched policy. Written once against either form of the
 * store, so the synchronous and the asynchronous path share it; module-level, so no closure per call.
 */
export type CounterCall = <R>(
  ops: CounterOperations<R>,
  keys: string[],
  match: PolicyMatch,
  ctx: RequestContext,
  slotId: string,
  nowMs: number | undefined,
) => R;
