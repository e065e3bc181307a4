import { CounterStoreUnavailableError, LeaseWaitTimeoutError } from '../errors.js';
import type { CounterResult } from '../counters/counter-store.js';
import type { CompiledLease } from '../counters/counter-spec.js';
import { DEFAULT_COMMAND_TIMEOUT_MS } from '../redis/redis-connection.js';
import { chunkSize, SpendRate } from './chunk.js';
import { leaseFailed } from './failures.js';
import { countUnits, HolderTakes, type TakeName, type UnitOwner } from './holder-takes.js';
import type { ProcessUnitPool } from './process-pool.js';
import { waitTimeout, within, type LeaseClock, type LeaseEvents, type LeaseParent } from './types.js';

/** Takes and gives whose answer was lost, each with its owner: shared by a process's holders. */
export type UnansweredTakes = HolderTakes<UnitOwner>;

export const unansweredTakes = (clock: LeaseClock): UnansweredTakes => new HolderTakes(clock, (owner) => owner);

export interface LeaseHolderOptions {
  lease: CompiledLease;
  parent: LeaseParent;
  pool: ProcessUnitPool;
  clock: LeaseClock;
  /** RL_LEASE_MAX_WAIT_MS: the longest a decision waits for a refill. */
  maxWaitMs: number;
  /** The parent's call timeout (RL_COUNTERSTORE_TIMEOUT_MS, default the store's): a named take's deadline, and letGo's longest wait. */
  takeTimeoutMs?: number;
  /** Where a parent with `reclaim` keeps the failed takes and gives (default: this holder's own). */
  takes?: UnansweredTakes;
  events?: LeaseEvents;
}

/** A decision waiting for a refill, with its RL_LEASE_MAX_WAIT_MS timer. */
type Waiter = { cost: number; since: number; timer: unknown; resolve(result: CounterResult): void; reject(error: unknown): void };

/**
 * One counter's capacity lease (docs/reference.md "Slots, leases and pools"): decisions spend only units taken
 * from the parent (never over); one take at a time goes out when half are spent (chunk.ts). A decision the
 * units cannot pay waits at most maxWaitMs, is refused once the parent admits no more, and fails at
 * once while the parent is unreachable. Takes and gives are named when the parent can reclaim them.
 */
export class LeaseHolder {
  /** Set by the owner: called when the holder lets go by itself (idle), to forget it. */
  onIdle: (() => void) | undefined;
  private readonly pool: ProcessUnitPool;
  private readonly clock: LeaseClock;
  /** Its parent, call timeout and events. */
  private readonly owner: UnitOwner;
  private readonly takes: UnansweredTakes;
  private readonly spending: SpendRate;
  private readonly waiters: Waiter[] = [];
  private refilling: Promise<void> | undefined;
  /** The parent's answer to the last take; `resetAt` by this clock. */
  private last = { remaining: Infinity, retryAfterMs: 0, resetAt: 0 };
  /** When the last take failed (-Infinity: it succeeded); until one succeeds, a decision the units cannot pay fails at once. */
  private failedAt = -Infinity;
  /** Units held right after the last refill landed: the next goes out at half of it. */
  private filledTo = 0;
  private lastUsed: number;
  private idleTimer: unknown;
  private closed = false;

  constructor(private readonly options: LeaseHolderOptions) {
    this.pool = options.pool;
    this.clock = options.clock;
    this.owner = { parent: options.parent, timeoutMs: options.takeTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS, events: options.events ?? {}, shape: options.lease.shape };
    this.takes = options.takes ?? unansweredTakes(this.clock);
    this.spending = new SpendRate(this.options.lease.maxHoldMs);
    this.lastUsed = this.clock.now();
    // From the start: a holder that never got units (only peeks, or its parent down) is let go too.
    this.armIdleTimer();
  }

  /** A decision of `cost` units: answered at once from the units held, else a promise (it waits for a refill). */
  consume(cost: number): CounterResult | Promise<CounterResult> {
    const now = this.clock.now();
    this.lastUsed = now;
    const spend = this.pool.spend(cost, now);
    countUnits(this.owner, 0, spend.lapsed);
    if (!spend.spent) return this.wait(cost, now);
    this.spending.add(cost, now);
    if (spend.left * 2 <= this.filledTo && !this.closed) this.startRefill();
    return this.answer(true, spend.left, 0, now);
  }

