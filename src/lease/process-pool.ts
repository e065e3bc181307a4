import type { DrainedUnits, Grant, LocalMs, Spend } from './types.js';

/** Units of one grant still unspent. */
interface Batch {
  units: number;
  /** Units the parent granted into this batch: refunds never make it hold more (usage never below zero). */
  granted: number;
  windowTag: number;
  spendBy: LocalMs;
}

/**
 * A holder's unspent units in this process's memory. Spent oldest deadline first; units whose spendBy
 * has come lapse. Usually one batch, two while a refill lands before the previous one is spent.
 */
export class ProcessUnitPool {
  private batches: Batch[] = [];

  /** `bucket`: the tags are back-by instants, one per take: a refund joins any batch, and all go back by the earliest. */
  constructor(private readonly bucket = false) {}

  spend(cost: number, now: LocalMs): Spend {
    const lapsed = this.dropLapsed(now);
    const held = this.held();
    if (held < cost) return { spent: false, left: held, lapsed };
    let due = cost;
    for (const batch of this.batches) {
      const taken = Math.min(batch.units, due);
      batch.units -= taken;
      due -= taken;
      if (due === 0) break;
    }
    // The newest batch stays even when empty: a refund of what was spent from it can still go back.
    const newest = this.batches[this.batches.length - 1];
    if (this.batches[0].units === 0) this.batches = this.batches.filter((b) => b.units > 0 || b === newest);
    return { spent: true, left: held - cost, lapsed };
  }

  add(grant: Grant, now: LocalMs): void {
    if (grant.granted <= 0 || grant.spendBy <= now) return;
    const same = this.batches.find((b) => b.windowTag === grant.windowTag && b.spendBy === grant.spendBy);
    if (same) {
      same.units += grant.granted;
      same.granted += grant.granted;
    } else {
      this.batches.push({ units: grant.granted, granted: grant.granted, windowTag: grant.windowTag, spendBy: grant.spendBy });
      this.batches.sort((a, b) => a.spendBy - b.spendBy);
    }
  }

  refund(units: number, now: LocalMs): number {
    this.dropLapsed(now);
    // Into the newest window's units (a bucket's: any), never above what was granted into a batch,
    // so no refund adds units the parent did not give. What does not fit has lapsed.
    const tag = this.batches[this.batches.length - 1]?.windowTag;
    let left = units;
    for (let i = this.batches.length - 1; i >= 0 && left > 0; i--) {
      const batch = this.batches[i];
      if (!this.bucket && batch.windowTag !== tag) continue;
      const back = Math.min(left, batch.granted - batch.units);
      batch.units += back;
      left -= back;
    }
    return units - left;
  }

  available(now: LocalMs): number {
    let held = 0;
    for (const batch of this.batches) if (batch.spendBy > now) held += batch.units;
    return held;
  }

  drain(now: LocalMs): DrainedUnits {
    let lapsed = this.dropLapsed(now);
    const newest = this.batches[this.batches.length - 1];
    if (newest === undefined) return { units: 0, windowTag: null, lapsed };
    let units = 0;
    let windowTag = newest.windowTag;
    for (const batch of this.batches) {
      // Units of an older window than the newest cannot go back to a parent that has moved on.
      if (this.bucket || batch.windowTag === newest.windowTag) units += batch.units;
      else lapsed += batch.units;
      if (this.bucket) windowTag = Math.min(windowTag, batch.windowTag);
    }
    this.batches = [];
    return { units, windowTag, lapsed };
  }

  private held(): number {
    let held = 0;
    for (const batch of this.batches) held += batch.units;
    return held;
  }

  /** Drops the batches whose spendBy has come; answers how many units lapsed with them. */
  private dropLapsed(now: LocalMs): number {
    if (this.batches.length === 0 || this.batches[0].spendBy > now) return 0;
    let lapsed = 0;
    for (const batch of this.batches) {
      if (batch.spendBy <= now) lapsed += batch.units;
    }
    this.batches = this.batches.filter((b) => b.spendBy > now);
    return lapsed;
  }
}
