import type { CounterResult, CounterStore, LeaseCounterResult, NamedTake, RateOperation, SyncCounterOperations, TakeReclaim } from './counter-store.js';
import { takesKey } from './keys.js';
import { finishLeaseOp, prepareLeaseOp, type LedgerSlot, type TakeLedger } from './named-takes.js';
import type { LeaseSpec, RateSpec } from './counter-spec.js';

/**
 * The in-memory emulator of the Lua scripts in `lua/`: single-node mode, and the reference the
 * property test holds the scripts to. Each algorithm below is a line-by-line port of its script (same
 * operations in the same order, so floating point gives bit-identical results); change both together.
 *
 * Every algorithm treats state whose time has passed exactly like absent state, so when a key expires
 * (here by the sweeper, in Redis by PEXPIRE) nothing observable changes: expiry only reclaims memory.
 */

/** What the Map holds per key: at least its expiry (epoch ms), which the sweeper reads. */
interface Slot {
  expireAt: number;
}

/** Every algorithm but fixed_window: its state object beside the expiry. */
interface StateSlot<T> extends Slot {
  state: T;
}

/**
 * fixed_window, the hottest algorithm and the one with the most live keys, keeps its state in the slot
 * itself, as three small integers: one small object per key instead of a slot with a nested state
 * object and epoch-ms doubles, each boxed by V8 in a heap number of its own (sizes: BENCHMARKS.md).
 * The window is stored by its number, windowStart / windowMs (exact: windows are whole milliseconds,
 * so windowStart is a whole multiple of windowMs), which fits a V8 small integer (32 bits in Node's
 * builds) for windows of a second or more until 2038 (a number past that range is boxed, with the
 * same results). The window's end, the key's expiry, is derived from it. Keys carry their algorithm,
 * so a fixed_window key's slot is always one of these.
 */
class FixedWindowSlot implements Slot {
  constructor(
    public windowNumber: number,
    public windowMs: number,
    public used: number,
  ) {}

  get windowStart(): number {
    return this.windowNumber * this.windowMs;
  }

  get expireAt(): number {
    return (this.windowNumber + 1) * this.windowMs;
  }
}

/**
 * A counter's key array (`keys` of the store's operations), which may carry the fixed_window slot of its
 * key in this store. The array is the caller's; DecisionService hands the same one for the same counter
 * (CounterKeyCache), so the hottest decision skips the Map lookup. Sound because a slot only ever leaves
 * the Map through `drop` or `close`, which mark it expired (markDropped), and a carried slot is used only
 * while it has not expired: then it is exactly the one the Map holds for the key.
 */
declare const SLOT_TAG_TYPE: unique symbol;
type SlotCarrier = string[] & { [SLOT_TAG_TYPE]?: FixedWindowSlot };

/** A deleted slot reads as expired from then on: a fixed_window slot's expiry is derived from its window number. */
function markDropped(slot: Slot): void {
  if (slot instanceof FixedWindowSlot) slot.windowNumber = -1;
}

/** What an algorithm runs: a reclaim reaches it as a give (named-takes.ts). */
type AlgorithmOperation = Exclude<RateOperation, 'reclaim'>;

interface QuotaState { periodStart: number; used: number }
interface SlidingCounterState { buckets: Map<number, number> }
interface SlidingLogState { entries: { ts: number; cost: number }[]; sum: number }
interface BucketState { amount: number; updatedAt: number; settledAt: number }
interface LeaseState { leases: Map<string, number> }

export interface MemoryCounterStoreOptions {
  /** Clock in epoch milliseconds; tests inject their own. */
  now?: () => number;
  /** How often the sweeper runs; 0 disables it (tests that sweep by hand). */
  sweepIntervalMs?: number;
  /** How many keys one sweep looks at, at most. */
  sweepBatch?: number;
  /** How long one timer-driven sweep may run, so it never stalls decisions for long (ms). */
  sweepBudgetMs?: number;
}

export class MemoryCounterStore implements CounterStore {
  private readonly slots = new Map<string, Slot>();
  private readonly now: () => number;
  private readonly sweepBatch: number;
  private readonly sweepBudgetMs: number;
  private sweepCursor: Iterator<[string, Slot]> | undefined;
  private readonly sweepTimer: NodeJS.Timeout | undefined;
  /** The emulator never waits: DecisionService uses these directly; the async methods wrap them. */
  readonly sync: SyncCounterOperations & Required<Pick<SyncCounterOperations, 'take' | 'giveBack' | 'reclaim'>>;
  /** This store's property on the key arrays it is handed (SlotCarrier): two stores never read each other's. */
  private readonly slotTag: typeof SLOT_TAG_TYPE = Symbol('fixedWindowSlot') as typeof SLOT_TAG_TYPE;