  /** Peek: the parent's peek (held units count as used there) plus this holder's unspent units. */
  async peek(): Promise<CounterResult> {
    const parent = await this.owner.parent.peek();
    const held = this.pool.available(this.clock.now());
    return held <= 0 ? parent : { allowed: true, remaining: parent.remaining + held, retryAfterMs: 0, resetAfterMs: parent.resetAfterMs };
  }

  /** A decision's refund joins the unspent units (none held: it lapses); `accepted`: how many joined. */
  async refund(units: number): Promise<CounterResult & { accepted: number }> {
    const now = this.clock.now();
    this.lastUsed = now;
    const { accepted, lapsed } = this.pool.refund(units, now);
    countUnits(this.owner, 0, lapsed + units - accepted);
    return { ...this.answer(true, this.pool.available(now), 0, now), accepted };
  }

  /**
   * Gives the unspent units back and closes, waiting at most one take's timeout (drain must not hang behind
   * a partition): a refill landing later gives its units back itself, and answers arriving later still count.
   */
  async letGo(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.clock.clearTimer(this.idleTimer);
    const refilled = Promise.resolve(this.refilling).then(() => this.takes.settleAll());
    await within(this.clock, this.owner.timeoutMs, () => Promise.all([this.giveBackAll(), refilled]));
  }

  private wait(cost: number, now: number): Promise<CounterResult> {
    const down = this.failedAt > -Infinity;
    if (down || this.options.maxWaitMs <= 0) {
      // Answered at once (the failure mode, or a wait refusal); a take sized for this cost goes out for the next.
      this.startRefill(cost);
      return Promise.reject(down ? new CounterStoreUnavailableError('lease parent unreachable, and this holder holds too few units') : this.waitRefusal());
    }
    return new Promise<CounterResult>((resolve, reject) => {
      const waiter: Waiter = { cost, since: now, timer: undefined, resolve, reject };
      // RL_LEASE_MAX_WAIT_MS passed: refused, not failed (a slow parent is not a failed one); the refill goes on.
      waiter.timer = this.clock.setTimer(() => {
        if (!this.waiters.includes(waiter)) return;
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        this.owner.events.waited?.(Math.max(0, this.clock.now() - waiter.since) / 1000);
        reject(this.waitRefusal());
      }, this.options.maxWaitMs);
      this.waiters.push(waiter);
      this.startRefill();
    });
  }

  private waitRefusal(): LeaseWaitTimeoutError {
    return new LeaseWaitTimeoutError(waitTimeout(this.options.maxWaitMs, this.options.lease.maxHoldMs));
  }

  /** One take at a time, by the chunk rule; `extra`: the cost of a decision refused now that it should serve next. */
  private startRefill(extra = 0): void {
    // While the parent is down, one take per take timeout looks whether it is back (each is kept for a reclaim).
    if (this.refilling || this.clock.now() - this.failedAt < this.owner.timeoutMs) return;
    let waiting = extra;
    for (const w of this.waiters) waiting += w.cost;
    const n = chunkSize({ recent: this.spending.total(this.clock.now()), waiting, maxUnits: this.options.lease.maxUnits, parentRemaining: this.last.remaining });
    if (n <= 0) return;
    this.refilling = this.refill(n).finally(() => {
      this.refilling = undefined;
      // Decisions that still wait (they came meanwhile, or the take came late): a take sized for them.
      if (this.waiters.length > 0) this.startRefill();
    });
  }

