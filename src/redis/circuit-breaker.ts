/**
 * A small consecutive-failure circuit breaker, so a dead or hung counter store costs microseconds per
 * decision instead of a timeout per decision.
 *
 *   closed ──(failureThreshold consecutive failures)──► open
 *   open ──(coolDownMs elapsed, next request)──► half_open: that one request is the trial
 *   half_open ──trial succeeds──► closed      half_open ──trial fails──► open (a new cool-down)
 *
 * While open, and while a half-open trial is in flight, `tryAcquire()` returns false and the caller
 * fails at once. A trial that never reports back (it should: every call is bounded by a timeout) does
 * not wedge the breaker: after another cool-down a new trial is let through.
 */

export type BreakerState = 'closed' | 'open' | 'half_open';

export interface CircuitBreakerOptions {
  /** Consecutive failures that open the breaker (default 5). */
  failureThreshold?: number;
  /** How long it stays open before a trial request is let through, ms (default 1000). */
  coolDownMs?: number;
  /** Monotonic clock in ms; tests inject their own (default performance.now). */
  now?: () => number;
  /** Called on every state change. */
  onStateChange?: (to: BreakerState, from: BreakerState) => void;
}

export class CircuitBreaker {
  readonly failureThreshold: number;
  readonly coolDownMs: number;
  private readonly now: () => number;
  private readonly onStateChange?: (to: BreakerState, from: BreakerState) => void;
  private current: BreakerState = 'closed';
  private failures = 0;
  /** When it opened (open) or when the trial started (half_open). */
  private since = 0;

  constructor(options: CircuitBreakerOptions = {}) {
    this.failureThreshold = options.failureThreshold ?? 5;
    this.coolDownMs = options.coolDownMs ?? 1000;
    if (!Number.isInteger(this.failureThreshold) || this.failureThreshold < 1) {
      throw new Error(`CircuitBreaker: failureThreshold must be a positive integer, got ${this.failureThreshold}`);
    }
    if (!(this.coolDownMs >= 0) || !Number.isFinite(this.coolDownMs)) {
      throw new Error(`CircuitBreaker: coolDownMs must be a finite number >= 0, got ${this.coolDownMs}`);
    }
    this.now = options.now ?? (() => performance.now());
    this.onStateChange = options.onStateChange;
  }

  /** The state as of now (an open breaker whose cool-down has passed reports half_open). */
  get state(): BreakerState {
    if (this.current === 'open' && this.now() - this.since >= this.coolDownMs) return 'half_open';
    return this.current;
  }

  /** Consecutive failures counted so far (reset by a success). */
  get consecutiveFailures(): number {
    return this.failures;
  }

  /**
   * May a request go to the backend now? Closed: yes. Open: no, until the cool-down has passed; then
   * this request becomes the half-open trial. Half-open: no while the trial is in flight.
   */
  tryAcquire(): boolean {
    if (this.current === 'closed') return true;
    const now = this.now();
    if (now - this.since < this.coolDownMs) return false;
    // Cool-down over (open), or a trial that has not reported for a whole cool-down (half_open).
    this.since = now;
    this.transition('half_open');
    return true;
  }

  /** The backend answered. */
  recordSuccess(): void {
    this.failures = 0;
    if (this.current !== 'closed') this.transition('closed');
  }

  /** The backend failed (error, timeout, not connected). */
  recordFailure(): void {
    this.failures++;
    if (this.current === 'half_open' || (this.current === 'closed' && this.failures >= this.failureThreshold)) {
      this.since = this.now();
      this.transition('open');
    }
  }

  /** Back to closed with no failures counted (tests, or an operator action). */
  reset(): void {
    this.failures = 0;
    if (this.current !== 'closed') this.transition('closed');
  }

  private transition(to: BreakerState): void {
    const from = this.current;
    if (from === to) return;
    this.current = to;
    this.onStateChange?.(to, from);
  }
}
