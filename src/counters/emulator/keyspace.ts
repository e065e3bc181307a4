/**
 * The emulator's key space: a Map with per-key expiry, like Redis PEXPIREAT, and the sweeper that
 * reclaims expired keys. Every algorithm treats state whose time has passed exactly like absent state,
 * so when a key expires (here by the sweeper, in Redis by PEXPIRE) nothing observable changes: expiry
 * only reclaims memory.
 */

/** What the Map holds per key: at least its expiry (epoch ms), which the sweeper reads. */
export interface Slot {
  expireAt: number;
}

/** Every algorithm but fixed_window: its state object beside the expiry. */
export interface StateSlot<T> extends Slot {
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
export class FixedWindowSlot implements Slot {
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
export type SlotCarrier<S extends Slot = FixedWindowSlot> = string[] & { [SLOT_TAG_TYPE]?: S };

/** A deleted slot reads as expired from then on: a fixed_window slot's expiry is derived from its window number. */
function markDropped(slot: Slot): void {
  if (slot instanceof FixedWindowSlot) slot.windowNumber = -1;
  else slot.expireAt = 0;
}

export interface MemoryKeyspaceOptions {
  /** Clock in epoch milliseconds; tests inject their own. */
  now?: () => number;
  /** How often the sweeper runs; 0 disables it (tests that sweep by hand). */
  sweepIntervalMs?: number;
  /** How many keys one sweep looks at, at most. */
  sweepBatch?: number;
  /** How long one timer-driven sweep may run, so it never stalls decisions for long (ms). */
  sweepBudgetMs?: number;
}

export class MemoryKeyspace {
  /** Every key's slot. The algorithms set and delete directly the slots whose kind they know (see `drop`). */
  readonly slots = new Map<string, Slot>();
  readonly now: () => number;
  private readonly sweepBatch: number;
  private readonly sweepBudgetMs: number;
  private sweepCursor: Iterator<[string, Slot]> | undefined;
  private readonly sweepTimer: NodeJS.Timeout | undefined;
  /** This key space's property on the key arrays it is handed (SlotCarrier): two stores never read each other's. */
  readonly slotTag: typeof SLOT_TAG_TYPE = Symbol('fixedWindowSlot') as typeof SLOT_TAG_TYPE;

  constructor(options: MemoryKeyspaceOptions = {}) {
    this.now = options.now ?? Date.now;
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

  /** Empties the key space and stops the sweeper. */
  clear(): void {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    for (const slot of this.slots.values()) markDropped(slot);
    this.slots.clear();
  }

  get<T>(key: string, now: number): T | undefined {
    return this.live<StateSlot<T>>(key, now)?.state;
  }

  /** The key's slot unless it is absent or expired (an expired one is deleted, as Redis would). */
  live<S extends Slot>(key: string, now: number): S | undefined {
    const slot = this.slots.get(key) as S | undefined;
    if (!slot) return undefined;
    if (slot.expireAt <= now) {
      this.drop(key, slot);
      return undefined;
    }
    return slot;
  }

  /** Deletes a key, marking its slot so a key array that still carries it (see SlotCarrier) lets it go. */
  drop(key: string, slot: Slot): void {
    markDropped(slot);
    this.slots.delete(key);
  }

  put<T>(key: string, state: T, expireAt: number): void {
    const slot = this.slots.get(key) as StateSlot<T> | undefined;
    if (slot) {
      slot.state = state;
      slot.expireAt = expireAt;
    } else {
      const created: StateSlot<T> = { expireAt, state };
      this.slots.set(key, created);
    }
  }
}
