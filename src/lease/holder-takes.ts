import { randomUUID } from 'node:crypto';
import type { LeaseShape } from '../counters/counter-spec.js';
import { leaseFailed } from './failures.js';
import { expiredReason, type LapseReason, type LeaseClock, type LeaseEvents, type LeaseParent, type NamedTakeLimits } from './types.js';

/** Samples of the parent's clock kept: the tightest of the recent ones sets the deadlines. */
const CLOCK_SAMPLES = 8;
/** Failed takes and gives remembered for a reclaim (the parent remembers at most 256 per counter). */
const MAX_UNANSWERED = 256;
/** A failed call is worth settling this long after it was sent: the parent remembers it a minute past its deadline. */
const RECLAIM_WITHIN_MS = 55_000;

/** A take's (or give's) id, and its deadline once the parent's clock was sampled. */
export type TakeName = NamedTakeLimits & { takeId: string };

/** Whose units a take or give moves: the parent, its call timeout, where to count, why its units lapse, what to log. */
export type UnitOwner = { parent: LeaseParent; timeoutMs: number; events: LeaseEvents; shape: LeaseShape; fields?: Record<string, unknown> };

/** A take or give that failed on its way: what a reclaim names; a give's units, to give them again. */
interface Unanswered<Context> {
  name: TakeName;
  /** When its units first went out: a give sent again keeps it, so it is settled within the parent's memory. */
  sentAt: number;
  context: Context;
  give?: { units: number; windowTag: number | null };
  /** A take's: why what cannot go back lapsed (default: parent unreachable). */
  reason?: LapseReason;
  /** An earlier reclaim of it was sent and its answer lost: a `repeat` is that reclaim's answer. */
  resent?: boolean;
}

/**
 * The holder side of named takes and gives (docs/distribution.md "What it costs (under-admission, bounded and counted)"): each gets a fresh id
 * and a deadline in the parent's clock, so one held up past the moment its holder gives up does nothing
 * there; one whose answer was lost is settled once the parent answers again. Each unit is counted once.
 *
 * An answer that arrived at local instant `r` read the parent's clock before, so `parentNow − r` never
 * exceeds the true offset (same-rate clocks): a deadline `now + offset + timeout` is never later, by the
 * parent's clock, than the holder's giving up. Before any sample, no deadline (the id alone still settles).
 */
export class HolderTakes<Context> {
  private readonly prefix = randomUUID();
  private sequence = 0;
  /** `parentNow − local arrival` of the latest answers: each a lower bound of the true offset. */
  private readonly offsets: number[] = [];
  private readonly unanswered: Unanswered<Context>[] = [];
  /** Ids kept for a reclaim (the latest 4 × MAX_UNANSWERED): one path only reclaims each (a second counts twice). */
  private readonly registered = new Set<string>();
  private settling: Promise<void> | undefined;
  private closed = false;

  /** `ownerOf`: whose units a context's takes and gives move. */
  constructor(private readonly clock: LeaseClock, private readonly ownerOf: (context: Context) => UnitOwner) {}

  /** A fresh id and deadline, for a call that gives up `timeoutMs` after now. */
  name(timeoutMs: number): TakeName {
    const takeId = `${this.prefix}:${++this.sequence}`;
    if (this.offsets.length === 0) return { takeId };
    return { takeId, deadline: Math.floor(this.clock.now() + Math.max(...this.offsets) + timeoutMs) };
  }

  /** An answer of the parent arrived now, reading its clock as `parentNow`: the moment to settle what failed. */
  answered(parentNow: number): void {
    this.offsets.push(parentNow - this.clock.now());
    if (this.offsets.length > CLOCK_SAMPLES) this.offsets.shift();
    if (this.unanswered.length > 0) void this.settleAll();
  }

  /** A take (or `give`) failed (timeout, reset, unreachable): it may still run at the parent; settled later. */
  failed(name: TakeName, context: Context, give?: Unanswered<Context>['give'], sentAt = this.clock.now()): void {
    if (this.register(name.takeId)) this.keep({ name, sentAt, context, give });
  }

  /** Reclaims take `name` now (a refill's lock taken over, or found stale): what cannot go back lapsed for `reason`. */
  async reclaim(name: TakeName, context: Context, reason: LapseReason): Promise<void> {
    if (this.ownerOf(context).parent.reclaim && this.register(name.takeId)) await this.settle({ name, sentAt: this.clock.now(), context, reason });
  }