  constructor(options: MemoryCounterStoreOptions = {}) {
    this.now = options.now ?? Date.now;
    this.sync = {
      clock: this.now,
      consume: (keys, spec, cost, nowMs) => this.consumeNow(keys, spec, 'consume', cost, nowMs ?? this.now()),
      peek: (keys, spec, nowMs) => this.consumeNow(keys, spec, 'peek', 1, nowMs ?? this.now()),
      refund: (keys, spec, amount, nowMs) => this.consumeNow(keys, spec, 'refund', amount, nowMs ?? this.now()),
      acquire: (keys, spec, leaseId, nowMs) => this.acquireNow(keys[0], spec, leaseId, nowMs ?? this.now()),
      release: (keys, spec, leaseId, nowMs) => this.releaseNow(keys[0], spec, leaseId, nowMs ?? this.now()),
      take: (keys, spec, n, nowMs, named) => this.leaseNow(keys, spec, 'take', n, nowMs ?? this.now(), named ?? {}),
      giveBack: (keys, spec, units, windowTag, nowMs) => this.leaseNow(keys, spec, 'give', units, nowMs ?? this.now(), { tag: windowTag ?? 0 }),
      reclaim: (keys, spec, take, nowMs) => this.leaseNow(keys, spec, 'reclaim', 0, nowMs ?? this.now(), take),
    };
    this.sweepBatch = options.sweepBatch ?? 20_000;
    this.sweepBudgetMs = options.sweepBudgetMs ?? 4;
    // Every 100 ms for at most 4 ms: a small share of a core while a million keys expire, and never a
    // pause that shows in decision latency, as count-bounded sweeps did (BENCHMARKS.md).
    const interval = options.sweepIntervalMs ?? 100;
    if (interval > 0) {
      this.sweepTimer = setInterval(() => this.sweep(this.now(), performance.now() + this.sweepBudgetMs), interval);
      this.sweepTimer.unref();
    }
  }

  /** Number of live keys (for tests and the memory benchmark). */
  get size(): number {
    return this.slots.size;
  }

  /**
   * Deletes expired keys, resuming where the previous sweep stopped: at most `sweepBatch` keys per
   * call and, when a `deadline` (a performance.now() instant) is given, not past it. Returns how many
   * were deleted.
   */
  sweep(nowMs = this.now(), deadline = Infinity): number {
    let deleted = 0;
    for (let looked = 0; looked < this.sweepBatch; looked++) {
      if ((looked & 511) === 511 && performance.now() > deadline) break;
      this.sweepCursor ??= this.slots.entries();
      const next = this.sweepCursor.next();
      if (next.done) {
        this.sweepCursor = undefined;
        break;
      }
      const [key, slot] = next.value;
      if (slot.expireAt <= nowMs) {
        this.drop(key, slot);
        deleted++;
      }
    }
    return deleted;
  }

  async consume(keys: string[], spec: RateSpec, cost: number, nowMs?: number): Promise<CounterResult> {
    return this.sync.consume(keys, spec, cost, nowMs);
  }

  async peek(keys: string[], spec: RateSpec, nowMs?: number): Promise<CounterResult> {
    return this.sync.peek(keys, spec, nowMs);
  }

  async refund(keys: string[], spec: RateSpec, amount: number, nowMs?: number): Promise<CounterResult> {
    return this.sync.refund(keys, spec, amount, nowMs);
  }

  async take(keys: string[], spec: RateSpec, n: number, nowMs?: number, named?: NamedTake): Promise<LeaseCounterResult> {
    return this.sync.take(keys, spec, n, nowMs, named);
  }

  async giveBack(keys: string[], spec: RateSpec, units: number, windowTag: number | null, nowMs?: number): Promise<LeaseCounterResult> {
    return this.sync.giveBack(keys, spec, units, windowTag, nowMs);
  }

  async reclaim(keys: string[], spec: RateSpec, take: TakeReclaim, nowMs?: number): Promise<LeaseCounterResult> {
    return this.sync.reclaim(keys, spec, take, nowMs);
  }

  async acquire(keys: string[], spec: LeaseSpec, leaseId: string, nowMs?: number): Promise<CounterResult> {
    return this.sync.acquire(keys, spec, leaseId, nowMs);
  }

  async release(keys: string[], spec: LeaseSpec, leaseId: string, nowMs?: number): Promise<CounterResult> {
    return this.sync.release(keys, spec, leaseId, nowMs);
  }

