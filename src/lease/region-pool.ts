import type { StoreMs } from '../counters/counter-store.js';

/**
 * A region's units of one `budget: "global"` counter, kept in the region's store by
 * `lua/lease_pool.lua` (its header documents each operation), so every server of the region spends
 * from the same units and decisions stay exact against them.
 */
export interface PoolAnswer {
  /** spend: the cost was taken. drain: units were taken out. */
  spent: boolean;
  /** Live units after the operation; take: the units taken; drain: taken out; refund: taken back. */
  left: number;
  /** spend, take: > 0 refused, until the parent may admit again. */
  retryAfterMs: number;
  /** This caller holds the region's refill lock: it refills now. */
  lock: boolean;
  /** Units the region spent or wanted over the last measure period: the chunk rule's rate. */
  recent: number;
  /** What the parent could still admit after the last take; -1 before the first. */
  parentRemaining: number;
  lapsed: number;
  /** The last refill could not reach the parent, within its back-off. */
  down: boolean;
  /** ms until the newest live units expire (take: the units taken). */
  resetAfterMs: number;
  /** The newest units' tag (take: the units taken's; drain: what they go back by); null for none. */
  tag: number | null;
  storeNow: StoreMs;
  /** Units the decisions waiting for a refill want: what the refill this answer's lock starts asks for at least. */
  waiting: number;
  /** spend, take: the refill this decision now waits for (pass it with its next look); 0: it does not wait. */
  waitsFor: number;
}

/** The pool's key: beside the counter's keys, in the same hash slot (its `{tag}`). */
export function poolKey(counterKey: string): string {
  return `${counterKey}:pool`;
}

/** A region pool's operations (RegionCounterStore's view of the region's store); see RegionPool. */
export interface RegionPoolStore {
  spend(key: string, cost: number, lockMs: number, token: string, measureMs: number, fresh?: boolean, op?: 'spend' | 'take', waitsFor?: number): Promise<PoolAnswer>;
  add(key: string, grant: PoolGrant, token: string, measureMs: number): Promise<PoolAnswer>;
  fail(key: string, token: string, downMs: number): Promise<PoolAnswer>;
  drain(key: string, idleMs: number, window: boolean): Promise<PoolAnswer>;
  refund(key: string, units: number, below?: { tag: number | null }): Promise<PoolAnswer>;
  peek(key: string): Promise<PoolAnswer>;
}

/** What a refill brings to the pool. */
export interface PoolGrant {
  units: number;
  /** By the region store's clock. */
  expiresAt: StoreMs;
  /** The grant's tag (Grant.windowTag). */
  tag: number;
  /** The tag is a window's (units of another window lapse), not a bucket's. */
  window: boolean;
  parentRemaining: number;
  /** > 0: the parent admits no more for this long; 0: it may. */
  retryAfterMs: number;
  asked: number;
}

/** Where the pool script runs: the region's Redis, or its in-memory port (tests). `args` follow ARGV[1], `now`. */
export interface LeasePoolScript {
  leasePool<T>(key: string, args: string[], parse: (reply: unknown) => T, nowMs?: number): Promise<T>;
}

/** The script's tags are decimal strings, '' for none (parsePoolReply reads them back). */
function tagArg(tag: number | null): string {
  return tag === null ? '' : String(tag);
}

/** The pool's operations as ARGV of the pool script, and its replies as PoolAnswers. */
export class RegionPool implements RegionPoolStore {
  /** `now`: tests only, an explicit time instead of the store's TIME. */
  constructor(
    private readonly store: LeasePoolScript,
    private readonly now?: () => number,
  ) {}

  /**
   * spend: `cost` units, all or nothing; take: up to `cost` (a process lease below). `fresh`: a
   * decision's first look (its demand counts once). `waitsFor`: as its last look answered.
   */
  spend(key: string, cost: number, lockMs: number, token: string, measureMs: number, fresh = true, op: 'spend' | 'take' = 'spend', waitsFor = 0): Promise<PoolAnswer> {
    return this.run(key, [op, String(cost), String(Math.ceil(lockMs)), token, String(measureMs), fresh ? '1' : '0', String(waitsFor)]);
  }

  /** Adds a refill's units and releases the lock `token` holds. */
  add(key: string, grant: PoolGrant, token: string, measureMs: number): Promise<PoolAnswer> {
    return this.run(key, [
      'add',
      String(grant.units),
      String(Math.floor(grant.expiresAt)),
      tagArg(grant.tag),
      String(grant.parentRemaining),
      token,
      String(Math.ceil(grant.retryAfterMs)),
      String(grant.asked),
      String(measureMs),
      grant.window ? '1' : '0',
    ]);
  }

  /** A refill could not reach the parent: releases the lock; for `downMs` decisions that do not fit fail at once. */
  fail(key: string, token: string, downMs: number): Promise<PoolAnswer> {
    return this.run(key, ['fail', token, String(Math.ceil(downMs))]);
  }

  /** Takes every live unit out if none was spent for `idleMs` (0: now); `window`: older windows' units lapse. */
  drain(key: string, idleMs: number, window: boolean): Promise<PoolAnswer> {
    return this.run(key, ['drain', String(idleMs), window ? '1' : '0']);
  }

  /** A decision's refund; with `below`, a process lease's return into units of that tag only. */
  refund(key: string, units: number, below?: { tag: number | null }): Promise<PoolAnswer> {
    return this.run(key, ['refund', String(units), below ? tagArg(below.tag) : '', below ? '1' : '0']);
  }

  peek(key: string): Promise<PoolAnswer> {
    return this.run(key, ['peek']);
  }

  private run(key: string, args: string[]): Promise<PoolAnswer> {
    return this.store.leasePool(key, args, parsePoolReply, this.now?.());
  }
}

function parsePoolReply(reply: unknown): PoolAnswer {
  if (!Array.isArray(reply) || reply.length !== 13) throw new Error(`unexpected lease_pool reply ${JSON.stringify(reply)}`);
  const n = (i: number) => {
    const value = Number(reply[i]);
    if (!Number.isFinite(value)) throw new Error(`unexpected number ${JSON.stringify(reply[i])} in lease_pool reply`);
    return value;
  };
  return {
    spent: n(0) === 1,
    left: n(1),
    retryAfterMs: n(2),
    lock: n(3) === 1,
    recent: n(4),
    parentRemaining: n(5),
    lapsed: n(6),
    down: n(7) === 1,
    resetAfterMs: n(8),
    tag: reply[9] === '' || reply[9] == null ? null : n(9),
    storeNow: n(10),
    waiting: n(11),
    waitsFor: n(12),
  };
}
