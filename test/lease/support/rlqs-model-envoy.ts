import type { Assignment } from '../../../src/lease/rlqs-assignment.js';
import type { BucketUsage } from '../../../src/lease/rlqs-stream.js';
import { parseRequestContext } from '../../../src/model/request-context.js';

/** The one bucket the model Envoys report, as a usage line names it. */
export const MODEL_BUCKET = { user_id: 'u' };

/**
 * An Envoy rate_limit_quota filter as the protocol describes it, for one bucket, on a test clock (used by
 * the RLQS stream property test and the lease simulation's RLQS holders):
 * - the bucket's first request (after start, or after an abandon) reports at once: it subscribes;
 * - DENY_ALL before the first assignment and after one expired (the fallbacks the guarantee assumes);
 * - a strategy different from the active one (or after it expired) ends it: the usage is reported, the
 *   new one applied, a token bucket starting full; the same strategy only extends the life;
 * - a token bucket fills continuously at one token per fill interval;
 * - abandon_action erases the bucket, usage and all; an assignment for a bucket it does not have is ignored.
 * Where its reports go, and when, is `send`'s business.
 */
export class ModelEnvoy {
  /** Requests let through over its whole life. */
  admitted = 0;
  private allowed = 0;
  private denied = 0;
  private lastReport: number;
  private subscribed = false;
  private active?: { assignment: Assignment; expiresAt: number; tokens: number; at: number };

  constructor(
    private readonly clock: { readonly now: number },
    private readonly send: (usage: BucketUsage) => void,
  ) {
    this.lastReport = clock.now;
  }

  /** One request: admitted or not by the bucket's state now. */
  request(): boolean {
    const ok = this.decide();
    if (ok) this.admitted++;
    if (ok) this.allowed++;
    else this.denied++;
    if (!this.subscribed) {
      this.subscribed = true;
      this.report();
    }
    return ok;
  }

  /** The bucket's usage since the last report (nothing while it has no bucket). */
  report(): void {
    if (!this.subscribed) return;
    const usage: BucketUsage = {
      key: 'u',
      bucketId: MODEL_BUCKET,
      ctx: parseRequestContext({ user_id: 'u', tags: { domain: 'edge' } }),
      allowed: this.allowed,
      denied: this.denied,
      elapsedMs: this.clock.now - this.lastReport,
    };
    this.allowed = 0;
    this.denied = 0;
    this.lastReport = this.clock.now;
    this.send(usage);
  }

  /** An action of the server, as it arrives. */
  apply(assignment: Assignment): void {
    if (assignment.strategy === 'abandon') {
      this.active = undefined;
      this.subscribed = false;
      this.allowed = 0;
      this.denied = 0;
      return;
    }
    // An assignment for a bucket it no longer has (one that crossed an abandon) is ignored.
    if (!this.subscribed) return;
    const now = this.clock.now;
    const active = this.active;
    if (active && active.expiresAt > now && JSON.stringify({ ...active.assignment, ttlMs: 0 }) === JSON.stringify({ ...assignment, ttlMs: 0 })) {
      active.expiresAt = now + assignment.ttlMs;
      return;
    }
    if (active) this.report();
    this.active = { assignment, expiresAt: now + assignment.ttlMs, tokens: assignment.strategy === 'token_bucket' ? assignment.maxTokens : 0, at: now };
  }

  private decide(): boolean {
    const active = this.active;
    if (active === undefined || active.expiresAt <= this.clock.now) return false;
    const a = active.assignment;
    if (a.strategy !== 'token_bucket') return a.strategy === 'allow_all';
    active.tokens = Math.min(a.maxTokens, active.tokens + (this.clock.now - active.at) / (a.fillIntervalMs + a.fillTagNanos / 1e6));
    active.at = this.clock.now;
    if (active.tokens < 1) return false;
    active.tokens -= 1;
    return true;
  }
}