  isHealthy(): boolean {
    return true;
  }

  async close(): Promise<void> {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    for (const slot of this.slots.values()) markDropped(slot);
    this.slots.clear();
  }

  /**
   * One operation of a rate script (lua/includes/mode.lua) on `units`; a take or a give is answered as a
   * LeaseCounterResult, and a give names the window of its units (`tag`).
   */
  private consumeNow(keys: string[], spec: RateSpec, op: AlgorithmOperation, units: number, now: number, tag = 0): CounterResult {
    const key = keys[0];
    switch (spec.type) {
      case 'fixed_window':
        return this.fixedWindow(keys as SlotCarrier, spec.limit, spec.windowMs, op, units, now, tag);
      case 'quota':
        return this.quota(key, spec.limit, spec.periodMs, op, units, now, tag);
      case 'sliding_window_counter':
        return this.slidingCounter(key, spec.limit, spec.windowMs, spec.subWindows, op, units, now, tag);
      case 'sliding_window_log':
        if (op === 'take' || op === 'give') throw new Error('sliding_window_log takes no capacity lease');
        return this.slidingLog(key, spec.limit, spec.windowMs, op, units, now);
      case 'token_bucket':
        return this.tokenBucket(key, spec.capacity, spec.rateUnits, spec.ratePeriodMs, op, units, now, tag);
      case 'leaky_bucket':
        return this.leakyBucket(key, spec.capacity, spec.rateUnits, spec.ratePeriodMs, op, units, now, tag);
    }
  }

  /**
   * A lease operation: the take ledger read first, the algorithm's take or give, then the ledger
   * written and the answer completed (named-takes.ts, the port of lua/includes/lease.lua).
   */
  private leaseNow(
    keys: string[], spec: RateSpec, op: 'take' | 'give' | 'reclaim', units: number, now: number, args: NamedTake & Partial<TakeReclaim> & { tag?: number },
  ): LeaseCounterResult {
    if (spec.type === 'sliding_window_log') throw new Error('sliding_window_log takes no capacity lease');
    const ledgerKey = takesKey(keys[0]);
    const slot: LedgerSlot = {
      read: () => this.get<TakeLedger>(ledgerKey, now),
      expireAt: () => this.slots.get(ledgerKey)?.expireAt,
      write: (ledger, expireAt) => this.put<TakeLedger>(ledgerKey, ledger, expireAt),
    };
    const prepared = prepareLeaseOp(op, units, args, now, slot);
    const answer = this.consumeNow(keys, spec, prepared.op, prepared.units, now, prepared.tag) as LeaseCounterResult;
    return finishLeaseOp(prepared, answer, now, spec.type === 'token_bucket' || spec.type === 'leaky_bucket' ? 'bucket' : 'window', slot);
  }

  private acquireNow(key: string, spec: LeaseSpec, leaseId: string, now: number): CounterResult {
    const max = spec.maxConcurrency;
    const leases = this.liveLeases(key, now);
    if (leases.has(leaseId) || leases.size < max) {
      leases.set(leaseId, now + spec.leaseTtlMs);
      const latest = maxValue(leases);
      this.put<LeaseState>(key, { leases }, latest);
      return result(true, Math.max(0, max - leases.size), 0, latest - now);
    }
    const retry = minValue(leases) - now;
    return result(false, Math.max(0, max - leases.size), retry, maxValue(leases) - now);
  }

  private releaseNow(key: string, spec: LeaseSpec, leaseId: string, now: number): CounterResult {
    const leases = this.liveLeases(key, now);
    const removed = leases.delete(leaseId);
    let reset = 0;
    if (leases.size === 0) {
      this.slots.delete(key); // a lease key: never a fixed_window slot (keys carry their algorithm)
    } else {
      const latest = maxValue(leases);
      this.put<LeaseState>(key, { leases }, latest);
      reset = latest - now;
    }
    return result(removed, Math.max(0, spec.maxConcurrency - leases.size), 0, reset);
  }

  // --- algorithms: each mirrors lua/<name>.lua ---

