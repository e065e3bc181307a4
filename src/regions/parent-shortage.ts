import type { CounterResult } from '../counters/counter-store.js';

/** A refusal's timing: the parent counter's own retry_after and reset_after (ms). */
export type RefusalTiming = Pick<CounterResult, 'retryAfterMs' | 'resetAfterMs'>;

/**
 * What the parent counters said when they last admitted no more, per counter (docs/distribution.md "Refusals tell the truth
 * (`retry_after`)"): counted from when the answer arrived, so a client told to retry then finds them ready.
 */
export class ParentShortage {
  private readonly until = new Map<string, { retryAt: number; resetAt: number; keptUntil: number }>();
  private readonly looks = new Map<string, Promise<RefusalTiming | undefined>>();

  /** The parent's answer arrived at `arrivedAt`: kept while short (retry_after > 0), and at least `keepMs`. */
  note(key: string, answer: RefusalTiming, arrivedAt: number, keepMs = 0): void {
    const keptUntil = arrivedAt + Math.max(answer.retryAfterMs, keepMs);
    // Nothing to keep: no entry (every refill notes its answer; a counter never refused would stay for ever).
    if (keptUntil <= arrivedAt) return void this.until.delete(key);
    this.until.set(key, { retryAt: arrivedAt + answer.retryAfterMs, resetAt: arrivedAt + answer.resetAfterMs, keptUntil });
  }

  /** The parent's timing counted down to `now`; undefined once no longer kept (ask again). */
  at(key: string, now: number): RefusalTiming | undefined {
    const noted = this.until.get(key);
    if (noted === undefined || noted.keptUntil <= now) return void this.until.delete(key);
    return { retryAfterMs: Math.max(0, Math.ceil(noted.retryAt - now)), resetAfterMs: Math.max(0, Math.ceil(noted.resetAt - now)) };
  }

  /** The timing as kept, else one `peek` shared by the refusals meanwhile; its answer, or none, kept at least `keepMs` (unless one came meanwhile). */
  look(key: string, now: () => number, peek: (() => Promise<RefusalTiming>) | undefined, keepMs: number): RefusalTiming | Promise<RefusalTiming | undefined> | undefined {
    const kept = this.at(key, now()) ?? this.looks.get(key);
    if (kept !== undefined || peek === undefined) return kept;
    const keep = (answer: RefusalTiming | undefined) => {
      if (this.at(key, now()) === undefined) this.note(key, answer ?? { retryAfterMs: 0, resetAfterMs: 0 }, now(), keepMs);
      return answer;
    };
    const look = peek().then(keep, () => keep(undefined)).finally(() => this.looks.delete(key));
    this.looks.set(key, look);
    return look;
  }

  /** Its counter is no longer held here (swept idle, let go): what was kept for it goes too. */
  forget(key: string): void {
    this.until.delete(key);
  }

  /** Counters with an answer kept (tests: it is bounded by the counters refused lately). */
  get size(): number {
    return this.until.size;
  }
}