  /**
   * Gives `units` back, named when the parent keeps a ledger, and counts what went back and what lapsed;
   * one that failed, or came late (its units still this holder's), is settled later. Never rejects.
   */
  async give(context: Context, units: number, windowTag: number | null, sentAt = this.clock.now()): Promise<void> {
    const owner = this.ownerOf(context);
    const name = owner.parent.reclaim ? this.name(owner.timeoutMs) : undefined;
    const give = { units, windowTag };
    const answer = await owner.parent.giveBack(units, windowTag, name).catch((error: unknown) => {
      leaseFailed(owner, 'give_back', error);
      // Unnamed it cannot be settled: lost to its window (under-admission only).
      return name ? this.failed(name, context, give, sentAt) : countUnits(owner, 0, units, 'parent_unreachable');
    });
    if (!answer) return;
    if (answer.outcome === 'late') this.failed(name!, context, give, sentAt);
    // `reclaimed`: settled first, and given again then: counted there.
    else if (answer.outcome !== 'reclaimed') countUnits(owner, answer.returned, answer.lapsed);
    if (name) this.answered(answer.parentNow);
  }

  /** Settles what failed (`settle`). Never rejects. */
  settleAll(): Promise<void> {
    this.settling ??= Promise.all(this.unanswered.splice(0).map((entry) => this.settle(entry))).then(() => void (this.settling = undefined));
    return this.settling;
  }

  /** Settles what it can; what is unanswered then, or fails later, cannot be settled. */
  async close(): Promise<void> {
    await this.settling;
    await this.settleAll();
    this.closed = true;
    for (const entry of this.unanswered.splice(0)) this.forget(entry);
  }

  /**
   * A take's reclaim gives back what it took (what cannot go back lapsed, for its reason), counted when
   * `done`, or `repeat` answering this holder's lost reclaim (the parent answers others `reclaimed`). A give
   * that ran answers what it did; one that did not (`ahead`, or this holder's tombstone) goes again.
   */
  private async settle(entry: Unanswered<Context>): Promise<void> {
    // Older ones the parent has forgotten too.
    if (entry.sentAt < this.clock.now() - RECLAIM_WITHIN_MS) return this.forget(entry);
    const { name, give, context } = entry;
    const owner = this.ownerOf(context);
    const answer = await owner.parent.reclaim!(name.takeId, name.deadline, this.prefix).catch(() => this.keep({ ...entry, resent: true }));
    if (!answer) return;
    this.answered(answer.parentNow);
    const { outcome, returned, lapsed } = answer;
    const ran = give ? returned + lapsed > 0 : outcome === 'done' || (outcome === 'repeat' && entry.resent);
    if (ran) return countUnits(owner, returned, lapsed, give ? expiredReason(owner.shape) : (entry.reason ?? 'parent_unreachable'));
    if (give) await this.give(context, give.units, give.windowTag, entry.sentAt);
  }

  /** False when `takeId` was kept before. */
  private register(takeId: string): boolean {
    if (this.registered.has(takeId)) return false;
    this.registered.add(takeId);
    if (this.registered.size > 4 * MAX_UNANSWERED) this.registered.delete(this.registered.values().next().value!);
    return true;
  }

  private keep(entry: Unanswered<Context>): void {
    if (this.closed) return this.forget(entry);
    this.unanswered.push(entry);
    if (this.unanswered.length > MAX_UNANSWERED) this.forget(this.unanswered.shift()!);
  }

  /** Past settling: a give's units lapsed, parent unreachable (what a take took is unknown). */
  private forget({ context, give }: Unanswered<Context>): void {
    if (give) countUnits(this.ownerOf(context), 0, give.units, 'parent_unreachable');
  }
}

/** Counts units given back, and units lapsed for `reason` (by default their spend-by came: window ended, a bucket's max_hold passed). */
export function countUnits(owner: Pick<UnitOwner, 'events' | 'shape'>, returned: number, lapsed: number, reason?: LapseReason): void {
  if (returned > 0) owner.events.returned?.(returned);
  if (lapsed > 0) owner.events.lapsed?.(lapsed, reason ?? expiredReason(owner.shape));
}
