import type { CounterResult } from '../counters/counter-store.js';
import type { RateSpec } from '../counters/counter-spec.js';
import { neverFits } from './never-fits.js';

/**
 * Refusals the counter store gave, kept to answer the same (counter, cost) in-process until its
 * `retry_after` passes: a key far over its limit costs no Redis call per request (docs/algorithms.md,
 * "Deny cache").
 *
 * Why the answer stays the store's: a refused consume took nothing, so until someone changes the
 * counter the store would answer the same refusal, with `retry_after` and `reset_after` counted down by
 * the time that passed. The only things that change a counter are consumes (which can only make the
 * refusal last longer: they never free capacity), refunds, and a policy change. On this node a refund
 * or an admitted consume on the key drops its entry (the DecisionService reports every store answer,
 * in the order the store executed them), and a policy change gives the policy a new compiled object,
 * which no entry matches. `remaining` must not change with time alone either: it is constant for
 * fixed_window and quota, and for the other algorithms it only grows while refused and stays below the
 * cost, so only a refusal already at `cost − 1` is kept.
 *
 * What this node cannot see — a refund on another node, a Redis that lost its data — frees capacity
 * early; no entry outlives `maxAgeMs`, which bounds how long such a refusal can be stricter than Redis.
 *
 * Bounded: at most `capacity` entries, one per counter key (its last refused cost); the oldest written
 * is dropped first. A hot key rewrites its entry at every retry, so it stays.
 */
export interface DenyCacheOptions {
  /** Most counters held (default 10,000; its memory in BENCHMARKS.md). */
  capacity?: number;
  /** Longest an entry answers before the store is asked again, ms (default 1,000). */
  maxAgeMs?: number;
}

interface Refusal {
  /** What the counter belongs to (the CompiledPolicy): a changed policy is a new object. */
  owner: object;
  cost: number;
  remaining: number;
  /** Clock readings (the DecisionService's clock) taken when the refused request was sent. */
  sentAt: number;
  retryAt: number;
  resetAt: number;
  /** Until when this entry answers: retryAt, or sooner by maxAgeMs. */
  expiresAt: number;
}

export class DenyCache {
  readonly capacity: number;
  readonly maxAgeMs: number;
  private readonly entries = new Map<string, Refusal>();

  constructor(options: DenyCacheOptions = {}) {
    this.capacity = options.capacity ?? 10_000;
    this.maxAgeMs = options.maxAgeMs ?? 1_000;
    if (!Number.isInteger(this.capacity) || this.capacity < 1) throw new RangeError(`deny cache capacity must be a positive integer, got ${this.capacity}`);
    if (!(this.maxAgeMs > 0)) throw new RangeError(`deny cache maxAgeMs must be positive, got ${this.maxAgeMs}`);
  }

  /** Entries held (for tests and metrics). */
  get size(): number {
    return this.entries.size;
  }

  /**
   * The store's answer to a consume of `cost` on the counter `key` at `nowMs`, while a refusal of that
   * cost stands; undefined when the store must be asked.
   */
  /** Counter lookups this cache answered (a decision may also ask the store for another policy). */
  answered = 0;

  lookup(key: string, owner: object, cost: number, nowMs: number): CounterResult | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined || entry.cost !== cost) return undefined;
    // A clock stepped back cannot say how much time has passed: ask the store.
    if (entry.owner !== owner || nowMs >= entry.expiresAt || nowMs < entry.sentAt) {
      this.entries.delete(key);
      return undefined;
    }
    this.answered++;
    return {
      allowed: false,
      remaining: entry.remaining,
      retryAfterMs: entry.retryAt - nowMs,
      resetAfterMs: Math.max(0, entry.resetAt - nowMs),
    };
  }

  /**
   * The store refused a consume of `cost` (a peek: cost 1) sent at `sentAt`: keep it when it can stand.
   * `holdMs`: a leased counter's max_hold (CompiledLease). Its refusal carries the parent's own
   * retry_after (a window's end), but units can come back sooner without this node seeing it (another
   * holder's return, found by the next refill): kept no longer than that.
   */
  refused(key: string, owner: object, spec: RateSpec, cost: number, result: CounterResult, sentAt: number, holdMs = Infinity): void {
    if (result.allowed || !(result.retryAfterMs > 0) || !refusalHolds(spec, cost, result.remaining)) return;
    const retryAt = sentAt + result.retryAfterMs;
    const entry: Refusal = {
      owner,
      cost,
      remaining: result.remaining,
      sentAt,
      retryAt,
      resetAt: sentAt + result.resetAfterMs,
      // Once the counter is whole again (reset_after) a cost within capacity fits, whatever retry_after
      // said: a bucket whose state was written under other parameters (a changed policy) can answer a
      // retry_after beyond its own reset_after, and the store itself admits from then on.
      expiresAt: Math.min(Math.min(retryAt, sentAt + result.resetAfterMs) - edgeMs(spec), sentAt + Math.min(this.maxAgeMs, holdMs)),
    };
    // Re-inserted, so the entries stay in write order and the first one is the oldest.
    this.entries.delete(key);
    if (this.entries.size >= this.capacity) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(key, entry);
  }

  /** The counter changed here (admitted, refunded, or an answer that never came): its refusal no longer stands. */
  changed(key: string): void {
    this.entries.delete(key);
  }
}

/**
 * A bucket's level is a float: the store's `retry_after` is the ceiling of a value that is a whole
 * number in exact arithmetic, so it can come out 1 ms high at one instant and exact at the next. The
 * last millisecond before `retry_after` is therefore left to the store (it may already admit), and
 * a cached bucket refusal's `retry_after` can differ from the store's by that 1 ms.
 */
function edgeMs(spec: RateSpec): number {
  return spec.type === 'token_bucket' || spec.type === 'leaky_bucket' ? 1 : 0;
}

/**
 * Whether the store would answer this refusal, counted down, until its `retry_after` with nobody
 * consuming meanwhile.
 *
 * A cost above the capacity never fits: the store's `retry_after` then need not count down (an empty
 * sliding log or quota answers a whole window every time), so it is not kept.
 *
 * `remaining`: fixed windows and quotas keep their usage for the whole window. Sliding windows and
 * buckets free capacity continuously, so `remaining` grows with time — but a refused cost never fits,
 * so it stays below `cost`: a refusal already at `cost − 1` cannot change.
 */
function refusalHolds(spec: RateSpec, cost: number, remaining: number): boolean {
  if (neverFits(spec, cost)) return false;
  return spec.type === 'fixed_window' || spec.type === 'quota' || remaining === cost - 1;
}
