import type { LeaseShape } from '../counters/counter-spec.js';
import type { CounterResult, LeaseOutcome, NamedGive, StoreMs } from '../counters/counter-store.js';

/** An instant by this process's clock (LeaseClock.now); softly branded, as StoreMs, so the two never mix. */
export type LocalMs = number & { readonly clock?: 'local' };

/** `at` by the store's clock, read as `storeNow` by an answer arriving at `localAt`: the store reaches it no later than this process does (docs/distribution.md "Clocks"). */
export function toStoreClock(at: LocalMs, storeNow: StoreMs, localAt: LocalMs): StoreMs {
  return Math.floor(storeNow + (at - localAt));
}

/** What one take from the parent answered. */
export interface Grant {
  /** min(asked, what the parent could admit then); possibly 0. */
  granted: number;
  remaining: number;
  /** How long the parent admits no more: the rest when it granted less than asked, else one more unit. */
  retryAfterMs: number;
  resetAfterMs: number;
  /** What a return names: the window (period, sub-window) of the units; a bucket's, the StoreMs they must be back by. */
  windowTag: number;
  spendBy: LocalMs;
  /** The parent's clock when the take ran: a sample for the deadlines of later takes. */
  parentNow: StoreMs;
  /** `late`: past its deadline, took nothing; `repeat`: its id was seen, the recorded grant; `reclaimed`: took nothing. */
  outcome: 'done' | 'late' | 'repeat' | 'reclaimed';
  /** A global budget with shares: every region's units of the window after the take, by name. */
  shareTaken?: Record<string, number>;
}

/** A take's or give's id and deadline at the parent: the store's own (NamedGive), without a bucket's hold. */
export type NamedTakeLimits = NamedGive;

/** What a give or a reclaim answered: units back, and those that could not go back (window ended, hold passed, bucket full). */
export interface GivenBack {
  returned: number;
  lapsed: number;
  /**
   * A give: `late`, past its deadline, gave nothing (the units are still the holder's); `repeat`, its id was seen:
   * the recorded answer; `reclaimed`, settled first: gave nothing. A reclaim: `repeat`, settled before; `ahead`,
   * the take or give has not run, and now does nothing if it comes.
   */
  outcome: LeaseOutcome;
  parentNow: StoreMs;
  /** A global budget with shares: every region's units of the window after the give, by name. */
  shareTaken?: Record<string, number>;
}

/** The counter a holder takes units from: one atomic call per operation. */
export interface LeaseParent {
  /** Up to `n` (≥ 1) units. Unreachable, it throws, and the take may still run: name it to reclaim it. */
  take(n: number, named?: NamedTakeLimits): Promise<Grant>;
  /**
   * Returns unspent units of `windowTag` while it is current (a bucket's: before it). Named (only a parent
   * with `reclaim`), past its deadline it gives nothing back, and asked again or reclaimed it answers what it did.
   */
  giveBack(units: number, windowTag: number | null, named?: NamedTakeLimits): Promise<GivenBack>;
  /** The parent's own peek: units held by holders count as used there. */
  peek(): Promise<CounterResult>;
  /**
   * Gives back what take `takeId` took, once (again: `repeat` to the same reclaimer `by`, `reclaimed` to
   * others); on a give's id, answers what that give did (`repeat`) and gives nothing. First, it leaves a
   * tombstone (`ahead`): that take or give then does nothing. Absent when the parent keeps no take ledger.
   */
  reclaim?(takeId: string, deadline?: StoreMs, by?: string): Promise<GivenBack>;
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
  setTimer: (callback, ms) => setTimeout(callback, ms).unref(),
  clearTimer: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** Waits `ms` by `clock` (the timer set first), or until `work()` settles (its value); the timer cleared either way. */
export function within<T>(clock: LeaseClock, ms: number, work?: () => Promise<T>): Promise<T | undefined> {
  let timer: unknown;
  const timeout = new Promise<undefined>((resolve) => (timer = ms > 0 ? clock.setTimer(() => resolve(undefined), ms) : resolve(undefined)));
  return Promise.race(work ? [work(), timeout] : [timeout]).finally(() => clock.clearTimer(timer));
}

/** Why units that left a parent were neither admitted nor given back (docs/distribution.md "What it costs (under-admission, bounded and counted)"). */
export type LapseReason = 'window_ended' | 'hold_expired' | 'holder_lost' | 'parent_unreachable';

/** Why a unit lapses when its spend-by comes. */
export function expiredReason(shape: LeaseShape): LapseReason {
  return shape === 'bucket' ? 'hold_expired' : 'window_ended';
}

/** RL_LEASE_MAX_WAIT_MS's default (README "Configuration"). */
export const DEFAULT_LEASE_MAX_WAIT_MS = 100;

/** Whatever holds units for this process (ProcessLeases, RegionCounterStore): the one door to let go. */
export interface UnitHolders {
  /** Lets go of the units of every counter whose policy is no longer `current(policyId)`. */
  policiesChanged(current: (policyId: string) => { spec: unknown } | undefined): void | Promise<void>;
  letGoAll(): Promise<void>;
}

export function holdsUnits(store: object): store is UnitHolders {
  const candidate = store as Partial<UnitHolders>;
  return typeof candidate.policiesChanged === 'function' && typeof candidate.letGoAll === 'function';
}

/** The retry_after of a decision refused after RL_LEASE_MAX_WAIT_MS (at most max_hold). */
export function waitTimeout(maxWaitMs: number, maxHoldMs: number): number {
  return Math.max(1, Math.min(maxWaitMs, maxHoldMs));
}

/** What a holder tried when its parent (or its region's store) failed it. */
export type LeaseFailureKind = 'refill' | 'drain' | 'give_back';

/** What a holder reports, for the lease metrics of README "Observability" (named beside each). */
export interface LeaseEvents {
  refilled?(granted: number): void; // rl_lease_refills_total{level}
  returned?(units: number): void; // rl_lease_units_returned_total{level}
  lapsed?(units: number, reason: LapseReason): void; // rl_lease_units_lapsed_total{policy_id,reason}
  failed?(kind: LeaseFailureKind): void; // rl_counter_store_errors_total
  waited?(seconds: number): void; // rl_lease_parent_wait_seconds
}
