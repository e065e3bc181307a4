import type { LeaseSpec, RateSpec } from './counter-spec.js';

/** The outcome of one atomic counter operation; durations in whole milliseconds. */
export interface CounterResult {
  /** consume/acquire: admitted. release: a lease was found and removed. */
  allowed: boolean;
  /** Units (or lease slots) left after this operation, never negative. */
  remaining: number;
  /** When denied: ms until the request would conform; 0 when allowed. */
  retryAfterMs: number;
  /** ms until the counter is whole again (window over, bucket full, no lease held); 0 when it is. */
  resetAfterMs: number;
}

/**
 * What a rate script is asked to do (lua/includes/mode.lua, its ARGV[2]), beside a cost that stays a
 * number: consume, peek and refund, and a capacity lease's partial take and window-checked return.
 */
export type RateOperation = 'consume' | 'peek' | 'refund' | 'take' | 'give';

/** The answer to a lease operation: a CounterResult and what a holder needs (src/lease). */
export interface LeaseCounterResult extends CounterResult {
  /** Units taken (partial take: at most the `n` asked, possibly 0) or given back (the rest lapsed). */
  units: number;
  /** The window start, quota period start or sub-window index the units belong to; 0 for the buckets. */
  windowTag: number;
  /** ms until that window (period, sub-window) ends, by the store's clock; 0 for the buckets. */
  windowLeftMs: number;
}

/**
 * One interface, two backends with identical semantics: MemoryCounterStore (single node) and
 * RedisCounterStore (each operation atomic in one Lua script call, shared by the operations of one
 * event-loop turn). `keys` come from keys.ts; callers hand the
 * same array to many operations (DecisionService caches them), so a store never modifies it.
 *
 * `nowMs` exists for tests only: the Redis store otherwise reads Redis `TIME`, the memory store its
 * injected clock. Every operation either completes atomically or throws CounterStoreUnavailableError.
 */
export interface CounterStore {
  /**
   * The same operations answered synchronously, for a store that never waits (the in-memory
   * emulator): the DecisionService then decides without a promise per step. Same semantics and the same
   * errors (thrown instead of rejected) as the asynchronous ones; absent when the store has to wait.
   */
  readonly sync?: SyncCounterOperations;
  /** Takes `cost` units if they all fit; a denied request takes nothing. */
  consume(keys: string[], spec: RateSpec, cost: number, nowMs?: number): Promise<CounterResult>;
  /**
   * Answers as a consume of 1 would (`remaining` before it), writing nothing: the same script in
   * read-only mode (docs/algorithms.md, "Peek").
   */
  peek(keys: string[], spec: RateSpec, nowMs?: number): Promise<CounterResult>;
  /**
   * Gives `amount` units back to the current window, bucket or period: usage never below zero, a
   * bucket never above its capacity. `allowed` is always true; `remaining` is after the refund.
   */
  refund(keys: string[], spec: RateSpec, amount: number, nowMs?: number): Promise<CounterResult>;
  /**
   * Capacity leases (src/lease), in the algorithm's own script: takes min(`n`, what the counter admits
   * now) units, possibly none; `retryAfterMs` is that of a refused consume of `n` when less was granted,
   * and when all `n` were, that of a consume of one more unit (0 while the counter admits one more).
   * `windowTag`: the window (period, sub-window) the units belong to; buckets: when the take ran (this
   * store's clock).
   */
  take?(keys: string[], spec: RateSpec, n: number, nowMs?: number): Promise<LeaseCounterResult>;
  /**
   * Gives back `units` a take answered with `windowTag`, only while that window (period, sub-window)
   * is the current one; otherwise they lapsed (`units` of the answer: how many went back).
   * Buckets: `windowTag` is the instant (this store's clock) they had to be back by, the take's tag plus
   * the taker's max_hold; an ordinary refund before it, nothing from then on (null: nothing).
   */
  giveBack?(keys: string[], spec: RateSpec, units: number, windowTag: number | null, nowMs?: number): Promise<LeaseCounterResult>;
  /** Takes a lease slot for `leaseId`, or refreshes the lease if it is already held. */
  acquire(keys: string[], spec: LeaseSpec, leaseId: string, nowMs?: number): Promise<CounterResult>;
  /** Returns the lease; `allowed` false when no such lease was held. */
  release(keys: string[], spec: LeaseSpec, leaseId: string, nowMs?: number): Promise<CounterResult>;
  /** Health for readiness and status endpoints. */
  isHealthy(): boolean;
  close(): Promise<void>;
}

/** CounterStore's operations for a store that can answer at once; see `CounterStore.sync`. */
export interface SyncCounterOperations {
  /**
   * The clock the store reads when no `nowMs` is given. A caller that has just read this very clock may
   * pass its reading as `nowMs` instead of having the store read it again.
   */
  readonly clock: () => number;
  consume(keys: string[], spec: RateSpec, cost: number, nowMs?: number): CounterResult;
  peek(keys: string[], spec: RateSpec, nowMs?: number): CounterResult;
  refund(keys: string[], spec: RateSpec, amount: number, nowMs?: number): CounterResult;
  take?(keys: string[], spec: RateSpec, n: number, nowMs?: number): LeaseCounterResult;
  giveBack?(keys: string[], spec: RateSpec, units: number, windowTag: number | null, nowMs?: number): LeaseCounterResult;
  acquire(keys: string[], spec: LeaseSpec, leaseId: string, nowMs?: number): CounterResult;
  release(keys: string[], spec: LeaseSpec, leaseId: string, nowMs?: number): CounterResult;
}
