import type { CompiledShares } from '../../../src/counters/counter-spec.js';
import type { LeaseCounterResult } from '../../../src/counters/counter-store.js';

/**
 * The shares of a global budget (budget_shares), checked where they are kept: on every answer of the
 * global counter to a region, all regions together hold at most the limit, the units past the
 * guarantees are at most the common share, and a take asking no more than what is left of its region's
 * guarantee gets all of it, whatever the other regions took first.
 */
export class ShareCheck {
  readonly problems: string[] = [];
  /** Guaranteed takes seen (asked within the region's guarantee and answered in full). */
  guaranteedTakes = 0;
  /** What the last answer said each region held (a later window can only hold less). */
  private last: Record<string, number> = {};

  constructor(
    readonly shares: CompiledShares,
    private readonly limit: number,
  ) {}

  /** One answer of the global counter to `region`; a take's `asked` units. */
  answered(region: string | undefined, answer: LeaseCounterResult, asked?: number): void {
    const taken = answer.shareTaken;
    if (region === undefined || taken === undefined) {
      this.problems.push(`an operation without its region's share (${region}): ${JSON.stringify(answer)}`);
      return;
    }
    const total = Object.values(taken).reduce((a, b) => a + b, 0);
    if (total > this.limit) this.problems.push(`regions hold ${total} of a limit of ${this.limit}: ${JSON.stringify(taken)}`);
    let fromCommon = 0;
    for (const [name, units] of Object.entries(taken)) fromCommon += Math.max(0, units - this.guaranteeOf(name));
    if (fromCommon > this.shares.common) this.problems.push(`${fromCommon} units past the guarantees, of a common share of ${this.shares.common}: ${JSON.stringify(taken)}`);
    if (asked !== undefined && answer.outcome === 'done' && asked <= this.guaranteeOf(region) - (this.last[region] ?? 0)) {
      if (answer.units !== asked) this.problems.push(`${region} asked ${asked} within its guarantee and got ${answer.units}: ${JSON.stringify(this.last)}`);
      else this.guaranteedTakes++;
    }
    this.last = taken;
  }

  guaranteeOf(region: string): number {
    return Object.prototype.hasOwnProperty.call(this.shares.guaranteed, region) ? this.shares.guaranteed[region] : 0;
  }
}

/** A unit of use: admitted (`units` > 0) or refunded (< 0), by a region, in happening order. */
export interface RegionUse {
  t: number;
  seq: number;
  units: number;
  region: number;
}

/**
 * What each region admitted in each window (`windowOf`: the window an instant lies in), less what it
 * took back by refunds (never below zero, as the counter counts): at most its guarantee plus the
 * common share. Answers the windows and regions over it.
 */
export function overShare(uses: RegionUse[], windowOf: (t: number) => number | undefined, bound: (region: number) => number): string[] {
  const used = new Map<string, number>();
  for (const u of [...uses].sort((a, b) => a.t - b.t || a.seq - b.seq)) {
    const w = windowOf(u.t);
    if (w === undefined) continue;
    const key = `${w} ${u.region}`;
    used.set(key, Math.max(0, (used.get(key) ?? 0) + u.units));
  }
  const over: string[] = [];
  for (const [key, units] of used) {
    const region = Number(key.split(' ')[1]);
    if (units > bound(region)) over.push(`window ${key.split(' ')[0]}, region ${region}: ${units} admitted, more than ${bound(region)}`);
  }
  return over;
}

/**
 * The same over a sliding window of `subWindows` sub-windows of `bucketMs`: at each of a region's
 * admissions, the sliding estimate of what it admitted (the counter's: the sub-windows inside the
 * window whole, the one sliding out in proportion) is at most its guarantee plus the common share. A
 * refund takes back from the region's newest live sub-window first, none below zero, as the counter does.
 */
export function overSlidingShare(uses: RegionUse[], bucketMs: number, subWindows: number, bound: (region: number) => number): string[] {
  const perRegion = new Map<number, Map<number, number>>();
  const over: string[] = [];
  for (const u of [...uses].sort((a, b) => a.t - b.t || a.seq - b.seq)) {
    let buckets = perRegion.get(u.region);
    if (buckets === undefined) perRegion.set(u.region, (buckets = new Map()));
    const current = Math.floor(u.t / bucketMs);
    if (u.units < 0) {
      let left = -u.units;
      for (let b = current; b >= current - subWindows && left > 0; b--) {
        const back = Math.min(buckets.get(b) ?? 0, left);
        buckets.set(b, (buckets.get(b) ?? 0) - back);
        left -= back;
      }
      continue;
    }
    buckets.set(current, (buckets.get(current) ?? 0) + u.units);
    let estimate = 0;
    for (let b = current - subWindows + 1; b <= current; b++) estimate += buckets.get(b) ?? 0;
    estimate += ((buckets.get(current - subWindows) ?? 0) * (bucketMs - (u.t - current * bucketMs))) / bucketMs;
    if (estimate > bound(u.region) + 1e-9) over.push(`at ${u.t}, region ${u.region}: a sliding estimate of ${estimate}, more than ${bound(u.region)}`);
  }
  return over;
}
