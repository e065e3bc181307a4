import type { LeaseShape } from '../counters/counter-spec.js';
import type { CounterResult, StoreMs } from '../counters/counter-store.js';
import type { LeaseFailureKind } from './failures.js';

/**
 * The pieces of a capacity lease (CONTRACT "Capacity lease: the mechanism"): a holder (LeaseHolder)
 * spends units it took in advance from its parent. The process level keeps them in a ProcessUnitPool;
 * the region level in the region's pool (region-store.ts, region-pool.ts).
 */

export type MaybePromise<T> = T | Promise<T>;

/**
 * An instant by this process's clock (LeaseClock.now). Branded softly, as StoreMs: a plain number is
 * one, a store's instant is not, so the compiler rejects mixing the two clocks.
 */
export type LocalMs = number & { readonly clock?: 'local' };

/** A store's clock as one of its answers read it, and this process's clock at a known side of that answer. */
export interface ClockSample {
  storeNow: StoreMs;
  localAt: LocalMs;
}

/**
 * `at` by the store's clock. Sampled when the answer arrived, the store reaches it no later than this
 * process reaches `at` (docs/distribution.md "Clocks": only durations cross machines).
 */
export function toStoreClock(at: LocalMs, sample: ClockSample): StoreMs {
  return Math.floor(sample.storeNow + (at - sample.localAt));
}

/** What one take from the parent answered. */
export interface Grant {
  /** Units taken: min(asked, what the parent could admit then); possibly 0. */
  granted: number;
  /** What the parent can still admit after this take (units held by holders count as used). */
  remaining: number;
  /** How long the parent admits no more: for the rest when it granted less than asked, else for one more unit. */
  retryAfterMs: number;
  resetAfterMs: number;
  /** What a return names: the window (period, sub-window) of the units; a bucket's, the StoreMs they must be back by. */
  windowTag: number;
  /** When these units may no longer be spent. */
  spendBy: LocalMs;
  /** The parent's clock when the take ran: the holder's sample for its takes' deadlines. */
  parentNow: StoreMs;
  /** `late`: past its deadline, took nothing; `repeat`: its id was seen, the recorded grant; `reclaimed`: took nothing. */
  outcome: 'done' | 'late' | 'repeat' | 'reclaimed';
}

/** A named take's limits (LeaseParent.take). */
export interface NamedTakeLimits {
  /** Unique per take (1 to 128 characters): asked again, the parent answers the recorded grant. */
  takeId?: string;
  /** The last instant the take may run. */
  deadline?: StoreMs;
}

/** What a named give answered (LeaseParent.giveBackNamed). */
export interface GivenBack {
  returned: number;
  /** Units that could not go back (window ended, hold passed, bucket full): 0 when the give did nothing. */
  lapsed: number;
  /**
   * `late`: past its deadline, gave nothing back (the units are still the holder's); `repeat`: its id was
   * seen, the recorded answer; `reclaimed`: settled first, gave nothing back.
   */
  outcome: 'done' | 'late' | 'repeat' | 'reclaimed';
  parentNow: StoreMs;
}

/** What a reclaim answered. */
export interface Reclaimed {
  returned: number;
  /** Units the take took that could not go back (window ended, hold passed, bucket full). */
  lapsed: number;
  /** `repeat`: given back by an earlier reclaim; `ahead`: the take has not run, and now takes nothing if it comes. */
  outcome: 'done' | 'repeat' | 'ahead';
  parentNow: StoreMs;
}

