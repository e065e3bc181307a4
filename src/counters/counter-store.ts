import type { ConcurrencySpec, RateSpec } from './counter-spec.js';

/**
 * An instant by a counter store's clock (epoch ms, Redis TIME), as its answers tell. Branded softly: a
 * plain number is one, but an instant of a holder's own clock (LocalMs, src/lease/types.ts) is not.
 */
export type StoreMs = number & { readonly clock?: 'store' };

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
  /**
   * An acquire's: it took a new slot (its slot id held none). False when refused, or when it only
   * refreshed the slot its slot id held: a give-back of it must release nothing (layered-decision.ts).
   */
  newSlot?: boolean;
  /**
   * A region's operation on a global budget with shares (a lease operation; a sliding log's consume, peek
   * or refund): every region's units of the current window, by name.
   */
  shareTaken?: Record<string, number>;
}

/**
 * What a rate script is asked to do (lua/includes/mode.lua, its ARGV[2]), beside a cost that stays a
 * number: consume, peek and refund, and a capacity lease's partial take and window-checked return.
 */
export type RateOperation = 'consume' | 'peek' | 'check' | 'refund' | 'take' | 'give' | 'reclaim';

/**
 * What a lease operation did (lua/includes/lease.lua): `done` it ran; a take or a give `late` (past its
 * deadline: nothing taken or given back), `repeat` (its id was seen: the recorded result, nothing more)
 * or `reclaimed` (its id was settled first: nothing taken or given back); a reclaim `repeat` (the
 * recorded answer, nothing more given back) or `ahead` (before its take or give, which will do nothing).
 */
export type LeaseOutcome = 'done' | 'late' | 'repeat' | 'reclaimed' | 'ahead';

/** A take's optional name and limits (lua/includes/lease.lua). */
export interface NamedTake {
  /** Recorded with what the take took, in the counter's take ledger (keys.ts takesKey): asked again, the take answers the same and takes nothing more; `reclaim` gives it back. 1 to 128 characters. */
  takeId?: string;
  /** The last instant, by the store's clock, the take may run; later it takes nothing (`late`). */
  deadline?: StoreMs;
  /** Buckets: how long the taker may hold the units (its max_hold; default 0): they must be back by the take's instant plus this. */
  holdMs?: number;
  /** A region's take of a global budget with shares (lua/includes/shares.lua): the region it is for. */
  region?: string;
}

/**
 * A give's optional name and deadline, as a take's (NamedTake): its id shares the take ledger with the
 * takes' ids (one id, one operation); `reclaim` settles it.
 */
export type NamedGive = Omit<NamedTake, 'holdMs'>;

/** What a giveBack gives back: `units` a take answered with `windowTag`, at `nowMs` (absent: the store's clock), `named` or not. */
export interface GiveBackRequest {
  units: number;
  windowTag: number | null;
  nowMs?: number;
  named?: NamedGive;
}

/**
 * A reclaim names a take or a give, and its deadline, until which the tombstone a reclaim leaves when it
 * comes first refuses that take or give.
 */
export interface TakeReclaim {
  takeId: string;
  deadline?: StoreMs;
  /** Who reclaims (1 to 128 characters): a take reclaimed again answers `repeat` only to its first reclaimer, `reclaimed` (nothing) to others. */
  by?: string;
  /** A region's reclaim on a global budget with shares: the region the take or give was for (NamedTake). */
  region?: string;
}

/** The answer to a lease operation: a CounterResult and what a holder needs (src/lease). */
export interface LeaseCounterResult extends CounterResult {
  /** Units taken (partial take: at most the `n` asked, possibly 0) or given back (the rest lapsed). */
  units: number;
  /**
   * What a give of these units names: the window start, quota period start or sub-window index they
   * belong to; a bucket's take, the instant (StoreMs) they must be back by (its instant plus `holdMs`).
   */
  windowTag: number;
  /** ms the units may still be spent: until their window (period, sub-window) ends; a bucket's, what is left of the hold. */
  windowLeftMs: number;
  /** The store's clock when the operation ran: what a holder samples to set its takes' deadlines. */
  storeNow: StoreMs;
  outcome: LeaseOutcome;
  /** give, reclaim: units that did not go back (their window ended, a bucket's hold passed, or the bucket was full). */
  lapsed: number;
}

/**
 * One operation of an all-or-nothing group (CounterStore.group): a consume or an acquire. `soft`: its
 * refusal does not refuse the group (the caller lets such a request through anyway, a `downgrade`
 * policy say); it then only does not run.
 */
export type GroupOperation =
  | { op: 'consume'; keys: string[]; spec: RateSpec; cost: number; soft?: boolean }
  | { op: 'acquire'; keys: string[]; spec: ConcurrencySpec; slotId: string; soft?: boolean };

/**
 * What a group answered: one result per operation, in order. `committed` tells which operations ran
 * (wrote): when no operation that is not soft refused, every admitted one ran; otherwise none did, as
 * one step. On Redis Cluster a group runs as one step per hash slot, so operations of a slot whose
 * step admitted ran while another slot's refused: their `committed` is true, and the caller gives
 * them back.
 */
export interface GroupResult {
  results: CounterResult[];
  /** Per operation: whether it ran (an admitted consume counted, an admitted acquire holds its slot). */
  committed: boolean[];
}

