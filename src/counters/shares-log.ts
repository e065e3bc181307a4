import type { NamedShare } from './shares.js';

/**
 * Weighted regional shares over a sliding log (sliding_window_log) in the emulator: the port of
 * lua/includes/shares_log.lua (its rules are written there); change both together. Each entry of a
 * region keeps how much of it came from the region's guarantee, so the region's use is exact.
 */

/** One entry of the log; a region's carries its region and the units of its guarantee (the rest: common). */
export interface LogEntry {
  ts: number;
  cost: number;
  region?: string;
  own?: number;
}

/** The sums of the entries in the log: from the common share (every region's), and per region. */
export interface LogShareSums {
  common: number;
  regions: Map<string, { own: number; fromCommon: number }>;
}

/** One operation's view of the sums: what it changed (written by `flush` unless it only peeks). */
export class LogShareRun {
  /** A peek of a stale state, which it leaves as it is: its sums count nothing. */
  absent = false;
  private changes = new Map<string, { g: number; o: number }>();
  private commonChange = 0;

  constructor(
    readonly share: NamedShare | undefined,
    private readonly sums: () => LogShareSums | undefined,
  ) {}

  /** share_add: `units` of `region`, `own` of them its guarantee's, join the log (negative: leave it). */
  add(region: string, own: number, units: number): void {
    let change = this.changes.get(region);
    if (change === undefined) this.changes.set(region, (change = { g: 0, o: 0 }));
    change.g = change.g + own;
    change.o = change.o + (units - own);
    this.commonChange = this.commonChange + (units - own);
  }

  /** share_forget: an entry leaving the log. */
  forget(entry: LogEntry): void {
    if (entry.region !== undefined) this.add(entry.region, -entry.own!, -entry.cost);
  }

  /** share_use: the region's guaranteed use and the common share's use, as this operation stands. */
  use(): [own: number, common: number] {
    if (this.absent) return [0, 0];
    const sums = this.sums();
    const region = this.share!.region;
    return [(sums?.regions.get(region)?.own ?? 0) + (this.changes.get(region)?.g ?? 0), (sums?.common ?? 0) + this.commonChange];
  }

  /** share_room_of: what the region may take of a use of `own` and `common`. */
  roomOf(own: number, common: number): number {
    return Math.max(0, this.share!.guaranteed - own) + Math.max(0, this.share!.common - common);
  }

  /** share_room: what the region may take now (Infinity without a region). */
  room(): number {
    return this.share === undefined ? Infinity : this.roomOf(...this.use());
  }

  /** share_report: every region's units in the log, by name, those with none left out. */
  report(): Record<string, number> {
    const taken = new Map<string, number>();
    if (!this.absent) {
      for (const [name, units] of this.sums()?.regions ?? []) taken.set(name, units.own + units.fromCommon);
    }
    for (const [name, change] of this.changes) taken.set(name, (taken.get(name) ?? 0) + change.g + change.o);
    const report: Record<string, number> = {};
    for (const name of [...taken.keys()].sort()) if (taken.get(name)! > 0) report[name] = taken.get(name)!;
    return report;
  }

  /** share_cleared: the state deleted, nothing of the changes is left to write. */
  cleared(): void {
    this.changes = new Map();
    this.commonChange = 0;
  }

  /** share_flush: the changes written into `state`'s sums (a region left with none loses its entry). */
  flush(state: { shares?: LogShareSums }): void {
    if (this.changes.size === 0 && this.commonChange === 0) return;
    const sums = (state.shares ??= { common: 0, regions: new Map() });
    for (const [name, change] of this.changes) {
      const before = sums.regions.get(name);
      const own = (before?.own ?? 0) + change.g;
      const fromCommon = (before?.fromCommon ?? 0) + change.o;
      if (own === 0 && fromCommon === 0) sums.regions.delete(name);
      else sums.regions.set(name, { own, fromCommon });
    }
    sums.common = sums.common + this.commonChange;
    this.cleared();
  }
}
