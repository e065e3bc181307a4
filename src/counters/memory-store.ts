import type {
  CounterResult, CounterStore, GiveBackRequest, GroupOperation, GroupOutcome, GroupResult, LeaseCounterResult, NamedTake, SyncCounterOperations, TakeReclaim,
} from './counter-store.js';
import { sharesKey, takesKey } from './keys.js';
import { finishLeaseOp, prepareLeaseOp, type LedgerSlot, type PreparedLeaseOp, type TakeLedger } from './parent-take-ledger.js';
import { logShareOf, regionShareOf, shareAnswer, shareRoom, type NamedShare, type ShareLedger, type ShareSlot } from './shares.js';
import { slideAt, slidingShareAnswer, slidingShareRoom, type SlidingShareLedger } from './shares-sliding.js';
import type { ConcurrencySpec, RateSpec } from './counter-spec.js';
import { acquireCheck, acquireNow, releaseNow } from './emulator/concurrency.js';
import { calendarWindow } from './emulator/calendar-window.js';
import { fixedWindow } from './emulator/fixed-window.js';
import { MemoryKeyspace, type MemoryKeyspaceOptions } from './emulator/keyspace.js';
import { leakyBucket } from './emulator/leaky-bucket.js';
import { AlgorithmCall } from './emulator/mode.js';
import { quota } from './emulator/quota.js';
import { slidingCounter } from './emulator/sliding-window-counter.js';
import { slidingLog } from './emulator/sliding-window-log.js';
import { tokenBucket } from './emulator/token-bucket.js';

/**
 * The in-memory emulator of the Lua scripts in `lua/`: single-node mode, and the reference the
 * property test holds the scripts to. Each algorithm (emulator/<name>.ts) is a line-by-line port of its
 * script (same operations in the same order, so floating point gives bit-identical results); change
 * both together. The keys live in a MemoryKeyspace (emulator/keyspace.ts), expiry as in Redis.
 */

export type MemoryCounterStoreOptions = MemoryKeyspaceOptions;

/** A lease operation's arguments: its units (a reclaim's: 0), its name, deadline and hold, a give's window tag. */
type LeaseArgs = NamedTake & Partial<TakeReclaim> & { units: number; tag?: number };

export class MemoryCounterStore implements CounterStore {
  private readonly space: MemoryKeyspace;
  private readonly now: () => number;
  /** The one operation running (AlgorithmCall): refilled per operation, so a decision allocates nothing for it. */
  private readonly call: AlgorithmCall;
  /** The emulator never waits: DecisionService uses these directly; the async methods wrap them. */
  readonly sync: SyncCounterOperations & Required<Pick<SyncCounterOperations, 'take' | 'giveBack' | 'reclaim' | 'group'>>;

  constructor(options: MemoryCounterStoreOptions = {}) {
    this.space = new MemoryKeyspace(options);
    this.now = this.space.now;
    this.call = new AlgorithmCall(this.space);
    this.sync = {
      clock: this.now,
      consume: (keys, spec, cost, nowMs) => this.consumeNow(this.call.set(keys, 'consume', cost, nowMs ?? this.now(), 0), spec),
      peek: (keys, spec, nowMs) => this.consumeNow(this.call.set(keys, 'peek', 1, nowMs ?? this.now(), 0), spec),
      refund: (keys, spec, amount, nowMs) => this.consumeNow(this.call.set(keys, 'refund', amount, nowMs ?? this.now(), 0), spec),
      acquire: (keys, spec, slotId, nowMs) => acquireNow(this.space, keys[0], spec, slotId, nowMs ?? this.now()),
      release: (keys, spec, slotId, nowMs) => releaseNow(this.space, keys[0], spec, slotId, nowMs ?? this.now()),
      take: (keys, spec, n, nowMs, named) => this.leaseNow(keys, spec, 'take', nowMs ?? this.now(), { ...named, units: n }),
      giveBack: (keys, spec, { units, windowTag, nowMs, named }) => this.leaseNow(keys, spec, 'give', nowMs ?? this.now(), { ...named, units, tag: windowTag ?? 0 }),
      reclaim: (keys, spec, take, nowMs) => this.leaseNow(keys, spec, 'reclaim', nowMs ?? this.now(), { ...take, units: 0 }),
      group: (operations, nowMs) => this.groupNow(operations, nowMs ?? this.now()),
    };
  }

