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
 * One interface, two backends with identical semantics: MemoryCounterStore (single node) and
 * RedisCounterStore (one atomic Lua script per operation). `keys` come from keys.ts.
 *
 * `nowMs` exists for tests only: the Redis store otherwise reads Redis `TIME`, the memory store its
 * injected clock. Every operation either completes atomically or throws CounterStoreUnavailableError.
 */
export interface CounterStore {
  /** Takes `cost` units if they all fit; a denied request takes nothing. */
  consume(keys: string[], spec: RateSpec, cost: number, nowMs?: number): Promise<CounterResult>;
  /** Takes a lease slot for `leaseId`, or refreshes the lease if it is already held. */
  acquire(keys: string[], spec: LeaseSpec, leaseId: string, nowMs?: number): Promise<CounterResult>;
  /** Returns the lease; `allowed` false when no such lease was held. */
  release(keys: string[], spec: LeaseSpec, leaseId: string, nowMs?: number): Promise<CounterResult>;
  /** Health for readiness and status endpoints. */
  isHealthy(): boolean;
  close(): Promise<void>;
}