/**
 * One interface, two backends with identical semantics: MemoryCounterStore (single node) and
 * RedisCounterStore (each operation atomic in one Lua script call, shared by the operations of one
 * event-loop turn). `keys` come from keys.ts; callers hand the
 * same array to many operations (DecisionService caches them), so a store never modifies it.
 *
 * `nowMs` is an explicit time: tests drive both stores with it, and DecisionService hands the
 * synchronous store the clock reading it has just made (`sync.clock`) instead of a second read. Without
 * it the Redis store reads Redis `TIME`, the memory store its injected clock. Every operation either completes atomically or throws CounterStoreUnavailableError.
 */
export interface CounterStore {
  /**
   * The same operations answered synchronously, for a store that never waits (the in-memory
   * emulator): the DecisionService then decides without a promise per step. Same semantics and the same
   * errors (thrown instead of rejected) as the asynchronous ones; absent when the store has to wait.
   */
  readonly sync?: SyncCounterOperations;
  /**
   * Takes `cost` units if they all fit; a denied request takes nothing. `region`: a region's consume of a
   * global budget with shares whose algorithm leases nothing (sliding_window_log, counters/shares-log.ts);
   * other algorithms ignore it.
   */
  consume(keys: string[], spec: RateSpec, cost: number, nowMs?: number, region?: string): Promise<CounterResult>;
  /**
   * Answers as a consume of 1 would (`remaining` before it), writing nothing: the same script in
   * read-only mode (docs/algorithms.md, "Peek").
   */
  peek(keys: string[], spec: RateSpec, nowMs?: number, region?: string): Promise<CounterResult>;
  /**
   * Gives `amount` units back to the current window, bucket or period: usage never below zero, a
   * bucket never above its capacity. `allowed` is always true; `remaining` is after the refund.
   */
  refund(keys: string[], spec: RateSpec, amount: number, nowMs?: number, region?: string): Promise<CounterResult>;
  /**
   * Capacity leases (src/lease), in the algorithm's own script: takes min(`n`, what the counter admits
   * now) units, possibly none; `retryAfterMs` is that of a refused consume of `n` when less was granted,
   * and when all `n` were, that of a consume of one more unit (0 while the counter admits one more).
   * `windowTag`: what a give of the units names (LeaseCounterResult). `named`: a deadline, an id that
   * makes the take answerable again and reclaimable, and a bucket's hold (NamedTake); `storeNow` answers
   * this store's clock, from which a taker sets its deadlines.
   */
  take?(keys: string[], spec: RateSpec, n: number, nowMs?: number, named?: NamedTake): Promise<LeaseCounterResult>;
  /**
   * Gives back `units` a take answered with `windowTag`, only while that window (period, sub-window)
   * is the current one; otherwise they lapsed (`units` of the answer: how many went back).
   * Buckets: `windowTag` is the instant they had to be back by; an ordinary refund before it, nothing
   * from then on (null: nothing). `named`: a deadline (later: `late`, nothing given back) and an id that
   * makes the give answerable again (`repeat`: the recorded units and lapsed, nothing more) and
   * settleable (`reclaim`); `reclaimed` when it was settled first (nothing given back).
   */
  giveBack?(keys: string[], spec: RateSpec, give: GiveBackRequest): Promise<LeaseCounterResult>;
  /**
   * Settles the named take or give `take.takeId`, exactly once. A take's: gives back what it took, under
   * the rules of `giveBack` (what does not go back is `lapsed`); a give's: gives nothing, `repeat` with
   * what the give did (`units` back, `lapsed`). `outcome` `repeat` when settled before (the same answer
   * again; a take's only to the same `by`, else `reclaimed`: nothing), `ahead` when that take or give has not come (yet): it will do nothing.
   */
  reclaim?(keys: string[], spec: RateSpec, take: TakeReclaim, nowMs?: number): Promise<LeaseCounterResult>;
  /**
   * All or nothing: every operation is first checked (answered as it would be now, writing nothing),
   * and only when all of them admit (soft ones aside) are the admitted ones run, in one step (one script call in Redis, per hash
   * slot in a Cluster). A refused group writes nothing: its results are the checks' answers. An
   * operation that fails (CounterStoreUnavailableError) is an Error in `results`' place, and counts as
   * a refusal of its step. Absent: the store has no such step (the caller runs the operations one by
   * one and gives back what a refusal left taken).
   */
  group?(operations: readonly GroupOperation[], nowMs?: number): Promise<GroupOutcome>;
  /** Takes a lease slot for `slotId`, or refreshes the lease if it is already held. */
  acquire(keys: string[], spec: ConcurrencySpec, slotId: string, nowMs?: number): Promise<CounterResult>;
  /** Returns the lease; `allowed` false when no such lease was held. */
  release(keys: string[], spec: ConcurrencySpec, slotId: string, nowMs?: number): Promise<CounterResult>;
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
  take?(keys: string[], spec: RateSpec, n: number, nowMs?: number, named?: NamedTake): LeaseCounterResult;
  giveBack?(keys: string[], spec: RateSpec, give: GiveBackRequest): LeaseCounterResult;
  reclaim?(keys: string[], spec: RateSpec, take: TakeReclaim, nowMs?: number): LeaseCounterResult;
  acquire(keys: string[], spec: ConcurrencySpec, slotId: string, nowMs?: number): CounterResult;
  release(keys: string[], spec: ConcurrencySpec, slotId: string, nowMs?: number): CounterResult;
  group?(operations: readonly GroupOperation[], nowMs?: number): GroupResult;
}

/** A group's answer from a store that may fail per operation: a result or the failure, per operation. */
export interface GroupOutcome {
  results: (CounterResult | Error)[];
  committed: boolean[];
}
