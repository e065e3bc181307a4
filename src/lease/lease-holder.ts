import { CounterStoreUnavailableError, LeaseWaitTimeoutError } from '../errors.js';
import type { CounterResult } from '../counters/counter-store.js';
import { chunkSize, SpendRate } from './chunk.js';
import type { CompiledLease } from '../counters/counter-spec.js';
import { leaseFailureLog } from './failures.js';
import type { ProcessUnitPool } from './process-pool.js';
import { expiredReason, waitTimeout, type LapseReason, type LeaseClock, type LeaseEvents, type LeaseParent, type MaybePromise, type Spend } from './types.js';

export interface LeaseHolderOptions {
  /** The policy's compiled lease (shape, max_units, max_hold). */
  lease: CompiledLease;
  parent: LeaseParent;
  pool: ProcessUnitPool;
  clock: LeaseClock;
  /** RL_LEASE_MAX_WAIT_MS: the longest a decision waits for a refill before it is refused. */
  maxWaitMs: number;
  events?: LeaseEvents;
}

/** A decision waiting for a refill because the pool could not pay its cost. */
interface Waiter {
  cost: number;
  since: number;
  /** Its RL_LEASE_MAX_WAIT_MS timer. */
  timer: unknown;
  resolve(result: CounterResult): void;
  reject(error: unknown): void;
}

/**
 * One counter's capacity lease at one level (CONTRACT "Capacity lease: the mechanism"): answers
 * decisions from units taken in advance from its parent, exactly as the algorithm would.
 *
 * - A decision is admitted only by spending units already taken from the parent (never over).
 * - Refill ahead: when half of the units are spent, one take (the chunk rule, chunk.ts) goes to the
 *   parent off the decision's path; one refill in flight at a time. A decision waits only when the
 *   pool cannot pay its cost; it is refused, with the parent's retry_after, when the parent granted
 *   less than asked (it can admit no more now) and the pool still cannot pay.
 * - Bounded wait (CONTRACT "Bounded wait"): a decision waits at most `maxWaitMs`, then is refused
 *   (LeaseWaitTimeoutError: reason lease_wait_timeout); the refill goes on for the next ones.
 * - Parent unreachable: decisions are answered from the units held; once they run out the take's
 *   CounterStoreUnavailableError reaches the caller (the policy's failure_mode answers), and from then
 *   on, until a take succeeds, a decision the units cannot pay fails at once instead of waiting.
 * - Letting go (`letGo`: drain, policy change, and after max_hold without use): unspent units go back,
 *   window-checked by the parent; units that missed their window lapse and are counted, by reason.
 * Clock, parent, pool and timers are injected: the simulation drives this very code.
 */
export class LeaseHolder {
  private readonly parent: LeaseParent;
  private readonly pool: ProcessUnitPool;
  private readonly clock: LeaseClock;
  private readonly events: LeaseEvents;
  private readonly maxUnits: number;
  private readonly maxHoldMs: number;
  private readonly maxWaitMs: number;
  /** Why this holder's units lapse when their spend-by comes. */
  private readonly expired: LapseReason;
  private readonly spending: SpendRate;
  private readonly waiters: Waiter[] = [];
  private refilling: Promise<void> | undefined;
  /** The parent's answer to the last take. */
  private parentRemaining = Infinity;
  private parentRetryAfterMs = 0;
  private parentResetAt = 0;
  /** The last take failed: the parent is unreachable until a take succeeds. */
  private parentDown = false;
  /** Units the pool held right after the last refill landed: refill ahead at half of it. */
  private filledTo = 0;
  private lastUsed: number;
  private idleTimer: unknown;
  private closed = false;

  constructor(options: LeaseHolderOptions) {
    this.parent = options.parent;
    this.pool = options.pool;
    this.clock = options.clock;
    this.events = options.events ?? {};
    this.maxUnits = options.lease.maxUnits;
    this.maxHoldMs = options.lease.maxHoldMs;
    this.maxWaitMs = options.maxWaitMs;
    this.expired = expiredReason(options.lease.shape);
    this.spending = new SpendRate(this.maxHoldMs);
    this.lastUsed = this.clock.now();
    // From the start: a holder that never got units (only peeks, or its parent down) is let go too.
    this.armIdleTimer();
  }

  /** True once let go: the owner makes a new holder for the next decision. */
  get isClosed(): boolean {
    return this.closed;
  }

  /**
   * A decision of `cost` units: answered at once (a CounterResult) when the pool pays it synchronously,
   * else a promise (an asynchronous pool, or a wait for a refill).
   */
  consume(cost: number): MaybePromise<CounterResult> {
    const now = this.clock.now();
    this.touch(now);
    const spend = this.pool.spend(cost, now);
    if (spend instanceof Promise) return spend.then((s) => this.afterSpend(cost, s, now));
    return this.afterSpend(cost, spend, now);
  }

