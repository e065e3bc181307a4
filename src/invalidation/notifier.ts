import { describeFetchError, redactUrl, withTimeout } from '../util/fetch.js';
import { log } from '../util/log.js';

/**
 * The server side of RL_INVALIDATION_TARGETS (docs/deployment.md "Keeping policies current"): after a policy change, every
 * target gets `POST {target}/rl/v1/agent/invalidate` with `{"policy_id","change","version"}`.
 *
 * `notify()` never blocks and never throws: it only records work. Delivery runs in the background:
 *
 * - **Coalescing.** At most one undelivered notification per target waits at any time. A change that
 *   arrives while one is waiting (for a worker or for its retry back-off) is merged into it: the payload
 *   becomes the latest change and the attempt count starts again. The sidecar refetches the whole policy
 *   set on any invalidation, so the merged message loses nothing. A change that arrives while a request
 *   to that target is in flight queues a new one (the in-flight one may have been read before it).
 * - **Bounded queue.** At most `maxQueue` notifications wait (one per target, so this only matters with
 *   many targets); beyond that the oldest waiting one is dropped and counted as a failure.
 * - **Bounded workers.** At most `concurrency` requests are in flight at once, and at most one per
 *   target, so a target that hangs holds one worker (until its timeout), never the whole pool.
 * - **Retries** with exponential back-off and full jitter, for network errors, timeouts, 408, 429 and
 *   5xx, up to `maxAttempts` attempts; other answers (3xx, 4xx) are not retried. Each attempt is bounded
 *   by `timeoutMs` (AbortSignal.timeout).
 * - **Redirects are never followed** (`redirect: 'manual'`): a 3xx is a failure, so a target cannot send
 *   the server's credential, or the server itself, anywhere else.
 * - **Failures** (attempts exhausted, or dropped from a full queue) are reported once per notification
 *   through `onFailure`, and counted (`stats().failed`): the metric `rl_invalidation_failures_total`.
 */

export interface InvalidationChange {
  policy_id: string;
  change: string;
  version: number;
}

export type InvalidationFailureReason =
  /** Every attempt failed (or the answer was not retryable). */
  | 'exhausted'
  /** Dropped from the full queue to make room for a newer notification. */
  | 'dropped';

export interface InvalidationFailure {
  /** The target base URL (as configured). */
  target: string;
  reason: InvalidationFailureReason;
  change: InvalidationChange;
  /** Attempts made (0 when dropped before the first). */
  attempts: number;
  /** The last error: `HTTP 503`, `timeout`, `ECONNREFUSED`, … */
  error: string;
}

export interface InvalidationNotifierOptions {
  /** Sidecar base URLs (RL_INVALIDATION_TARGETS), e.g. `http://10.0.0.7:18080`. */
  targets: readonly string[];
  /** Sent as `Authorization: Bearer <token>` (RL_INVALIDATION_TOKEN; the agents' RL_AGENT_INVALIDATE_TOKEN). */
  token?: string;
  /** Requests in flight at once (default 4). */
  concurrency?: number;
  /** Notifications waiting at once (default 1000). */
  maxQueue?: number;
  /** Attempts per notification, the first included (default 5). */
  maxAttempts?: number;
  /** Back-off before the 2nd attempt, ms; doubles each time, with full jitter (default 200). */
  baseDelayMs?: number;
  /** Largest back-off, ms (default 5000). */
  maxDelayMs?: number;
  /** Per-request timeout, ms (default 2000). */
  timeoutMs?: number;
  /** Called once per notification that was given up; must not throw (errors are swallowed). */
  onFailure?: (failure: InvalidationFailure) => void;
  /** Called once per notification delivered (2xx). */
  onDelivered?: (target: string, change: InvalidationChange) => void;
  /** Random source in [0, 1) for the jitter (tests). */
  random?: () => number;
  /** Called when a failed attempt is to be retried after `delayMs` (tests: the back-off schedule). */
  onRetry?: (target: string, attempts: number, delayMs: number) => void;
}