  private fixedWindow(keys: SlotCarrier, limit: number, windowMs: number, op: AlgorithmOperation, units: number, now: number, tag: number): CounterResult {
    const key = keys[0];
    const windowStart = now - (now % windowMs);
    const windowEnd = windowStart + windowMs;
    // The hottest algorithm: no allocation for a key already in use, and no Map lookup either when
    // the caller hands the same key array again (DecisionService's key cache does) and the slot it
    // carries is still live (not expired; a deleted slot is marked expired).
    let slot = keys[this.slotTag];
    if (slot === undefined || slot.expireAt <= now) {
      slot = this.live<FixedWindowSlot>(key, now);
      if (slot !== undefined) keys[this.slotTag] = slot;
    }
    let used = slot && slot.windowStart === windowStart ? slot.used : 0;
    if (op !== 'consume') {
      if (op === 'take' || op === 'give') return this.fixedWindowLease(keys, slot, used, limit, windowStart, windowMs, op, units, now, tag);
      const reset = used > 0 ? windowEnd - now : 0;
      if (op === 'refund') {
        if (used > 0) {
          used = Math.max(0, used - units);
          slot!.used = used;
        }
        // Refunded to zero usage, the window is whole again: reset 0, as a peek would then say.
        return result(true, Math.max(0, limit - used), 0, used === 0 ? 0 : reset);
      }
      if (used + 1 > limit) return result(false, Math.max(0, limit - used), windowEnd - now, windowEnd - now);
      return result(true, Math.max(0, limit - used), 0, reset);
    }
    const cost = units;
    if (used + cost > limit) {
      return result(false, Math.max(0, limit - used), windowEnd - now, windowEnd - now);
    }
    // Expires at windowEnd, as the script's PEXPIRE.
    if (slot) {
      slot.windowNumber = windowStart / windowMs;
      slot.windowMs = windowMs;
      slot.used = used + cost;
    } else {
      const created = new FixedWindowSlot(windowStart / windowMs, windowMs, used + cost);
      this.slots.set(key, created);
      keys[this.slotTag] = created;
    }
    return result(true, Math.max(0, limit - (used + cost)), 0, windowEnd - now);
  }

  /** fixed_window's lease operations, apart from its hot path: the `giving` and `taking` branches of the script. */
  private fixedWindowLease(
    keys: SlotCarrier, slot: FixedWindowSlot | undefined, used: number, limit: number, windowStart: number, windowMs: number,
    op: 'take' | 'give', units: number, now: number, tag: number,
  ): LeaseCounterResult {
    const windowEnd = windowStart + windowMs;
    let reset = used > 0 ? windowEnd - now : 0;
    if (op === 'give') {
      // The units' window has ended: they lapsed, and nothing goes back.
      if (tag !== windowStart) return leaseResult(true, Math.max(0, limit - used), 0, reset, 0, windowStart, windowEnd - now);
      const before = used;
      if (used > 0) {
        used = Math.max(0, used - units);
        slot!.used = used;
      }
      if (used === 0) reset = 0;
      return leaseResult(true, Math.max(0, limit - used), 0, reset, before - used, windowStart, windowEnd - now);
    }
    return windowTake(units, used, limit, windowStart, windowEnd, reset, now, (taken) => {
      if (slot) {
        slot.windowNumber = windowStart / windowMs;
        slot.windowMs = windowMs;
        slot.used = taken;
      } else {
        const created = new FixedWindowSlot(windowStart / windowMs, windowMs, taken);
        this.slots.set(keys[0], created);
        keys[this.slotTag] = created;
      }
    });
  }

  private quota(key: string, limit: number, periodMs: number, op: AlgorithmOperation, units: number, now: number, giveTag: number): CounterResult {
    const { peeking, refunding, cost, refund, taking, giving } = mode(op, units);
    // The period starts with the first consumption and lasts periodMs.
    const stored = this.get<QuotaState>(key, now);
    let periodStart = now;
    let used = 0;
    if (stored && now < stored.periodStart + periodMs) {
      periodStart = stored.periodStart;
      used = stored.used;
    }
    const periodEnd = periodStart + periodMs;
    const reset = used > 0 ? periodEnd - now : 0;
    if (giving && giveTag !== periodStart) {
      // The units' period has ended: they lapsed, and nothing goes back.
      return leaseResult(true, Math.max(0, limit - used), 0, reset, 0, periodStart, periodEnd - now);
    }
    if (refunding) {
      const before = used;
      if (used > 0) {
        used = Math.max(0, used - refund);
        stored!.used = used;
      }
      // Refunded to zero usage, the budget is whole again: reset 0, as a peek would then say.
      if (giving) return leaseResult(true, Math.max(0, limit - used), 0, used === 0 ? 0 : reset, before - used, periodStart, periodEnd - now);
      return result(true, Math.max(0, limit - used), 0, used === 0 ? 0 : reset);
    }
    if (taking) return windowTake(cost, used, limit, periodStart, periodEnd, reset, now, (taken) => this.put<QuotaState>(key, { periodStart, used: taken }, periodEnd));
    if (used + cost > limit) {
      return result(false, Math.max(0, limit - used), periodEnd - now, periodEnd - now);
    }
    if (peeking) return result(true, Math.max(0, limit - used), 0, reset);
    this.put<QuotaState>(key, { periodStart, used: used + cost }, periodEnd);
    return result(true, Math.max(0, limit - (used + cost)), 0, periodEnd - now);
  }

