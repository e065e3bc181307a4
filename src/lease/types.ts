import type { LeaseShape } from '../counters/counter-spec.js';
import type { CounterResult } from '../counters/counter-store.js';
import type { LeaseFailureKind } from './failures.js';

/**
 * The pieces of a capacity lease (CONTRACT: "Capacity lease: the mechanism"): a holder (LeaseHolder)
 * answers decisions from units it took in advance from its parent, and keeps them in a UnitPool: a
 * process's holders, one per counter key, in this process's memory (process-pool.ts). The region level
 * is the servers' RegionCounterStore over the region's pool (region-store.ts, region-pool.ts).
 */

export type MaybePromise<T> = T | Promise<T>;

/** What one take from the parent answered. */
export interface Grant {
  /** Units taken: min(asked, what the parent could admit then); possibly 0. */
  granted: number;
  /** What the parent can still admit after this take (units held by holders count as used). */
  remaining: number;
  /**
   * How long the parent admits no more (ms): when less than asked was granted, its retry_after for the
   * rest; when all was, for one more unit (0 while it admits one more).
   */
  retryAfterMs: number;
  resetAfterMs: number;
  /**
   * What a return of these units names (opaque): the window/sub-window they belong to (window
   * algorithms); for buckets the instant, by the parent's clock, they must be back by (they left it at
   * most max_hold before; later they lapse there).
   */
  windowTag: string;
  /**
   * Local time (holder's clock, ms) after which these units must no longer be spent: for the window
   * algorithms the window's end, computed conservatively (send time + what the parent said was left of
   * the window); for buckets send time + max_hold (less what they have been out already, for a
   * repeated take).
   */
  spendBy: number;
  /** The parent's clock when the take ran (epoch ms): the holder's sample for its takes' deadlines. */
  parentNow: number;
  /**
   * `done`: the take ran (`granted` may be 0: the parent had nothing); `late`: it came past its deadline
   * and took nothing; `repeat`: its id was seen, this is the grant recorded then (nothing more taken);
   * `reclaimed`: its id was reclaimed before it came, and it took nothing.
   */
  outcome: 'done' | 'late' | 'repeat' | 'reclaimed';
}

/** A named take's limits (LeaseParent.take). */
export interface NamedTakeLimits {
  /** The parent records the take under this id (1 to 128 characters; unique per take, e.g. holder id + sequence). */
  takeId?: string;
  /** The last instant, by the PARENT's clock (epoch ms: from the `parentNow` of earlier answers), the take may run. */
  deadline?: number;
}

/** What a reclaim answered. */
export interface Reclaimed {
  /** Units that went back to the parent's counter. */
  returned: number;
  /** Units the take took that could not go back (their window ended, a bucket's hold passed, or it was full). */
  lapsed: number;
  /**
   * `done`: given back now; `repeat`: given back by an earlier reclaim (its answer again, nothing more
   * given back); `ahead`: the take has not run (0 and 0): it never will, it takes nothing if it comes.
   */
  outcome: 'done' | 'repeat' | 'ahead';
  parentNow: number;
}

/** The counter a holder takes units from: one atomic call per operation. */
export interface LeaseParent {
  /**
   * Partial take of up to `n` (≥ 1) units. Throws CounterStoreUnavailableError when unreachable (the
   * take may still run later: name it, and reclaim it once the parent answers again). `named`: an id
   * (asked again, the parent answers the recorded grant and takes nothing more) and a deadline in the
   * parent's clock (past it, the take takes nothing: `late`). Only a parent with `reclaim` takes them;
   * others throw an Error.
   */
  take(n: number, named?: NamedTakeLimits): Promise<Grant>;
  /**
   * Returns unspent units taken with `windowTag`; they go back only while that window is the current
   * one (window algorithms), or before that instant (buckets), else they lapsed. Answers how many went back.
   */
  giveBack(units: number, windowTag: string | null): Promise<number>;
  /** The parent's own peek: units held by holders count as used there. */
  peek(): Promise<CounterResult>;
  /**
   * Gives back what the take named `takeId` took, exactly once, under the rules of `giveBack`. A reclaim
   * that comes before its take leaves a tombstone (`ahead`) until the take's `deadline` (give the same
   * as the take's) and at least a minute: the take then takes nothing (`reclaimed`). The parent
   * remembers a take for a minute past the latest of its deadline and the end of its units' window (a
   * bucket's: its hold), at most 256 per counter. Absent when the parent keeps no take ledger (a
   * region's pool, whose units are reached over the region's own link).
   */
  reclaim?(takeId: string, deadline?: number): Promise<Reclaimed>;
}