export interface InvalidationStats {
  /** Notifications delivered with a 2xx. */
  delivered: number;
  /** Notifications given up (exhausted + dropped). */
  failed: number;
  /** Of which dropped from a full queue. */
  dropped: number;
  /** Changes merged into a notification already waiting. */
  coalesced: number;
  /** Attempts made (each HTTP request). */
  attempts: number;
  /** Waiting now (for a worker or for a retry). */
  pending: number;
  /** Requests in flight now. */
  inFlight: number;
}

interface Job {
  target: string;
  change: InvalidationChange;
  /** Attempts made so far for the current payload. */
  attempts: number;
  /** Set while waiting for a retry back-off. */
  timer?: NodeJS.Timeout;
  lastError: string;
}

export const INVALIDATE_PATH = '/rl/v1/agent/invalidate';

export class InvalidationNotifier {
  private readonly targets: readonly string[];
  private readonly concurrency: number;
  private readonly maxQueue: number;
  private readonly maxAttempts: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly timeoutMs: number;
  private readonly random: () => number;
  /** Waiting jobs by target, in insertion order (oldest first): at most one per target. */
  private readonly pending = new Map<string, Job>();
  /** Jobs ready to run (a subset of `pending`), FIFO. */
  private ready: Job[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  /** Targets with a request in flight. */
  private readonly busy = new Set<string>();
  private readonly closing = new AbortController();
  private closed = false;
  private readonly counts = { delivered: 0, failed: 0, dropped: 0, coalesced: 0, attempts: 0 };

  constructor(private readonly options: InvalidationNotifierOptions) {
    this.targets = [...new Set(options.targets.map((t) => t.replace(/\/+$/, '')))];
    this.concurrency = positiveInt(options.concurrency ?? 4, 'concurrency');
    this.maxQueue = positiveInt(options.maxQueue ?? 1000, 'maxQueue');
    this.maxAttempts = positiveInt(options.maxAttempts ?? 5, 'maxAttempts');
    this.baseDelayMs = Math.max(0, options.baseDelayMs ?? 200);
    this.maxDelayMs = Math.max(this.baseDelayMs, options.maxDelayMs ?? 5000);
    this.timeoutMs = positiveInt(options.timeoutMs ?? 2000, 'timeoutMs');
    this.random = options.random ?? Math.random;
  }

  /** Queues a notification of `change` to every target. Returns at once; never throws. */
  notify(change: InvalidationChange): void {
    try {
      if (this.closed || this.targets.length === 0) return;
      const payload: InvalidationChange = {
        policy_id: String(change.policy_id ?? ''),
        change: String(change.change ?? ''),
        version: Number.isFinite(change.version) ? change.version : 0,
      };
      for (const target of this.targets) this.enqueue(target, payload);
      this.pump();
    } catch (error) {
      // Never let a notification break the policy change that caused it.
      log.error('invalidation notify failed', { error: String(error) });
    }
  }

  stats(): InvalidationStats {
    return { ...this.counts, pending: this.pending.size, inFlight: this.inFlight.size };
  }

  /**
   * Resolves when nothing is waiting or in flight (tests; a graceful shutdown may race it against a
   * deadline before calling close()).
   */
  async idle(): Promise<void> {
    while (this.pending.size > 0 || this.inFlight.size > 0) {
      if (this.inFlight.size > 0) await Promise.race(this.inFlight);
      else await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  /** Stops: drops waiting notifications, aborts requests in flight, and waits for them to settle. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const job of this.pending.values()) if (job.timer) clearTimeout(job.timer);
    this.pending.clear();
    this.ready = [];
    this.closing.abort();
    await Promise.allSettled([...this.inFlight]);
  }

  // ---------------------------------------------------------------------------------------------

  private enqueue(target: string, change: InvalidationChange): void {
    const waiting = this.pending.get(target);
    if (waiting) {
      // Coalesce: the newest change replaces the waiting one, and deserves its own full set of attempts.
      waiting.change = change;
      waiting.attempts = 0;
      this.counts.coalesced++;
      return;
    }
    const job: Job = { target, change, attempts: 0, lastError: '' };
    this.pending.set(target, job);
    this.ready.push(job);
    if (this.pending.size > this.maxQueue) this.dropOldest();
  }

  private dropOldest(): void {
    const oldest = this.pending.values().next().value as Job | undefined;
    if (!oldest) return;
    this.pending.delete(oldest.target);
    if (oldest.timer) clearTimeout(oldest.timer);
    this.ready = this.ready.filter((job) => job !== oldest);
    this.counts.dropped++;
    this.fail(oldest, 'dropped', oldest.lastError || 'queue full');
  }

  private pump(): void {
    while (!this.closed && this.inFlight.size < this.concurrency) {
      // One request per target at a time: a hung target holds one worker, never all of them.
      const index = this.ready.findIndex((job) => !this.busy.has(job.target));
      if (index < 0) return;
      const [job] = this.ready.splice(index, 1);
      this.pending.delete(job.target);
      this.busy.add(job.target);
      const run = this.deliver(job).catch((error: unknown) => {
        log.error('invalidation delivery crashed', { error: String(error) });
      });
      this.inFlight.add(run);
      void run.finally(() => {
        this.inFlight.delete(run);
        this.busy.delete(job.target);
        this.pump();
      });
    }
  }

  private async deliver(job: Job): Promise<void> {
    job.attempts++;
    this.counts.attempts++;
    const outcome = await this.post(job.target, job.change);
    if (this.closed) return;
    if (outcome.ok) {
      this.counts.delivered++;
      safely(() => this.options.onDelivered?.(job.target, job.change));
      return;
    }
    job.lastError = outcome.error;
    // A newer notification for this target is already waiting: it supersedes this one.
    if (this.pending.has(job.target)) return;
    if (!outcome.retryable || job.attempts >= this.maxAttempts) {
      this.fail(job, 'exhausted', outcome.error);
      return;
    }
    this.pending.set(job.target, job);
    if (this.pending.size > this.maxQueue) {
      this.dropOldest();
      if (!this.pending.has(job.target)) return;
    }
    const delay = this.backoffMs(job.attempts);
    safely(() => this.options.onRetry?.(job.target, job.attempts, delay));
    job.timer = setTimeout(() => {
      job.timer = undefined;
      if (this.closed || this.pending.get(job.target) !== job) return;
      this.ready.push(job);
      this.pump();
    }, delay);
    job.timer.unref();
  }

  /** Full jitter: uniform in [0, min(max, base · 2^(attempt−1))]. */
  private backoffMs(attempts: number): number {
    const ceiling = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** Math.min(attempts - 1, 30));
    return Math.round(this.random() * ceiling);
  }

  private async post(target: string, change: InvalidationChange): Promise<{ ok: boolean; retryable: boolean; error: string }> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (this.options.token) headers.authorization = `Bearer ${this.options.token}`;
    try {
      const response = await withTimeout(this.timeoutMs, this.closing.signal, (signal) =>
        fetch(target + INVALIDATE_PATH, { method: 'POST', headers, body: JSON.stringify(change), redirect: 'manual', signal }),
      );
      // Release the connection; the body (if any) is not needed.
      await response.body?.cancel().catch(() => undefined);
      if (response.status >= 200 && response.status < 300) return { ok: true, retryable: false, error: '' };
      const retryable = response.status === 408 || response.status === 429 || response.status >= 500;
      return { ok: false, retryable, error: `HTTP ${response.status}` };
    } catch (error) {
      return { ok: false, retryable: true, error: describeFetchError(error) };
    }
  }

  private fail(job: Job, reason: InvalidationFailureReason, error: string): void {
    this.counts.failed++;
    const failure: InvalidationFailure = { target: job.target, reason, change: job.change, attempts: job.attempts, error };
    log.warn('invalidation not delivered', {
      target: redactUrl(job.target),
      reason,
      attempts: job.attempts,
      error,
      policy_id: job.change.policy_id,
    });
    safely(() => this.options.onFailure?.(failure));
  }
}

function safely(fn: () => void): void {
  try {
    fn();
  } catch (error) {
    log.error('invalidation callback failed', { error: String(error) });
  }
}

function positiveInt(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 1) throw new Error(`InvalidationNotifier: ${name} must be a positive integer, got ${value}`);
  return value;
}
