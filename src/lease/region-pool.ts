/**
 * A region's units of one `budget: "global"` counter, kept in the region's store by
 * `lua/lease_pool.lua` (one script for every algorithm), so every server of the region spends from the
 * same units and decisions stay exact against them. Each operation is one script run, batched with the
 * other counter operations of the same event-loop turn.
 */
export interface PoolAnswer {
  /** spend: the cost was taken from the pool. drain: units were taken out. */
  spent: boolean;
  /** Live units after the operation (drain: the units taken out). */
  left: number;
  /**
   * spend, take: > 0 refused, until the parent may admit again: while it admits nothing (nothing is
   * refilled meanwhile), or, for a waiting decision refused, what is left of the last refill's
   * retry_after (at least 1).
   */
  retryAfterMs: number;
  /** spend: this caller holds the region's refill lock and should refill now. */
  lock: boolean;
  /** Units the region spent (or wanted and did not find) over the last measure period: the chunk rule's rate. */
  recent: number;
  /** What the parent could still admit after the last take; -1 before the first. */
  parentRemaining: number;
  /** Units that expired unspent (or were dropped) during this operation. */
  lapsed: number;
  /** The last refill could not reach the parent, within its back-off. */
  down: boolean;
  /** ms until the newest live units expire. */
  resetAfterMs: number;
  /**
   * Tag of the newest units ('' for an empty pool): their window's, or a bucket's return-by (PoolGrant).
   * take: the units taken's; drain: the tag they go back by.
   */
  tag: string;
  /** This store's clock when the script ran (epoch ms). */
  storeNow: number;
  /**
   * Units the decisions waiting for a refill want; spend, take: those the refill this answer's lock
   * starts must ask for at least.
   */
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
  refund(key: string, units: number, below?: { tag: string }): Promise<PoolAnswer>;
  peek(key: string): Promise<PoolAnswer>;
}

/** What a refill brings to the pool. */
export interface PoolGrant {
  units: number;
  /** This store's clock. */
  expiresAt: number;
  /** The window's tag, or a bucket's (the instant, by the global store's clock, the units must be back there by). */
  tag: string;
  /** The tag is a window's (units of another window lapse), not a bucket's. */
  window: boolean;
  parentRemaining: number;
  /** > 0: the parent admits no more for this long (its retry_after when it granted fewer than `asked`, or its last units); 0: it may. */
  retryAfterMs: number;
  asked: number;
}

/**
 * Where the pool script runs: the region's Redis (RedisCounterStore, lua/lease_pool.lua) or its
 * in-memory port (MemoryLeasePool, test/lease/support: tests only). `args` are the script's ARGV after `now` (absent: the store's clock).
 */
export interface LeasePoolScript {
  leasePool<T>(key: string, args: string[], parse: (reply: unknown) => T, nowMs?: number): Promise<T>;
}

/** The pool's operations as ARGV of the pool script, and its replies as PoolAnswers. */
export class RegionPool implements RegionPoolStore {
  /** `now`: tests only, an explicit time for the script instead of the store's TIME. */
  constructor(
    private readonly store: LeasePoolScript,
    private readonly now?: () => number,
  ) {}

  /**
   * spend: `cost` units if the pool holds them, all or nothing. take: up to `cost` (a process lease
   * below the region; `left` answers how many, `tag` and `resetAfterMs` theirs). Either asks for the
   * refill lock when the region should refill. `fresh`: a decision's first look (its demand counts in
   * the rate). `waitsFor`: the refill a waiting decision waits for, as its last look answered (0 on
   * the first): once that one has landed and the pool still cannot pay it, it is refused if the parent
   * admits no more now, else it waits for the next.
   */
  spend(key: string, cost: number, lockMs: number, token: string, measureMs: number, fresh = true, op: 'spend' | 'take' = 'spend', waitsFor = 0): Promise<PoolAnswer> {
    return this.run(key, [op, String(cost), String(Math.ceil(lockMs)), token, String(measureMs), fresh ? '1' : '0', String(waitsFor)]);
  }

  /**
   * Adds what a refill took from the parent, live until `expiresAt` by this store's clock, and releases
   * the lock `token` holds. `retryAfterMs` > 0: the parent admits no more for that long (`units` 0: the
   * pool refuses and does not refill meanwhile; else the waiting decisions it refuses are told so).
   */
  add(key: string, grant: PoolGrant, token: string, measureMs: number): Promise<PoolAnswer> {
    return this.run(key, [
      'add',
      String(grant.units),
      String(Math.floor(grant.expiresAt)),
      grant.tag,
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

  /**
   * Takes every live unit out (to give back), if none was spent for `idleMs` (0: whatever the use):
   * `window`, those of the newest window (older ones lapse); a bucket's, all, by the earlier tag.
   */
  drain(key: string, idleMs: number, window: boolean): Promise<PoolAnswer> {
    return this.run(key, ['drain', String(idleMs), window ? '1' : '0']);
  }

  /**
   * A decision's refund into the live units; or, with `below`, a process lease's return of units of
   * window `tag` ('' for the buckets). `left` answers how many went back.
   */
  refund(key: string, units: number, below?: { tag: string }): Promise<PoolAnswer> {
    return this.run(key, ['refund', String(units), below?.tag ?? '', below ? '1' : '0']);
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
    tag: String(reply[9] ?? ''),
    storeNow: n(10),
    waiting: n(11),
    waitsFor: n(12),
  };
}