  /** Peek: the parent's peek (held units count as used there) plus this holder's unspent units. */
  async peek(): Promise<CounterResult> {
    const [parent, held] = await Promise.all([this.parent.peek(), this.pool.available(this.clock.now())]);
    if (held <= 0) return parent;
    return { allowed: true, remaining: parent.remaining + held, retryAfterMs: 0, resetAfterMs: parent.resetAfterMs };
  }

  /**
   * A decision's refund: the units join this holder's unspent units (none held: they lapse). `accepted`:
   * how many joined.
   */
  async refund(units: number): Promise<CounterResult & { accepted: number }> {
    const now = this.clock.now();
    this.touch(now);
    const accepted = await this.pool.refund(units, now);
    if (accepted < units) this.events.lapsed?.(units - accepted, this.expired);
    return { ...this.answer(true, await this.pool.available(now), 0, now), accepted };
  }

  /** Returns every unspent unit to the parent (window-checked) and closes; waits for a refill in flight. */
  async letGo(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.idleTimer !== undefined) this.clock.clearTimer(this.idleTimer);
    this.idleTimer = undefined;
    if (this.refilling) await this.refilling;
    await this.giveBackAll();
  }

  // ---------------------------------------------------------------------------------------------

  private afterSpend(cost: number, spend: Spend, now: number): MaybePromise<CounterResult> {
    if (spend.lapsed > 0) this.events.lapsed?.(spend.lapsed, this.expired);
    if (spend.spent) {
      this.spending.add(cost, now);
      if (spend.left * 2 <= this.filledTo) this.refillAhead();
      return this.answer(true, spend.left, 0, now);
    }
    return this.wait(cost, now);
  }

  private wait(cost: number, now: number): Promise<CounterResult> {
    if (this.parentDown) {
      // Known unreachable: the failure mode answers at once; one take looks whether it is back.
      this.startRefill(cost);
      return Promise.reject(new CounterStoreUnavailableError('lease parent unreachable, and this holder holds too few units'));
    }
    if (this.maxWaitMs <= 0) {
      this.startRefill(cost);
      return Promise.reject(new LeaseWaitTimeoutError(waitTimeout(this.maxWaitMs, this.maxHoldMs)));
    }
    return new Promise<CounterResult>((resolve, reject) => {
      const waiter: Waiter = { cost, since: now, timer: undefined, resolve, reject };
      waiter.timer = this.clock.setTimer(() => this.giveUpWaiting(waiter), this.maxWaitMs);
      this.waiters.push(waiter);
      this.startRefill();
    });
  }

  /** RL_LEASE_MAX_WAIT_MS passed: refused, not failed; the refill it waited for goes on. */
  private giveUpWaiting(waiter: Waiter): void {
    const at = this.waiters.indexOf(waiter);
    if (at < 0) return;
    this.waiters.splice(at, 1);
    this.events.waited?.(Math.max(0, this.clock.now() - waiter.since) / 1000);
    waiter.reject(new LeaseWaitTimeoutError(waitTimeout(this.maxWaitMs, this.maxHoldMs)));
  }

  /** A waiter leaves the queue: its timer goes. */
  private settle(waiter: Waiter): void {
    this.clock.clearTimer(waiter.timer);
  }

  private refillAhead(): void {
    if (this.refilling || this.closed) return;
    if (this.chunk() > 0) this.startRefill();
  }

  private chunk(extra = 0): number {
    let waiting = extra;
    for (const w of this.waiters) waiting += w.cost;
    return chunkSize({ recent: this.spending.total(this.clock.now()), waiting, maxUnits: this.maxUnits, parentRemaining: this.parentRemaining });
  }

  /** `extra`: the cost of a decision refused at once that the take should serve next time. */
  private startRefill(extra = 0): void {
    if (this.refilling) return;
    const n = this.chunk(extra);
    if (n <= 0) return;
    this.refilling = this.refill(n).finally(() => {
      this.refilling = undefined;
      // Decisions that arrived meanwhile and still wait: another take, sized for them.
      if (this.waiters.length > 0) this.startRefill();
    });
  }

  /** One take and what follows it; never rejects (a failure fails the waiters instead). */
  private async refill(n: number): Promise<void> {
    try {
      await this.takeAndServe(n);
    } catch (error) {
      // A process holder below a region may be told its region waited too long: slow, not down.
      if (!(error instanceof LeaseWaitTimeoutError)) {
        this.parentDown = true;
        this.events.failed?.('refill');
        leaseFailureLog.failed('refill', error);
      }
      this.failWaiters(error);
    }
  }

  private async takeAndServe(n: number): Promise<void> {
    const sentAt = this.clock.now();
    const grant = await this.parent.take(n);
    this.parentDown = false;
    this.events.refilled?.(grant.granted);
    this.parentRemaining = grant.remaining;
    this.parentRetryAfterMs = grant.retryAfterMs;
    this.parentResetAt = sentAt + grant.resetAfterMs;
    const now = this.clock.now();
    // Units whose window ended on the way (a window shorter than the round trip) lapse on arrival; the
    // waiters are then refused, not sent round again, which could go on for ever.
    const arrivedLate = grant.granted > 0 && grant.spendBy <= now;
    if (arrivedLate) this.events.lapsed?.(grant.granted, this.expired);
    else if (grant.granted > 0) {
      await this.pool.add(grant, now);
      this.armIdleTimer();
    }
    const exhausted = grant.granted < n || arrivedLate;
    await this.serveWaiters(exhausted);
    this.filledTo = await this.pool.available(this.clock.now());
    if (this.closed) await this.giveBackAll();
  }

  /** After a refill: waiters the pool can pay are admitted; when the parent is exhausted the rest are refused. */
  private async serveWaiters(exhausted: boolean): Promise<void> {
    const waiting = this.waiters.splice(0);
    for (const waiter of waiting) {
      const now = this.clock.now();
      const spend = await this.pool.spend(waiter.cost, now);
      if (spend.lapsed > 0) this.events.lapsed?.(spend.lapsed, this.expired);
      if (spend.spent || exhausted || this.closed) {
        this.settle(waiter);
        this.events.waited?.(Math.max(0, now - waiter.since) / 1000);
      }
      if (spend.spent) {
        this.spending.add(waiter.cost, now);
        waiter.resolve(this.answer(true, spend.left, 0, now));
      } else if (exhausted || this.closed) {
        waiter.resolve(this.answer(false, spend.left, Math.max(1, this.parentRetryAfterMs), now));
      } else {
        this.waiters.push(waiter);
      }
    }
  }

  private failWaiters(error: unknown): void {
    const failed =
      error instanceof CounterStoreUnavailableError || error instanceof LeaseWaitTimeoutError ? error : new CounterStoreUnavailableError('lease parent failed', error);
    for (const waiter of this.waiters.splice(0)) {
      this.settle(waiter);
      waiter.reject(failed);
    }
  }

  /** remaining = what the parent could still admit at its last answer plus what this holder holds. */
  private answer(allowed: boolean, held: number, retryAfterMs: number, now: number): CounterResult {
    const parent = Number.isFinite(this.parentRemaining) ? this.parentRemaining : 0;
    return { allowed, remaining: parent + held, retryAfterMs, resetAfterMs: Math.max(0, this.parentResetAt - now) };
  }

  private async giveBackAll(): Promise<void> {
    const drained = await this.pool.drain(this.clock.now());
    if (drained.lapsed > 0) this.events.lapsed?.(drained.lapsed, this.expired);
    if (drained.units > 0) await this.returnUnits(drained.units, drained.windowTag);
  }

  /** Gives `units` back to the parent (window-checked); those it did not take back lapsed. */
  private async returnUnits(units: number, windowTag: number | null): Promise<void> {
    try {
      const back = await this.parent.giveBack(units, windowTag);
      if (back > 0) this.events.returned?.(back);
      if (back < units) this.events.lapsed?.(units - back, this.expired);
    } catch (error) {
      // Unreachable: the units are lost (under-admission until their window ends), counted and logged.
      this.events.lapsed?.(units, 'parent_unreachable');
      this.events.failed?.('give_back');
      leaseFailureLog.failed('give_back', error);
    }
  }

  private touch(now: number): void {
    this.lastUsed = now;
  }

  /** After max_hold without use, the holder lets go (its owner drops it on `isClosed`). */
  private armIdleTimer(): void {
    if (this.idleTimer !== undefined || this.closed) return;
    const check = (): void => {
      this.idleTimer = undefined;
      if (this.closed) return;
      const idle = this.clock.now() - this.lastUsed;
      if (idle >= this.maxHoldMs && this.waiters.length === 0 && this.refilling === undefined) {
        void this.letGo().then(() => this.onIdle?.());
      } else {
        this.idleTimer = this.clock.setTimer(check, Math.max(1, this.maxHoldMs - idle));
      }
    };
    this.idleTimer = this.clock.setTimer(check, this.maxHoldMs);
  }

  /** Set by the owner: called after the holder let go by itself (idle), to forget it. */
  onIdle: (() => void) | undefined;
}
