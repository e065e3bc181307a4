/** The chunk rule (docs/distribution.md "How it works", chunk rule): near the limit a chunk shrinks to the waiting cost, so answers converge to exact. */

/** Units spent over the last `spanMs`, in SLOTS time slots (cheap per decision: one add, no allocation). */
export class SpendRate {
  private static readonly SLOTS = 8;
  private readonly slotMs: number;
  private readonly counts = new Array<number>(SpendRate.SLOTS).fill(0);
  /** Slot number (time / slotMs) of the newest slot written. */
  private newest = -Infinity;

  constructor(spanMs: number) {
    this.slotMs = Math.max(1, spanMs / SpendRate.SLOTS);
  }

  add(units: number, now: number): void {
    this.roll(now);
    this.counts[this.newest % SpendRate.SLOTS] += units;
  }

  /** Units spent in the span ending at `now`. */
  total(now: number): number {
    this.roll(now);
    return this.counts.reduce((sum, c) => sum + c, 0);
  }

  private roll(now: number): void {
    const slot = Math.floor(now / this.slotMs);
    if (slot <= this.newest) return;
    const stale = Math.min(SpendRate.SLOTS, slot - this.newest);
    for (let i = 0; i < stale; i++) this.counts[(slot - i) % SpendRate.SLOTS] = 0;
    this.newest = slot;
  }
}

export interface ChunkInputs {
  /** Units spent over the last max_hold. */
  recent: number;
  /** The costs of the decisions waiting for units (0 for a refill ahead). */
  waiting: number;
  maxUnits: number;
  /** What the parent could still admit at its last answer (Infinity before the first). */
  parentRemaining: number;
}

/** About what was spent lately, at most max_units and half of what the parent has left, at least what waits; 0: no refill ahead. */
export function chunkSize({ recent, waiting, maxUnits, parentRemaining }: ChunkInputs): number {
  const wanted = Math.min(Math.max(recent, 1), maxUnits, Math.floor(parentRemaining / 2));
  return Math.max(wanted, waiting);
}
