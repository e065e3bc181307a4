/**
 * Consecutive-failure circuit breaker, so a dead service costs microseconds per call instead of a
 * timeout per call.
 *
 *   closed ──(failureThreshold consecutive failures)──► open
 *   open ──(coolDownMs elapsed, next call)──► half-open: that one call is the trial
 *   trial succeeds ──► closed          trial fails ──► open again (a new cool-down)
 *
 * A trial that never reports back does not wedge it: after another cool-down a new trial goes.
 */
export interface CircuitBreakerOptions {
  /** Consecutive failures that open the circuit (default 3). */
  failureThreshold?: number;
  /** How long it stays open before one trial call is let through, ms (default 1000). */
  coolDownMs?: number;
}

export class CircuitBreaker {
  private readonly threshold: number;
  private readonly coolDownMs: number;
  private failures = 0;
  private open = false;
  /** When the circuit opened, or when the current trial started. */
  private since = 0;

  constructor(options: CircuitBreakerOptions = {}, private readonly now: () => number = () => performance.now()) {
    this.threshold = options.failureThreshold ?? 3;
    this.coolDownMs = options.coolDownMs ?? 1000;
    if (!Number.isInteger(this.threshold) || this.threshold < 1) {
      throw new TypeError(`breaker.failureThreshold: must be a positive integer, got ${this.threshold}`);
    }
    if (!Number.isFinite(this.coolDownMs) || this.coolDownMs < 0) {
      throw new TypeError(`breaker.coolDownMs: must be a finite number >= 0, got ${this.coolDownMs}`);
    }
  }

  get isOpen(): boolean {
    return this.open;
  }

  /** May a call go to the service now? While open, only one trial per cool-down. */
  tryAcquire(): boolean {
    if (!this.open) return true;
    const now = this.now();
    if (now - this.since < this.coolDownMs) return false;
    this.since = now;
    return true;
  }

  recordSuccess(): void {
    this.failures = 0;
    this.open = false;
  }

  recordFailure(): void {
    this.failures++;
    if (this.open || this.failures >= this.threshold) {
      this.open = true;
      this.since = this.now();
    }
  }
}
