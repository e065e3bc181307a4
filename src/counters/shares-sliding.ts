import type { LeaseCounterResult } from './counter-store.js';
import type { RateSpec } from './counter-spec.js';
import { boundByRoom, type NamedShare, type ShareSlot } from './shares.js';

/**
 * Weighted regional shares over a sliding window (sliding_window_counter) in the emulator: the port of
 * lua/includes/shares_sliding.lua (its rules are written there); change both together. Each region's
 * use is estimated per sub-window as the counter estimates its total, scaled by the sub-window's length.
 */

/** One sub-window's units: taken from the common share by every region, and per region. */
interface ShareBucket {
  common: number;
  regions: Map<string, { own: number; fromCommon: number }>;
}

/** A sliding window's share ledger: its sub-windows by index. */
export interface SlidingShareLedger {
  buckets: Map<number, ShareBucket>;
}

/** Where the window stands now: the current sub-window's index, the count, their length, and ms into it. */
export interface SlideAt {
  current: number;
  subWindows: number;
  bucketMs: number;
  elapsed: number;
}

/** The window of a sliding_window_counter at `now`, as lua/sliding_window_counter.lua cuts it. */
export function slideAt(spec: Extract<RateSpec, { type: 'sliding_window_counter' }>, now: number): SlideAt {
  const bucketMs = spec.windowMs / spec.subWindows;
  const current = (now - (now % bucketMs)) / bucketMs;
  return { current, subWindows: spec.subWindows, bucketMs, elapsed: now - current * bucketMs };
}

/** slide_place: a sub-window inside the window ('full'), sliding out of it ('oldest'), or gone. */
function placeOf(at: SlideAt, index: number): 'full' | 'oldest' | undefined {
  if (index < at.current - at.subWindows) return undefined;
  return index === at.current - at.subWindows ? 'oldest' : 'full';
}

/** slide_scaled: an estimate scaled by the sub-window's length. */
function scaled(at: SlideAt, use: { full: number; oldest: number }): number {
  return use.full * at.bucketMs + use.oldest * (at.bucketMs - at.elapsed);
}

/** slide_room: what the region may take now of its guarantee and of the common share. */
function rooms(slot: ShareSlot<SlidingShareLedger>, share: NamedShare, at: SlideAt): { own: number; common: number } {
  const own = { full: 0, oldest: 0 };
  const common = { full: 0, oldest: 0 };
  for (const [index, bucket] of slot.read()?.buckets ?? []) {
    const place = placeOf(at, index);
    if (place === undefined) continue;
    common[place] += bucket.common;
    own[place] += bucket.regions.get(share.region)?.own ?? 0;
  }
  const b = at.bucketMs;
  return {
    own: Math.max(0, Math.floor((share.guaranteed * b - scaled(at, own)) / b)),
    common: Math.max(0, Math.floor((share.common * b - scaled(at, common)) / b)),
  };
}

/** slide_cap's room: what the region may take now. */
export function slidingShareRoom(slot: ShareSlot<SlidingShareLedger>, share: NamedShare, at: SlideAt): number {
  const { own, common } = rooms(slot, share, at);
  return own + common;
}

/** slide_count: `units` taken (a give: `-units`) by the region in the current sub-window. */
function count(slot: ShareSlot<SlidingShareLedger>, share: NamedShare, at: SlideAt, units: number): void {
  if (units === 0) return;
  const ownRoom = rooms(slot, share, at).own;
  const ledger = slot.read() ?? { buckets: new Map<number, ShareBucket>() };
  for (const index of [...ledger.buckets.keys()]) if (placeOf(at, index) === undefined) ledger.buckets.delete(index);
  let bucket = ledger.buckets.get(at.current);
  if (bucket === undefined) ledger.buckets.set(at.current, (bucket = { common: 0, regions: new Map() }));
  let g = bucket.regions.get(share.region)?.own ?? 0;
  let o = bucket.regions.get(share.region)?.fromCommon ?? 0;
  if (units > 0) {
    const own = Math.min(units, ownRoom);
    g = g + own;
    o = o + (units - own);
    bucket.common = bucket.common + (units - own);
  } else {
    const back = -units;
    const common = Math.min(back, o);
    o = o - common;
    bucket.common = bucket.common - common;
    g = Math.max(0, g - (back - common));
  }
  bucket.regions.set(share.region, { own: g, fromCommon: o });
  slot.write(ledger, (at.current + at.subWindows + 1) * at.bucketMs);
}

/** slide_report: every region's use of the window, by name: its guaranteed use rounded up, its common use down. */
function report(slot: ShareSlot<SlidingShareLedger>, at: SlideAt): Record<string, number> {
  const use = new Map<string, { g: { full: number; oldest: number }; o: { full: number; oldest: number } }>();
  for (const [index, bucket] of slot.read()?.buckets ?? []) {
    const place = placeOf(at, index);
    if (place === undefined) continue;
    for (const [name, units] of bucket.regions) {
      let mine = use.get(name);
      if (mine === undefined) use.set(name, (mine = { g: { full: 0, oldest: 0 }, o: { full: 0, oldest: 0 } }));
      mine.g[place] += units.own;
      mine.o[place] += units.fromCommon;
    }
  }
  const taken: Record<string, number> = {};
  for (const name of [...use.keys()].sort()) {
    const { g, o } = use.get(name)!;
    taken[name] = Math.ceil(scaled(at, g) / at.bucketMs) + Math.floor(scaled(at, o) / at.bucketMs);
  }
  return taken;
}

/** A sliding window's share ledger, and where the operation's clock is in the window. */
export interface SlidingShares {
  at: SlideAt;
  slot: ShareSlot<SlidingShareLedger>;
}

/** share_answer over a sliding window: the operation's units counted, a take bounded by its room, the window reported. */
export function slidingShareAnswer(sliding: SlidingShares, share: NamedShare, answer: LeaseCounterResult, op: 'take' | 'give', room: number): void {
  const { at, slot } = sliding;
  const done = answer.outcome === 'done';
  if (done && op === 'take') {
    count(slot, share, at, answer.units);
    boundByRoom(answer, room);
  } else if (done && op === 'give') {
    count(slot, share, at, -answer.units);
  }
  answer.shareTaken = report(slot, at);
}
