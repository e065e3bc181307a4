import type { CounterResult } from '../counters/counter-store.js';

/** A refusal's timing: the parent counter's own retry_after and reset_after (ms). */
export type RefusalTiming = Pick<CounterResult, 'retryAfterMs' | 'resetAfterMs'>;

/**
 * What the parent counters said when they last admitted no more, per counter (CONTRACT "Honest
 * refusals"): counted from when the answer arrived, so a client told to retry then finds them ready.
 */
export class ParentShortage {
  private readonly until = new Map<string, { retryAt: number; resetAt: number; keptUntil: number }>();
  private readonly looks = new Map<string, Promise<RefusalTiming | undefined>>();

  /** The parent's answer arrived at `arrivedAt`: kept while short (retry_after > 0), and at least `keepMs`. */
  note(key: string, answer: RefusalTiming, arrivedAt: number, keepMs = 0): void {
    this.until.set(key, { retryAt: arrivedAt + answer.retryAfterMs, resetAt: arrivedAt + answer.resetAfterMs, keptUntil: arrivedAt + Math.max(answer.retryAfterMs, keepMs) });
  }

  /** The parent's timing counted down to `now`; undefined once no longer kept (ask again). */
  at(key: string, now: number): RefusalTiming | undefined {
    const noted = this.until.get(key);
    if (noted === undefined || noted.keptUntil <= now) return void this.until.delete(key);
    return { retryAfterMs: Math.max(0, Math.ceil(noted.retryAt - now)), resetAfterMs: Math.max(0, Math.ceil(noted.resetAt - now)) };
  }

  /** The timing as kept, else one `peek` shared by the refusals meanwhile; its answer, or none, kept at least `keepMs` (unless one came meanwhile). */
  look(key: string, now: () => number, peek: (() => Promise<RefusalTiming>) | undefined, keepMs: number): RefusalTiming | Promise<RefusalTiming | undefined> | undefined {
    const noted = (answer?: RefusalTiming) => (this.at(key, now()) ?? this.note(key, answer ?? { retryAfterMs: 0, resetAfterMs: 0 }, now(), keepMs), answer);
    const look = this.at(key, now()) ?? this.looks.get(key) ?? peek?.().then(noted, () => noted()).finally(() => this.looks.delete(key));
    if (look instanceof Promise) this.looks.set(key, look);
    return look;
  }
}
