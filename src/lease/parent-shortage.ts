import type { CounterResult } from '../counters/counter-store.js';

/** A refusal's timing: the parent counter's own retry_after and reset_after (ms). */
export type RefusalTiming = Pick<CounterResult, 'retryAfterMs' | 'resetAfterMs'>;

/**
 * What the parent counters said when they last admitted no more, per counter (CONTRACT "Honest
 * refusals"): counted from when the answer arrived, so a client told to retry then finds them ready.
 */
export class ParentShortage {
  private readonly until = new Map<string, { retryAt: number; resetAt: number }>();

  /** The parent's answer arrived at `arrivedAt`: short (retry_after > 0) it is noted, else forgotten. */
  note(key: string, answer: RefusalTiming, arrivedAt: number): void {
    if (answer.retryAfterMs > 0) this.until.set(key, { retryAt: arrivedAt + answer.retryAfterMs, resetAt: arrivedAt + answer.resetAfterMs });
    else this.until.delete(key);
  }

  /** The parent's timing counted down to `now`; undefined once its retry_after has passed (ask again). */
  at(key: string, now: number): RefusalTiming | undefined {
    const short = this.until.get(key);
    if (short !== undefined && short.retryAt <= now) this.until.delete(key);
    if (short === undefined || short.retryAt <= now) return undefined;
    return { retryAfterMs: Math.ceil(short.retryAt - now), resetAfterMs: Math.max(0, Math.ceil(short.resetAt - now)) };
  }
}