  /** Number of live keys (for tests and the memory benchmark). */
  get size(): number {
    return this.space.size;
  }

  /** The key space itself, for the snapshots that save it across restarts (counters/snapshot). */
  get keyspace(): MemoryKeyspace {
    return this.space;
  }

  /** Deletes expired keys now (MemoryKeyspace.sweep); returns how many. */
  sweep(nowMs?: number, deadline?: number): number {
    return this.space.sweep(nowMs, deadline);
  }

  async consume(keys: string[], spec: RateSpec, cost: number, nowMs?: number, region?: string): Promise<CounterResult> {
    if (region !== undefined) return this.consumeNow(this.call.set(keys, 'consume', cost, nowMs ?? this.now(), 0), spec, region);
    return this.sync.consume(keys, spec, cost, nowMs);
  }

  async peek(keys: string[], spec: RateSpec, nowMs?: number, region?: string): Promise<CounterResult> {
    if (region !== undefined) return this.consumeNow(this.call.set(keys, 'peek', 1, nowMs ?? this.now(), 0), spec, region);
    return this.sync.peek(keys, spec, nowMs);
  }

  async refund(keys: string[], spec: RateSpec, amount: number, nowMs?: number, region?: string): Promise<CounterResult> {
    if (region !== undefined) return this.consumeNow(this.call.set(keys, 'refund', amount, nowMs ?? this.now(), 0), spec, region);
    return this.sync.refund(keys, spec, amount, nowMs);
  }

  async take(keys: string[], spec: RateSpec, n: number, nowMs?: number, named?: NamedTake): Promise<LeaseCounterResult> {
    return this.sync.take(keys, spec, n, nowMs, named);
  }

  async giveBack(keys: string[], spec: RateSpec, give: GiveBackRequest): Promise<LeaseCounterResult> {
    return this.sync.giveBack(keys, spec, give);
  }

  async reclaim(keys: string[], spec: RateSpec, take: TakeReclaim, nowMs?: number): Promise<LeaseCounterResult> {
    return this.sync.reclaim(keys, spec, take, nowMs);
  }

  async group(operations: readonly GroupOperation[], nowMs?: number): Promise<GroupOutcome> {
    return this.sync.group(operations, nowMs);
  }

  async acquire(keys: string[], spec: ConcurrencySpec, slotId: string, nowMs?: number): Promise<CounterResult> {
    return this.sync.acquire(keys, spec, slotId, nowMs);
  }

  async release(keys: string[], spec: ConcurrencySpec, slotId: string, nowMs?: number): Promise<CounterResult> {
    return this.sync.release(keys, spec, slotId, nowMs);
  }

  isHealthy(): boolean {
    return true;
  }

  async close(): Promise<void> {
    this.space.clear();
  }

  /**
   * One operation of a rate script (lua/includes/mode.lua), as `call` (this.call, just set) asks it; a
   * take or a give is answered as a LeaseCounterResult. `region`: a sliding log's region, with a share
   * of its global budget (shares-log.ts).
   */
  private consumeNow(call: AlgorithmCall, spec: RateSpec, region?: string): CounterResult {
    switch (spec.type) {
      case 'fixed_window':
        if (spec.calendar !== undefined) return calendarWindow(call, spec.limit, spec.calendar.around(call.now));
        return fixedWindow(call, spec.limit, spec.windowMs);
      case 'quota':
        if (spec.calendar !== undefined) return calendarWindow(call, spec.limit, spec.calendar.around(call.now));
        return quota(call, spec.limit, spec.periodMs);
      case 'sliding_window_counter':
        return slidingCounter(call, spec.limit, spec.windowMs, spec.subWindows);
      case 'sliding_window_log':
        if (call.taking || call.giving) throw new Error('sliding_window_log takes no capacity lease');
        return slidingLog(call, spec.limit, spec.windowMs, logShareOf(spec, region));
      case 'token_bucket':
        return tokenBucket(call, spec.capacity, spec.rateUnits, spec.ratePeriodMs);
      case 'leaky_bucket':
        return leakyBucket(call, spec.capacity, spec.rateUnits, spec.ratePeriodMs);
    }
  }

