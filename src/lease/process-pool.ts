import type { Grant, LocalMs } from './types.js';

/** Units of one grant still unspent. */
interface Batch {
  units: number;
  windowTag: number;
  spendBy: LocalMs;
}

/** A holder's unspent units: spent oldest deadline first; usually one batch, two while a refill lands. */
export class ProcessUnitPool {
  private batches: Batch[] = [];
  /**
   * Units spent from the newest window's batches (a bucket's: from any) and not refunded: what refunds may
   * bring back (usage never below zero). Kept for the window, not per batch: a batch emptied and dropped while
   * a refill of its window landed still had its units spent in that window.
   */
  private refundable = { key: NaN, units: 0 };

  /** `bucket`: the tags are back-by instants, one per take: a refund joins any batch, and all go back by the earliest. */
  constructor(private readonly bucket = false) {}

  /** All of `cost` or none; `lapsed`: held units whose spend-by had come, dropped now. */
  spend(cost: number, now: LocalMs): { spent: boolean; left: number; lapsed: number } {
    const lapsed = this.dropLapsed(now);
    const held = unitsOf(this.batches);
    if (held < cost) return { spent: false, left: held, lapsed };
    let due = cost;
    const newest = this.batches[this.batches.length - 1];
    for (const batch of this.batches) {
      const taken = Math.min(batch.units, due);
      batch.units -= taken;
      due -= taken;
      this.spent(batch.windowTag, newest.windowTag, taken);
      if (due === 0) break;
    }
    // The newest batch stays even when empty: a refund has a batch to join.
    if (this.batches[0].units === 0) this.batches = this.batches.filter((b) => b.units > 0 || b === newest);
    return { spent: true, left: held - cost, lapsed };
  }

  add(grant: Grant, now: LocalMs): void {
    if (grant.granted <= 0 || grant.spendBy <= now) return;
    const same = this.batches.find((b) => b.windowTag === grant.windowTag && b.spendBy === grant.spendBy);
    if (same) same.units += grant.granted;
    else {
      this.batches.push({ units: grant.granted, windowTag: grant.windowTag, spendBy: grant.spendBy });
      this.batches.sort((a, b) => a.spendBy - b.spendBy);
    }
  }

  /** `accepted`: the units that joined; `lapsed`: held units whose spend-by had come, dropped now. */
  refund(units: number, now: LocalMs): { accepted: number; lapsed: number } {
    const lapsed = this.dropLapsed(now);
    // Into the newest batch, never more than its window had spent (a bucket's: the holder): what does not fit lapses.
    const newest = this.batches[this.batches.length - 1];
    if (newest === undefined || this.refundable.key !== this.refundKey(newest.windowTag)) return { accepted: 0, lapsed };
    const accepted = Math.min(units, this.refundable.units);
    newest.units += accepted;
    this.refundable.units -= accepted;
    return { accepted, lapsed };
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
    this.refundable = { key: NaN, units: 0 };
    return { units, windowTag, lapsed };
  }

  /** Drops the batches whose spendBy has come; answers how many units lapsed with them. */
  private dropLapsed(now: LocalMs): number {
    if (this.batches.length === 0 || this.batches[0].spendBy > now) return 0;
    // The batches are sorted by spendBy: the lapsed ones come first.
    const live = this.batches.findIndex((b) => b.spendBy > now);
    const lapsed = unitsOf(this.batches.splice(0, live < 0 ? this.batches.length : live));
    // None held: a later refund has nothing to join, and a later take starts afresh.
    if (this.batches.length === 0) this.refundable = { key: NaN, units: 0 };
    return lapsed;
  }

  /** `taken` units spent from a batch of `windowTag`: refundable while its window is the newest (a bucket's: always). */
  private spent(windowTag: number, newestTag: number, taken: number): void {
    const key = this.refundKey(windowTag);
    if (taken === 0 || key !== this.refundKey(newestTag)) return;
    if (this.refundable.key !== key) this.refundable = { key, units: 0 };
    this.refundable.units += taken;
  }

  /** A bucket's takes all refund alike (one key); a window's, by their window. */
  private refundKey(windowTag: number): number {
    return this.bucket ? 0 : windowTag;
  }
}

function unitsOf(batches: Batch[]): number {
  let units = 0;
  for (const batch of batches) units += batch.units;
  return units;
}