export interface Spend {
  spent: boolean;
  /** Spendable units left after this call. */
  left: number;
  /** Units found past their spendBy and dropped by this call (they lapsed). */
  lapsed: number;
}

export interface DrainedUnits {
  /** Unspent units to give back, all of one window (`windowTag`; buckets: by the earliest tag). */
  units: number;
  windowTag: string | null;
  /** Units past their spendBy (or of an older window than `windowTag`): lapsed. */
  lapsed: number;
}

/** Where a holder keeps its unspent units. Every method may answer at once or later. */
export interface UnitPool {
  /** Spends `cost` units if the pool holds them and they are still spendable at `now` (all or nothing). */
  spend(cost: number, now: number): MaybePromise<Spend>;
  add(grant: Grant, now: number): MaybePromise<void>;
  /**
   * Puts a decision's refund back among the newest live units. Answers how many were accepted (none
   * when no live units are held: they lapsed).
   */
  refund(units: number, now: number): MaybePromise<number>;
  /** Spendable units at `now`. */
  available(now: number): MaybePromise<number>;
  /** Takes every unspent unit out (for a return); lapsed ones are reported apart. */
  drain(now: number): MaybePromise<DrainedUnits>;
}

/** The holder's clock and timers, injected (the simulation drives them). */
export interface LeaseClock {
  now(): number;
  setTimer(callback: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

/**
 * Production: a monotonic clock and unref'd Node timers. A holder only measures durations (a window's
 * end is the send time plus what the store said was left of it); a wall clock stepped back (NTP) would
 * let a window's units be spent after the window ended.
 */
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

/**
 * Why units that left a parent were neither admitted nor given back (CONTRACT "Loss is bounded and
 * counted"): their window ended, a bucket's max_hold passed, the holder holding them is gone, or the
 * parent could not be reached to give them back.
 */
export type LapseReason = 'window_ended' | 'hold_expired' | 'holder_lost' | 'parent_unreachable';

/** A unit's lapse when its spend-by came: with its window, or a bucket's max_hold after it left. */
export function expiredReason(shape: LeaseShape): LapseReason {
  return shape === 'bucket' ? 'hold_expired' : 'window_ended';
}

/** RL_LEASE_MAX_WAIT_MS's default: how long a decision waits for its holder's refill (CONTRACT "Bounded wait"). */
export const DEFAULT_LEASE_MAX_WAIT_MS = 100;

/**
 * Whatever holds units on this process's behalf (ProcessLeases; a RegionCounterStore): the one door to
 * let go, which DecisionService opens for every entry point alike (server, sidecar, embedded). Idle
 * holders let go by themselves.
 */
export interface UnitHolders {
  /** Lets go of the units of every counter whose policy is no longer `current(policyId)` (changed, disabled, deleted). */
  policiesChanged(current: (policyId: string) => { spec: unknown } | undefined): void | Promise<void>;
  /** Drain: every unspent unit goes back to its parent. */
  letGoAll(): Promise<void>;
}

/** Whether a counter store holds units itself (a RegionCounterStore). */
export function holdsUnits(store: object): store is UnitHolders {
  const candidate = store as Partial<UnitHolders>;
  return typeof candidate.policiesChanged === 'function' && typeof candidate.letGoAll === 'function';
}

/**
 * The retry_after of a decision refused after RL_LEASE_MAX_WAIT_MS (CONTRACT: at most max_hold): about
 * when the refill it waited for should have landed.
 */
export function waitTimeout(maxWaitMs: number, maxHoldMs: number): number {
  return Math.max(1, Math.min(maxWaitMs, maxHoldMs));
}

/** What a holder reports, for the metrics of CONTRACT "Metrics for leases". */
export interface LeaseEvents {
  /** One take from the parent answered (rl_lease_refills_total{level}). */
  refilled?(granted: number): void;
  /** Units given back to the parent (rl_lease_units_returned_total{level}). */
  returned?(units: number): void;
  /** Units neither admitted nor given back, and why (rl_lease_units_lapsed_total{policy_id,reason}). */
  lapsed?(units: number, reason: LapseReason): void;
  /** A lease operation failed (rl_counter_store_errors_total); logged by LeaseFailureLog. */
  failed?(kind: LeaseFailureKind): void;
  /** A decision waited for a refill this long (rl_lease_parent_wait_seconds). */
  waited?(seconds: number): void;
}