  private slidingCounter(
    key: string, limit: number, windowMs: number, subWindows: number, op: AlgorithmOperation, units: number, now: number, giveTag: number,
  ): CounterResult {
    const { peeking, refunding, cost, taking, giving } = mode(op, units);
    let { refund } = mode(op, units);
    const bucketMs = windowMs / subWindows;
    const current = (now - (now % bucketMs)) / bucketMs;
    const elapsed = now - current * bucketMs;
    const buckets = this.get<SlidingCounterState>(key, now)?.buckets ?? new Map<number, number>();
    let full = 0;
    let oldest = 0;
    let newest = -1;
    for (const [index, count] of buckets) {
      if (index < current - subWindows) {
        // Stale: dropped from the stored state, except by a peek, which writes nothing (a later live
        // change of the window could bring the bucket back into it).
        if (!peeking) buckets.delete(index);
      } else {
        if (index === current - subWindows) oldest = count;
        else full = full + count;
        if (index > newest) newest = index;
      }
    }
    if (giving) {
      if (giveTag !== current) {
        // The units' sub-window has ended: they lapsed, and nothing goes back.
        const reset = newest >= 0 ? (newest + subWindows + 1) * bucketMs - now : 0;
        const remaining = Math.max(0, Math.floor(limit - (full + (oldest * (bucketMs - elapsed)) / bucketMs)));
        return leaseResult(true, remaining, 0, reset, 0, current, bucketMs - elapsed);
      }
      // They go back to the sub-window they were taken in, and to no other.
      refund = Math.min(refund, buckets.get(current) ?? 0);
    }
    if (refunding) {
      // Units go back from the newest bucket first; an emptied bucket is removed.
      let left = refund;
      for (const index of [...buckets.keys()].sort((a, b) => b - a)) {
        if (left <= 0) break;
        const taken = Math.min(buckets.get(index)!, left);
        left = left - taken;
        if (buckets.get(index)! - taken === 0) buckets.delete(index);
        else buckets.set(index, buckets.get(index)! - taken);
      }
      full = 0;
      oldest = 0;
      newest = -1;
      for (const [index, count] of buckets) {
        if (index === current - subWindows) oldest = count;
        else full = full + count;
        if (index > newest) newest = index;
      }
      const reset = newest >= 0 ? (newest + subWindows + 1) * bucketMs - now : 0;
      const remaining = Math.max(0, Math.floor(limit - (full + (oldest * (bucketMs - elapsed)) / bucketMs)));
      if (giving) return leaseResult(true, remaining, 0, reset, refund, current, bucketMs - elapsed);
      return result(true, remaining, 0, reset);
    }
    const estimate = full + (oldest * (bucketMs - elapsed)) / bucketMs;
    // A take is granted what fits now; the rest is refused as a consume of `cost` would be, and a take
    // granted all of it answers the retry_after of one more unit (0 while one more fits).
    const granted = taking ? Math.max(0, Math.min(cost, Math.floor(limit - estimate))) : cost;
    const retryFor = taking && granted === cost ? cost + 1 : cost;
    let retry = 0;
    if (estimate + retryFor > limit) {
      retry = bucketMs - elapsed;
      if (full + retryFor <= limit && oldest > 0) {
        retry = Math.ceil(bucketMs - ((limit - retryFor - full) * bucketMs) / oldest) - elapsed;
        if (retry < 1) retry = 1;
      }
    }
    if (granted === 0 || (!taking && estimate + cost > limit)) {
      const reset = newest >= 0 ? (newest + subWindows + 1) * bucketMs - now : 0;
      if (taking) return leaseResult(false, Math.max(0, Math.floor(limit - estimate)), retry, reset, 0, current, bucketMs - elapsed);
      return result(false, Math.max(0, Math.floor(limit - estimate)), retry, reset);
    }
    if (peeking) {
      const reset = newest >= 0 ? (newest + subWindows + 1) * bucketMs - now : 0;
      return result(true, Math.max(0, Math.floor(limit - estimate)), 0, reset);
    }
    buckets.set(current, (buckets.get(current) ?? 0) + granted);
    const resetAt = (current + subWindows + 1) * bucketMs;
    this.put<SlidingCounterState>(key, { buckets }, resetAt);
    if (taking) {
      return leaseResult(true, Math.max(0, Math.floor(limit - (estimate + granted))), retry, resetAt - now, granted, current, bucketMs - elapsed);
    }
    return result(true, Math.max(0, Math.floor(limit - (estimate + cost))), 0, resetAt - now);
  }

