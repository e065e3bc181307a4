import type { RateSpec, RegionShare } from './counter-spec.js';
import type { LeaseCounterResult } from './counter-store.js';

/**
 * Weighted regional shares in the emulator: the port of lua/includes/shares.lua (its rules are written
 * there); change both together. A region's take of a global budget with shares gets at most what is
 * left of its guarantee plus what is left of the common share; a give goes back to the common share
 * first. The share ledger counts one window, by its tag.
 */

/** A region's share as an operation carries it: the region, its guarantee, the common share. */
export interface NamedShare extends RegionShare {
  region: string;
}

/** The share ledger of one counter: the window it counts (`tag`), the common share's units, and each region's. */
export interface ShareLedger {
  tag: number;
  common: number;
  /** Per region: units of its guarantee (g) and of the common share (o). */
  regions: Map<string, { own: number; fromCommon: number }>;
}

/** Where the store keeps a counter's share ledger (a sliding window's: shares-sliding.ts): read (absent when expired) and write with its expiry. */
export interface ShareSlot<Ledger = ShareLedger> {
  read(): Ledger | undefined;
  write(ledger: Ledger, expireAt: number): void;
}

/** The algorithms whose takes shares bound (lua/includes/window_count.lua and lua/sliding_window_counter.lua call share_cap). */
const SHARED_TYPES: ReadonlySet<RateSpec['type']> = new Set(['fixed_window', 'quota', 'sliding_window_counter']);

/** `region`'s share of `spec`'s global budget, for a lease operation; undefined without shares, a region, or a window algorithm. */
export function regionShareOf(spec: RateSpec, region: string | undefined): NamedShare | undefined {
  return SHARED_TYPES.has(spec.type) ? shareOf(spec, region) : undefined;
}

/**
 * `region`'s share of a sliding log's global budget, for its consume, peek and refund (it leases
 * nothing: lua/includes/shares_log.lua); undefined for any other algorithm, or without shares or a region.
 */
export function logShareOf(spec: RateSpec, region: string | undefined): NamedShare | undefined {
  return spec.type === 'sliding_window_log' ? shareOf(spec, region) : undefined;
}

function shareOf(spec: RateSpec, region: string | undefined): NamedShare | undefined {
  const shares = spec.global?.shares;
  if (shares === undefined || region === undefined) return undefined;
  const guaranteed = Object.prototype.hasOwnProperty.call(shares.guaranteed, region) ? shares.guaranteed[region] : 0;
  return { region, guaranteed, common: shares.common };
}

/** The ARGV a share puts before the lease operation's own arguments (lua/includes/shares.lua), or a sliding log's after its parameters. */
export function shareArgs(share: NamedShare): string[] {
  return [share.region, String(share.guaranteed), String(share.common)];
}

/** share_counts: the common share's units, the region's own and common units in window `tag` (0s for another). */
function counts(ledger: ShareLedger | undefined, region: string, tag: number): { c: number; g: number; o: number; current: boolean } {
  if (ledger === undefined || ledger.tag !== tag) return { c: 0, g: 0, o: 0, current: false };
  const mine = ledger.regions.get(region);
  return { c: ledger.common, g: mine?.own ?? 0, o: mine?.fromCommon ?? 0, current: true };
}

/** share_cap's room: what the region may take in window `tag` before this take. */
export function shareRoom(slot: ShareSlot, share: NamedShare, tag: number): number {
  const { c, g } = counts(slot.read(), share.region, tag);
  return Math.max(0, share.guaranteed - g) + Math.max(0, share.common - c);
}

/** share_count: `units` taken (a give: `-units`) by the region in window `tag`, which ends at `windowEnd`. */
function count(slot: ShareSlot, share: NamedShare, tag: number, units: number, windowEnd: number): void {
  if (units === 0) return;
  const before = slot.read();
  let { c, g, o } = counts(before, share.region, tag);
  const ledger: ShareLedger = before !== undefined && before.tag === tag ? before : { tag, common: 0, regions: new Map() };
  if (units > 0) {
    const own = Math.min(units, Math.max(0, share.guaranteed - g));
    g = g + own;
    o = o + (units - own);
    c = c + (units - own);
  } else {
    const back = -units;
    const common = Math.min(back, o);
    o = o - common;
    c = c - common;
    g = Math.max(0, g - (back - common));
  }
  ledger.common = c;
  ledger.regions.set(share.region, { own: g, fromCommon: o });
  slot.write(ledger, windowEnd);
}

/** share_report: every region's units of window `tag`, by name (none for another window). */
function report(slot: ShareSlot, tag: number): Record<string, number> {
  const ledger = slot.read();
  const taken: Record<string, number> = {};
  if (ledger === undefined || ledger.tag !== tag) return taken;
  for (const name of [...ledger.regions.keys()].sort()) {
    const { own, fromCommon } = ledger.regions.get(name)!;
    taken[name] = own + fromCommon;
  }
  return taken;
}

/**
 * share_answer: the operation done (its answer completed: finishLeaseOp), its units are counted, and a
 * take's `remaining` and retry_after are bounded by what the region may still take (`room` before it);
 * every answer reports the window.
 */
export function shareAnswer(slot: ShareSlot, share: NamedShare, answer: LeaseCounterResult, op: 'take' | 'give', room: number): void {
  const done = answer.outcome === 'done';
  const windowEnd = answer.storeNow + answer.windowLeftMs;
  if (done && op === 'take') {
    count(slot, share, answer.windowTag, answer.units, windowEnd);
    boundByRoom(answer, room);
  } else if (done && op === 'give') {
    count(slot, share, answer.windowTag, -answer.units, windowEnd);
  }
  answer.shareTaken = report(slot, answer.windowTag);
}

/** A take's `remaining` at most what its region may still take (`room` before it); taking all of it, refused until the window (sub-window) ends. */
export function boundByRoom(answer: LeaseCounterResult, room: number): void {
  const left = room - answer.units;
  answer.remaining = Math.min(answer.remaining, Math.max(0, left));
  if (left < 1) answer.retryAfterMs = answer.windowLeftMs;
}

/** The report as the script answers it ("<region>=<units>,..."), parsed. */
export function parseShareReport(text: string): Record<string, number> {
  const taken: Record<string, number> = {};
  if (text === '') return taken;
  for (const part of text.split(',')) {
    const at = part.lastIndexOf('=');
    taken[part.slice(0, at)] = Number(part.slice(at + 1));
  }
  return taken;
}
