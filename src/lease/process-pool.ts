import type { Grant, LocalMs } from './types.js';

/** Units of one grant still unspent. */
interface Batch {
  units: number;
  /** Units the parent granted into this batch: refunds never make it hold more (usage never below zero). */
  granted: number;
  windowTag: number;
  spendBy: LocalMs;
}

/** A holder's unspent units: spent oldest deadline first; usually one batch, two while a refill lands. */
export class ProcessUnitPool {
  private batches: Batch[] = [];

  /** `bucket`: the tags are back-by instants, one per take: a refund joins any batch, and all go back by the earliest. */
  constructor(private readonly bucket = false) {}

  /** All of `cost` or none; `lapsed`: held units whose spend-by had come, dropped now. */
  spend(cost: number, now: LocalMs): { spent: boolean; left: number; lapsed: number } {
    const lapsed = this.dropLapsed(now);
    const held = unitsOf(this.batches);
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

  /** `accepted`: the units that joined; `lapsed`: held units whose spend-by had come, dropped now. */
  refund(units: number, now: LocalMs): { accepted: number; lapsed: number } {
    const lapsed = this.dropLapsed(now);
    // Into the newest window's units (a bucket's: any), never above what a batch was granted: what does not fit lapsed.
    const tag = this.batches[this.batches.length - 1]?.windowTag;
    let left = units;
    for (let i = this.batches.length - 1; i >= 0 && left > 0; i--) {
      const batch = this.batches[i];
      if (!this.bucket && batch.windowTag !== tag) continue;
      const back = Math.min(left, batch.granted - batch.units);
      batch.units += back;
      left -= back;
    }
    return { accepted: units - left, lapsed };
  }

  available(now: LocalMs): number {
    return unitsOf(this.batches.filter((b) => b.spendBy > now));
  }

  /** Takes out the unspent units to give back, all under `windowTag` (a bucket's: the earliest). */
  drain(now: LocalMs): { units: number; windowTag: number | null; lapsed: number } {
    let lapsed = this.dropLapsed(now);
    const newest = this.batches[this.batches.length - 1];
    if (newest === undefined) return { units: 0, windowTag: null, lapsed };
    // A bucket's all go back, by the earliest tag; an older window's cannot (the parent has moved on).
    const back = this.bucket ? this.batches : this.batches.filter((b) => b.windowTag === newest.windowTag);
    const units = unitsOf(back);
    lapsed += unitsOf(this.batches) - units;
    const windowTag = this.bucket ? Math.min(...back.map((b) => b.windowTag)) : newest.windowTag;
    this.batches = [];
    return { units, windowTag, lapsed };
  }

  /** Drops the batches whose spendBy has come; answers how many units lapsed with them. */
  private dropLapsed(now: LocalMs): number {
    if (this.batches.length === 0 || this.batches[0].spendBy > now) return 0;
    // The batches are sorted by spendBy: the lapsed ones come first.
    const live = this.batches.findIndex((b) => b.spendBy > now);
    return unitsOf(this.batches.splice(0, live < 0 ? this.batches.length : live));
  }
}

function unitsOf(batches: Batch[]): number {
  let units = 0;
  for (const batch of batches) units += batch.units;
  return units;
}