  private slidingLog(key: string, limit: number, windowMs: number, op: AlgorithmOperation, units: number, now: number): CounterResult {
    const { peeking, refunding, cost, refund } = mode(op, units);
    const stored = this.get<SlidingLogState>(key, now);
    if (stored === undefined && peeking) return result(true, Math.max(0, limit), 0, 0);
    const log = stored ?? { entries: [], sum: 0 };
    // Entries are sorted by time; an entry leaves the window when now - windowMs reaches it. A peek
    // only skips them (it writes nothing): `first` is then the oldest entry still in the window.
    let expired = 0;
    let sum = log.sum;
    while (expired < log.entries.length && log.entries[expired].ts <= now - windowMs) {
      sum = sum - log.entries[expired].cost;
      expired++;
    }
    if (peeking) {
      if (sum + cost > limit) return slidingLogRefusal(log.entries, expired, sum, cost, limit, windowMs, now);
      const reset = log.entries.length > expired ? log.entries[log.entries.length - 1].ts + windowMs - now : 0;
      return result(true, Math.max(0, limit - sum), 0, reset);
    }
    log.sum = sum;
    if (expired > 0) log.entries.splice(0, expired);
    if (refunding) {
      // Units go back from the newest entries (the ones this context added last), whole entries first.
      let left = refund;
      while (left > 0 && log.entries.length > 0) {
        const newestEntry = log.entries[log.entries.length - 1];
        if (newestEntry.cost > left) {
          newestEntry.cost = newestEntry.cost - left;
          log.sum = log.sum - left;
          left = 0;
        } else {
          log.entries.pop();
          log.sum = log.sum - newestEntry.cost;
          left = left - newestEntry.cost;
        }
      }
      if (log.entries.length === 0) {
        this.slots.delete(key); // a sliding-log key: never a fixed_window slot
        return result(true, Math.max(0, limit), 0, 0);
      }
      const expireAt = log.entries[log.entries.length - 1].ts + windowMs;
      this.put<SlidingLogState>(key, log, expireAt);
      return result(true, Math.max(0, limit - log.sum), 0, expireAt - now);
    }
    if (log.sum + cost > limit) return slidingLogRefusal(log.entries, 0, log.sum, cost, limit, windowMs, now);
    insertSorted(log.entries, { ts: now, cost });
    log.sum = log.sum + cost;
    const newest = log.entries[log.entries.length - 1].ts;
    this.put<SlidingLogState>(key, log, newest + windowMs);
    return result(true, Math.max(0, limit - log.sum), 0, newest + windowMs - now);
  }

  private tokenBucket(
    key: string, capacity: number, rateUnits: number, ratePeriodMs: number, op: AlgorithmOperation, units: number, now: number, giveTag: number,
  ): CounterResult {
    const { peeking, refunding, cost, refund, taking, giving } = mode(op, units);
    // amount = tokens in the bucket; settledAt = when it is full again.
    const stored = this.get<BucketState>(key, now);
    let tokens = capacity;
    let fullAt = now;
    if (stored && now < stored.settledAt) {
      tokens = Math.min(capacity, stored.amount + (Math.max(0, now - stored.updatedAt) * rateUnits) / ratePeriodMs);
      fullAt = stored.settledAt;
    }
    // A return that arrives after the instant it had to be back by: the units lapsed, and nothing goes back.
    if (giving && now >= giveTag) return leaseResult(true, Math.floor(tokens), 0, fullAt - now, 0, 0, 0);
    if (refunding) {
      // What went back (a return answers it): never above capacity, so a full bucket takes nothing back.
      const room = capacity - tokens;
      tokens = Math.min(capacity, tokens + refund);
      const settledAt = now + Math.ceil(((capacity - tokens) * ratePeriodMs) / rateUnits);
      if (stored) this.put<BucketState>(key, { amount: tokens, updatedAt: now, settledAt }, settledAt);
      if (giving) return leaseResult(true, Math.floor(tokens), 0, settledAt - now, Math.floor(Math.min(refund, room)), 0, 0);
      return result(true, Math.floor(tokens), 0, settledAt - now);
    }
    if (taking) {
      const granted = Math.max(0, Math.min(cost, Math.floor(tokens)));
      // The retry_after of the rest, or, all of it granted, of one more unit.
      const retryFor = granted < cost ? cost : cost + 1;
      const retry = tokens < retryFor ? Math.ceil(((retryFor - tokens) * ratePeriodMs) / rateUnits) : 0;
      if (granted > 0) {
        tokens = tokens - granted;
        fullAt = now + Math.ceil(((capacity - tokens) * ratePeriodMs) / rateUnits);
        this.put<BucketState>(key, { amount: tokens, updatedAt: now, settledAt: fullAt }, fullAt);
      }
      return leaseResult(granted > 0, Math.floor(tokens), retry, fullAt - now, granted, now, 0);
    }
    if (peeking && tokens >= cost) return result(true, Math.floor(tokens), 0, fullAt - now);
    if (tokens >= cost) {
      tokens = tokens - cost;
      const settledAt = now + Math.ceil(((capacity - tokens) * ratePeriodMs) / rateUnits);
      this.put<BucketState>(key, { amount: tokens, updatedAt: now, settledAt }, settledAt);
      return result(true, Math.floor(tokens), 0, settledAt - now);
    }
    const retry = Math.ceil(((cost - tokens) * ratePeriodMs) / rateUnits);
    return result(false, Math.floor(tokens), retry, fullAt - now);
  }