  /**
   * All or nothing, as lua/batch.lua runs a group: every operation checked (written nothing), then,
   * when all admit, every one run. Synchronous, so nothing comes between the checks and the runs.
   */
  private groupNow(operations: readonly GroupOperation[], now: number): GroupResult {
    const checks = operations.map((o) => this.groupStep(o, true, now));
    const refused = checks.some((r, i) => !r.allowed && operations[i].soft !== true);
    if (refused) return { results: checks, committed: operations.map(() => false) };
    const results = operations.map((o, i) => (checks[i].allowed ? this.groupStep(o, false, now) : checks[i]));
    // A counter named twice may refuse its second run (each check saw the counter before both): that one did not run.
    return { results, committed: results.map((r, i) => checks[i].allowed && r.allowed) };
  }

  /** One operation of a group, checked (writing nothing) or run. */
  private groupStep(o: GroupOperation, checking: boolean, now: number): CounterResult {
    if (o.op === 'consume') return this.consumeNow(this.call.set(o.keys, checking ? 'check' : 'consume', o.cost, now, 0), o.spec);
    return (checking ? acquireCheck : acquireNow)(this.space, o.keys[0], o.spec, o.slotId, now);
  }

  /**
   * A lease operation: the take ledger read first, the algorithm's take or give, then the ledger
   * written and the answer completed (parent-take-ledger.ts, the port of lua/includes/lease.lua).
   */
  private leaseNow(keys: string[], spec: RateSpec, op: 'take' | 'give' | 'reclaim', now: number, args: LeaseArgs): LeaseCounterResult {
    if (spec.type === 'sliding_window_log') throw new Error('sliding_window_log takes no capacity lease');
    const ledgerKey = takesKey(keys[0]);
    const slot: LedgerSlot = {
      read: () => this.space.get<TakeLedger>(ledgerKey, now),
      expireAt: () => this.space.slots.get(ledgerKey)?.expireAt,
      write: (ledger, expireAt) => this.space.put<TakeLedger>(ledgerKey, ledger, expireAt),
    };
    const prepared = prepareLeaseOp(op, args.units, args, now, slot);
    const share = regionShareOf(spec, args.region);
    const call = this.call.set(keys, prepared.op, prepared.units, now, prepared.tag);
    if (share === undefined) {
      const answer = this.consumeNow(call, spec) as LeaseCounterResult;
      return finishLeaseOp(prepared, answer, now, spec.type === 'token_bucket' || spec.type === 'leaky_bucket' ? 'bucket' : 'window', slot);
    }
    return this.sharedLeaseNow(call, spec, prepared, share, slot);
  }

  /**
   * A region's lease operation on a global budget with shares (shares.ts, the port of
   * lua/includes/shares.lua): a take gets at most its share's room in the window, which a take of
   * nothing names first (it writes nothing). `call`: the operation as prepared.
   */
  private sharedLeaseNow(call: AlgorithmCall, spec: RateSpec, prepared: PreparedLeaseOp, share: NamedShare, slot: LedgerSlot): LeaseCounterResult {
    const { keys, now } = call;
    const key = sharesKey(keys[0]);
    const slotOf = <Ledger>(): ShareSlot<Ledger> => ({
      read: () => this.space.get<Ledger>(key, now),
      write: (ledger, expireAt) => this.space.put<Ledger>(key, ledger, expireAt),
    });
    // A sliding window's ledger counts per sub-window (shares-sliding.ts).
    const sliding = spec.type === 'sliding_window_counter' ? { at: slideAt(spec, now), slot: slotOf<SlidingShareLedger>() } : undefined;
    const shares = slotOf<ShareLedger>();
    let room = 0;
    let units = prepared.units;
    if (prepared.op === 'take') {
      if (sliding) room = slidingShareRoom(sliding.slot, share, sliding.at);
      else room = shareRoom(shares, share, (this.consumeNow(call.set(keys, 'take', 0, now, 0), spec) as LeaseCounterResult).windowTag);
      units = Math.min(units, room);
    }
    const answer = this.consumeNow(call.set(keys, prepared.op, units, now, prepared.tag), spec) as LeaseCounterResult;
    // Capped by the share, the take answers as one refused the rest until the window (sub-window) ends.
    if (units < prepared.units) answer.retryAfterMs = answer.windowLeftMs;
    finishLeaseOp(prepared, answer, now, 'window', slot);
    if (sliding) slidingShareAnswer(sliding, share, answer, prepared.op, room);
    else shareAnswer(shares, share, answer, prepared.op, room);
    return answer;
  }

}