/** The counter a holder takes units from: one atomic call per operation. */
export interface LeaseParent {
  /**
   * Partial take of up to `n` (≥ 1) units. Throws CounterStoreUnavailableError when unreachable (the
   * take may still run later: name it, and reclaim it). Only a parent with `reclaim` takes `named`.
   */
  take(n: number, named?: NamedTakeLimits): Promise<Grant>;
  /** Returns unspent units of `windowTag` while it is current (a bucket's: before it); answers how many went back. */
  giveBack(units: number, windowTag: number | null): Promise<number>;
  /**
   * `giveBack` named (only a parent with `reclaim`): past its deadline it gives nothing back; its id (one
   * not used by any take) makes it answerable again and settleable by `reclaim`.
   */
  giveBackNamed?(units: number, windowTag: number | null, named: NamedTakeLimits): Promise<GivenBack>;
  /** The parent's own peek: units held by holders count as used there. */
  peek(): Promise<CounterResult>;
  /**
   * Gives back what the take `takeId` took, exactly once, as `giveBack` would; a give's id, answers what
   * that give did (`repeat`) and gives nothing. Come first, it leaves a tombstone until the `deadline` of
   * that take or give, which then does nothing (`ahead`: a give's units may go back again under a new
   * id). Absent when the parent keeps no take ledger (a region's pool).
   */
  reclaim?(takeId: string, deadline?: StoreMs): Promise<Reclaimed>;
}

export interface Spend {
  spent: boolean;
  /** Spendable units left after this call. */
  left: number;
  /** Units past their spendBy, dropped by this call. */
  lapsed: number;
}

export interface DrainedUnits {
  /** Unspent units to give back, all under `windowTag` (buckets: the earliest). */
  units: number;
  windowTag: number | null;
  lapsed: number;
}

/** The holder's clock and timers, injected (the simulation drives them). */
export interface LeaseClock {
  now(): LocalMs;
  setTimer(callback: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

/** Monotonic: a wall clock stepped back would let a window's units be spent after it ended. */
export const systemClock: LeaseClock = {
  now: () => performance.now(),
  setTimer(callback, ms) {
    const timer = setTimeout(callback, ms);
    timer.unref();
    return timer;
  },
  clearTimer(handle) {
    clearTimeout(handle as NodeJS.Timeout);
  },
};

/** Why units that left a parent were neither admitted nor given back (CONTRACT "Loss is bounded and counted"). */
export type LapseReason = 'window_ended' | 'hold_expired' | 'holder_lost' | 'parent_unreachable';

/** Why a unit lapses when its spend-by comes. */
export function expiredReason(shape: LeaseShape): LapseReason {
  return shape === 'bucket' ? 'hold_expired' : 'window_ended';
}

/** RL_LEASE_MAX_WAIT_MS's default (CONTRACT "Bounded wait"). */
export const DEFAULT_LEASE_MAX_WAIT_MS = 100;

/**
 * Whatever holds units on this process's behalf (ProcessLeases; a RegionCounterStore): the one door to
 * let go, which DecisionService opens for every entry point alike. Idle holders let go by themselves.
 */
export interface UnitHolders {
  /** Lets go of the units of every counter whose policy is no longer `current(policyId)`. */
  policiesChanged(current: (policyId: string) => { spec: unknown } | undefined): void | Promise<void>;
  /** Drain: every unspent unit goes back to its parent. */
  letGoAll(): Promise<void>;
}

export function holdsUnits(store: object): store is UnitHolders {
  const candidate = store as Partial<UnitHolders>;
  return typeof candidate.policiesChanged === 'function' && typeof candidate.letGoAll === 'function';
}

/** The retry_after of a decision refused after RL_LEASE_MAX_WAIT_MS (CONTRACT: at most max_hold). */
export function waitTimeout(maxWaitMs: number, maxHoldMs: number): number {
  return Math.max(1, Math.min(maxWaitMs, maxHoldMs));
}

/** What a holder reports, for the metrics of CONTRACT "Metrics for leases". */
export interface LeaseEvents {
  /** rl_lease_refills_total{level} */
  refilled?(granted: number): void;
  /** rl_lease_units_returned_total{level} */
  returned?(units: number): void;
  /** rl_lease_units_lapsed_total{policy_id,reason} */
  lapsed?(units: number, reason: LapseReason): void;
  /** rl_counter_store_errors_total; logged by LeaseFailureLog. */
  failed?(kind: LeaseFailureKind): void;
  /** rl_lease_parent_wait_seconds */
  waited?(seconds: number): void;
}