  /** One take and what follows it; never rejects (a failure fails the waiters). */
  private async refill(n: number): Promise<void> {
    const named = this.owner.parent.reclaim ? this.takes.name(this.owner.timeoutMs) : undefined;
    const sentAt = this.clock.now();
    const grant = await this.owner.parent.take(n, named).catch((error: unknown) => this.takeFailed(error, named));
    if (!grant) return;
    this.failedAt = -Infinity;
    if (named) this.takes.answered(grant.parentNow);
    const now = this.clock.now();
    // Past its deadline the take took nothing and says nothing of the parent's units: not a short parent.
    const late = grant.outcome === 'late';
    if (!late) {
      this.owner.events.refilled?.(grant.granted);
      this.last = { remaining: grant.remaining, retryAfterMs: grant.retryAfterMs, resetAt: sentAt + grant.resetAfterMs };
    }
    // Units whose window ended on the way lapse; the waiters are then refused, not sent round again for ever.
    const expired = grant.granted > 0 && grant.spendBy <= now;
    if (expired) countUnits(this.owner, 0, grant.granted);
    this.pool.add(grant, now); // keeps only live units
    this.armIdleTimer();
    // Exhausted by the parent's word: a region's partial take only means its pool is being refilled.
    this.serveWaiters(!late && (expired || grant.retryAfterMs > 0));
    this.filledTo = this.pool.available(now);
    if (this.closed) await this.giveBackAll();
  }

  private takeFailed(error: unknown, named: TakeName | undefined): void {
    // The take may still run at the parent: reclaimed once it answers again.
    if (named) this.takes.failed(named, this.owner);
    // A region parent may answer that it waited too long: slow, not down.
    if (!(error instanceof LeaseWaitTimeoutError)) {
      this.failedAt = this.clock.now();
      leaseFailed(this.owner, 'refill', error);
    }
    const failed = error instanceof CounterStoreUnavailableError || error instanceof LeaseWaitTimeoutError ? error : new CounterStoreUnavailableError('lease parent failed', error);
    for (const waiter of this.waiters.splice(0)) {
      this.clock.clearTimer(waiter.timer);
      waiter.reject(failed);
    }
  }

  /** Admits the waiters the units pay; with the parent exhausted (or the holder closed) refuses the rest. */
  private serveWaiters(exhausted: boolean): void {
    const now = this.clock.now();
    for (const waiter of this.waiters.splice(0)) {
      const spend = this.pool.spend(waiter.cost, now);
      countUnits(this.owner, 0, spend.lapsed);
      if (!spend.spent && !exhausted && !this.closed) this.waiters.push(waiter);
      else {
        this.clock.clearTimer(waiter.timer);
        this.owner.events.waited?.(Math.max(0, now - waiter.since) / 1000);
        if (spend.spent) this.spending.add(waiter.cost, now);
        waiter.resolve(this.answer(spend.spent, spend.left, spend.spent ? 0 : Math.max(1, this.last.retryAfterMs), now));
      }
    }
  }

  /** remaining = what the parent could still admit at its last answer plus what this holder holds. */
  private answer(allowed: boolean, held: number, retryAfterMs: number, now: number): CounterResult {
    const parent = Number.isFinite(this.last.remaining) ? this.last.remaining : 0;
    return { allowed, remaining: parent + held, retryAfterMs, resetAfterMs: Math.max(0, this.last.resetAt - now) };
  }

  /** Gives the unspent units back (window-checked by the parent): counted as they went, or once settled. */
  private async giveBackAll(): Promise<void> {
    const drained = this.pool.drain(this.clock.now());
    countUnits(this.owner, 0, drained.lapsed);
    if (drained.units > 0) await this.takes.give(this.owner, drained.units, drained.windowTag);
  }

  /** After max_hold without use, the holder lets go (its owner forgets it first: the next decision gets a new one). */
  private armIdleTimer(): void {
    if (this.idleTimer !== undefined || this.closed) return;
    const { maxHoldMs } = this.options.lease;
    const check = (): void => {
      this.idleTimer = undefined;
      if (this.closed) return;
      const idle = this.clock.now() - this.lastUsed;
      if (idle < maxHoldMs || this.waiters.length > 0 || this.refilling) {
        this.idleTimer = this.clock.setTimer(check, Math.max(1, maxHoldMs - idle));
      } else {
        this.onIdle?.();
        void this.letGo();
      }
    };
    this.idleTimer = this.clock.setTimer(check, maxHoldMs);
  }
}

