import { randomUUID } from 'node:crypto';
import type { LeaseClock, NamedTakeLimits, Reclaimed } from './types.js';

/** Samples of the parent's clock kept: the tightest of the recent ones sets the deadlines. */
const CLOCK_SAMPLES = 8;
/** Failed takes remembered for a reclaim (the parent remembers at most 256 per counter). */
const MAX_UNANSWERED = 256;
/**
 * How long after it was sent a failed take is still worth reclaiming: the parent remembers a take (and a
 * reclaim's tombstone) for a minute past its deadline, which is at most one call's timeout after it was sent.
 */
const RECLAIM_WITHIN_MS = 55_000;

/** A take's id, and its deadline once the parent's clock was sampled. */
export type TakeName = NamedTakeLimits & { takeId: string };

/** A take that failed on its way: what a reclaim names, and what the caller needs to count its answer. */
export interface UnansweredTake<Context> {
  takeId: string;
  deadline?: number;
  sentAt: number;
  context: Context;
}

/**
 * The holder side of named takes (CONTRACT "Global budgets and leases under faults"): each take from a
 * store parent gets a fresh id and a deadline in the parent's clock, so a take held up on the link
 * past the moment its holder gives up on it takes nothing there; one whose answer was lost is
 * remembered and reclaimed once the parent answers again.
 *
 * The parent's clock is estimated from the `parentNow` of its answers: an answer that arrived at local
 * instant `r` read the parent's clock before it arrived, so `parentNow − r` never exceeds the true
 * offset (same-rate clocks), and a deadline `local now + offset + timeout` is never later, by the
 * parent's clock, than the instant the holder stops waiting. Before any sample, no deadline (the id
 * alone still lets the take be reclaimed).
 */
export class NamedTakes<Context> {
  private readonly prefix = randomUUID();
  private sequence = 0;
  /** `parentNow − local arrival` of the latest answers: each a lower bound of the true offset. */
  private readonly offsets: number[] = [];
  private readonly unanswered: UnansweredTake<Context>[] = [];
  private reclaiming: Promise<void> | undefined;

  constructor(private readonly clock: LeaseClock) {}

  /** A fresh take's id and deadline, for a call that gives up `timeoutMs` after now. */
  name(timeoutMs: number): TakeName {
    const takeId = `${this.prefix}:${++this.sequence}`;
    if (this.offsets.length === 0) return { takeId };
    return { takeId, deadline: Math.floor(this.clock.now() + Math.max(...this.offsets) + timeoutMs) };
  }

  /** An answer of the parent arrived now, reading its clock as `parentNow`. */
  sampled(parentNow: number): void {
    this.offsets.push(parentNow - this.clock.now());
    if (this.offsets.length > CLOCK_SAMPLES) this.offsets.shift();
  }

  /** A take failed (timeout, reset, unreachable): it may still run at the parent; reclaim it later. */
  failed(named: TakeName, context: Context): void {
    this.unanswered.push({ takeId: named.takeId, deadline: named.deadline, sentAt: this.clock.now(), context });
    if (this.unanswered.length > MAX_UNANSWERED) this.unanswered.shift();
  }

  /** Takes out the failed takes still worth reclaiming (older ones are forgotten: the parent has too). */
  toReclaim(): UnansweredTake<Context>[] {
    const since = this.clock.now() - RECLAIM_WITHIN_MS;
    return this.unanswered.splice(0).filter((take) => take.sentAt >= since);
  }

  /** A reclaim that failed again: tried on the next chance. */
  retry(take: UnansweredTake<Context>): void {
    this.unanswered.push(take);
    if (this.unanswered.length > MAX_UNANSWERED) this.unanswered.shift();
  }

  pending(): number {
    return this.unanswered.length;
  }

  /**
   * Reclaims the failed takes still worth it, one round at a time: `reclaim` asks the parent, `answered`
   * counts its answer. Never rejects: a reclaim that fails again waits for the next chance.
   */
  reclaimAll(reclaim: (take: UnansweredTake<Context>) => Promise<Reclaimed>, answered: (answer: Reclaimed, take: UnansweredTake<Context>) => void): Promise<void> {
    this.reclaiming ??= Promise.all(
      this.toReclaim().map(async (take) => {
        let answer: Reclaimed;
        try {
          answer = await reclaim(take);
        } catch {
          return this.retry(take);
        }
        this.sampled(answer.parentNow);
        answered(answer, take);
      }),
    )
      .then(() => undefined)
      .finally(() => (this.reclaiming = undefined));
    return this.reclaiming;
  }
}