  private leakyBucket(
    key: string, capacity: number, rateUnits: number, ratePeriodMs: number, op: AlgorithmOperation, units: number, now: number, giveTag: number,
  ): CounterResult {
    const { peeking, refunding, cost, refund, taking, giving } = mode(op, units);
    // amount = level of the bucket; settledAt = when it has drained empty.
    const stored = this.get<BucketState>(key, now);
    let level = 0;
    let emptyAt = now;
    if (stored && now < stored.settledAt) {
      level = Math.max(0, stored.amount - (Math.max(0, now - stored.updatedAt) * rateUnits) / ratePeriodMs);
      emptyAt = stored.settledAt;
    }
    // A return that arrives after the instant it had to be back by: the units lapsed, and nothing goes back.
    if (giving && now >= giveTag) return leaseResult(true, Math.max(0, Math.floor(capacity - level)), 0, emptyAt - now, 0, 0, 0);
    if (refunding) {
      // What went back (a return answers it): never below empty, so an empty bucket takes nothing back.
      const room = level;
      level = Math.max(0, level - refund);
      const settledAt = now + Math.ceil((level * ratePeriodMs) / rateUnits);
      if (stored) this.put<BucketState>(key, { amount: level, updatedAt: now, settledAt }, settledAt);
      if (giving) return leaseResult(true, Math.max(0, Math.floor(capacity - level)), 0, settledAt - now, Math.floor(Math.min(refund, room)), 0, 0);
      return result(true, Math.max(0, Math.floor(capacity - level)), 0, settledAt - now);
    }
    if (taking) {
      const granted = Math.max(0, Math.min(cost, Math.floor(capacity - level)));
      // The retry_after of the rest, or, all of it granted, of one more unit.
      const retryFor = granted < cost ? cost : cost + 1;
      const retry = level + retryFor > capacity ? Math.ceil(((level + retryFor - capacity) * ratePeriodMs) / rateUnits) : 0;
      if (granted > 0) {
        level = level + granted;
        emptyAt = now + Math.ceil((level * ratePeriodMs) / rateUnits);
        this.put<BucketState>(key, { amount: level, updatedAt: now, settledAt: emptyAt }, emptyAt);
      }
      return leaseResult(granted > 0, Math.max(0, Math.floor(capacity - level)), retry, emptyAt - now, granted, now, 0);
    }
    if (peeking && level + cost <= capacity) return result(true, Math.max(0, Math.floor(capacity - level)), 0, emptyAt - now);
    if (level + cost <= capacity) {
      level = level + cost;
      const settledAt = now + Math.ceil((level * ratePeriodMs) / rateUnits);
      this.put<BucketState>(key, { amount: level, updatedAt: now, settledAt }, settledAt);
      return result(true, Math.max(0, Math.floor(capacity - level)), 0, settledAt - now);
    }
    const retry = Math.ceil(((level + cost - capacity) * ratePeriodMs) / rateUnits);
    return result(false, Math.max(0, Math.floor(capacity - level)), retry, emptyAt - now);
  }

  // --- key space: a Map with per-key expiry, like Redis PEXPIREAT ---

  private get<T>(key: string, now: number): T | undefined {
    return this.live<StateSlot<T>>(key, now)?.state;
  }

  /** The key's slot unless it is absent or expired (an expired one is deleted, as Redis would). */
  private live<S extends Slot>(key: string, now: number): S | undefined {
    const slot = this.slots.get(key) as S | undefined;
    if (!slot) return undefined;
    if (slot.expireAt <= now) {
      this.drop(key, slot);
      return undefined;
    }
    return slot;
  }

  /** Deletes a key, marking its slot so a key array that still carries it (see SlotCarrier) lets it go. */
  private drop(key: string, slot: Slot): void {
    markDropped(slot);
    this.slots.delete(key);
  }

  private put<T>(key: string, state: T, expireAt: number): void {
    const slot = this.slots.get(key) as StateSlot<T> | undefined;
    if (slot) {
      slot.state = state;
      slot.expireAt = expireAt;
    } else {
      const created: StateSlot<T> = { expireAt, state };
      this.slots.set(key, created);
    }
  }

  private liveLeases(key: string, now: number): Map<string, number> {
    const leases = this.get<LeaseState>(key, now)?.leases ?? new Map<string, number>();
    for (const [id, expiresAt] of leases) if (expiresAt <= now) leases.delete(id);
    return leases;
  }
}

/**
 * The refusal of `cost` by a sliding log whose entries from `first` on are in the window and sum to
 * `sum`: wait until enough of the oldest entries have left the window for the cost to fit.
 */
function slidingLogRefusal(
  entries: { ts: number; cost: number }[], first: number, sum: number, cost: number, limit: number, windowMs: number, now: number,
): CounterResult {
  const inWindow = entries.length > first;
  const newestTs = inWindow ? entries[entries.length - 1].ts : now;
  const reset = inWindow ? newestTs + windowMs - now : 0;
  let retry = newestTs + windowMs - now;
  let freed = 0;
  for (let i = first; i < entries.length; i++) {
    freed = freed + entries[i].cost;
    if (sum - freed + cost <= limit) {
      retry = entries[i].ts + windowMs - now;
      break;
    }
  }
  return result(false, Math.max(0, limit - sum), retry, reset);
}

/** What the operation asks of how many units, as lua/includes/mode.lua reads it (a peek: a consume of 1, writing nothing). */
function mode(op: AlgorithmOperation, units: number): { peeking: boolean; refunding: boolean; cost: number; refund: number; taking: boolean; giving: boolean } {
  const giving = op === 'give';
  const refunding = giving || op === 'refund';
  return { peeking: op === 'peek', refunding, cost: op === 'peek' ? 1 : units, refund: refunding ? units : 0, taking: op === 'take', giving };
}

function result(allowed: boolean, remaining: number, retryAfterMs: number, resetAfterMs: number): CounterResult {
  return { allowed, remaining, retryAfterMs, resetAfterMs };
}

/** A lease operation's answer as the algorithm gives it; finishLeaseOp (named-takes.ts) completes the rest. */
function leaseResult(
  allowed: boolean, remaining: number, retryAfterMs: number, resetAfterMs: number, units: number, windowTag: number, windowLeftMs: number,
): LeaseCounterResult {
  return { allowed, remaining, retryAfterMs, resetAfterMs, units, windowTag, windowLeftMs, storeNow: 0, outcome: 'done', lapsed: 0 };
}

/**
 * The partial take of fixed_window and quota (lua/includes/window_count.lua): min(cost, what is left),
 * possibly nothing, refused (or, all taken, the next unit) until the window ends; `write(used)` stores
 * the new count when something was taken.
 */
function windowTake(
  cost: number, used: number, limit: number, windowStart: number, windowEnd: number, reset: number, now: number, write: (used: number) => void,
): LeaseCounterResult {
  const granted = Math.max(0, Math.min(cost, limit - used));
  const retry = granted < cost || used + granted >= limit ? windowEnd - now : 0;
  if (granted > 0) {
    used = used + granted;
    write(used);
    reset = windowEnd - now;
  }
  return leaseResult(granted > 0, Math.max(0, limit - used), retry, reset, granted, windowStart, windowEnd - now);
}

function maxValue(map: Map<string, number>): number {
  let max = -Infinity;
  for (const v of map.values()) if (v > max) max = v;
  return max;
}

function minValue(map: Map<string, number>): number {
  let min = Infinity;
  for (const v of map.values()) if (v < min) min = v;
  return min;
}

/** Inserts after every entry with the same or an earlier time (time order; arrival order on ties). */
function insertSorted(entries: { ts: number; cost: number }[], entry: { ts: number; cost: number }): void {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (entries[mid].ts <= entry.ts) lo = mid + 1;
    else hi = mid;
  }
  entries.splice(lo, 0, entry);
}
