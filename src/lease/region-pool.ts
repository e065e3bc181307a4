import type { StoreMs } from '../counters/counter-store.js';

/**
 * A region's units of one `budget: "global"` counter, kept in the region's store by
 * `lua/lease_pool.lua` (its header documents every operation and reply field), so every server of the
 * region spends from the same units and decisions stay exact against them.
 */
export interface PoolAnswer {
  spent: boolean;
  /** Live units after the operation; take: the units taken; drain: taken out; refund: taken back. */
  left: number;
  /** spend, take: > 0 refused, until the parent may admit again. */
  retryAfterMs: number;
  /** This caller holds the region's refill lock: it refills now. */
  lock: boolean;
  recent: number;
  /** -1 before the first take. */
  parentRemaining: number;
  lapsed: number;
  down: boolean;
  resetAfterMs: number;
  /** The newest units' tag (take: the units taken's; drain: what they go back by); null for none. */
  tag: number | null;
  storeNow: StoreMs;
  waiting: number;
  /** spend, take: the refill this decision now waits for (pass it with its next look); 0: it does not wait. */
  waitsFor: number;
}

/** The pool's key: beside the counter's keys, in the same hash slot (its `{tag}`). */
export function poolKey(counterKey: string): string {
  return `${counterKey}:pool`;
}

/** A region pool's operations, as RegionCounterStore (and the simulation's observer) sees them. */
export type RegionPoolStore = Pick<RegionPool, 'spend' | 'add' | 'fail' | 'drain' | 'refund' | 'peek'>;

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
export class RegionPool {
  /** `now`: tests only, an explicit time instead of the store's TIME. */
  constructor(
    private readonly store: LeasePoolScript,
    private readonly now?: () => number,
  ) {}

  /**
   * spend: `cost` units, all or nothing; take: up to `cost` (a process lease below). `fresh`: a
   * decision's first look (its demand counts once). `waitsFor`: as its last look answered.
   */
  spend(
    key: string, cost: number, lockMs: number, token: string, measureMs: number, fresh = true, op: 'spend' | 'take' = 'spend', waitsFor = 0,
  ): Promise<PoolAnswer> {
    return this.run(key, [op, String(cost), String(Math.ceil(lockMs)), token, String(measureMs), fresh ? '1' : '0', String(waitsFor)]);
  }

  /** Adds a refill's units and releases the lock `token` holds. */
  add(key: string, grant: PoolGrant, token: string, measureMs: number): Promise<PoolAnswer> {
    const { units, expiresAt, tag, parentRemaining, retryAfterMs, asked, window } = grant;
    const args = [String(units), String(Math.floor(expiresAt)), tagArg(tag), String(parentRemaining), token, String(Math.ceil(retryAfterMs))];
    return this.run(key, ['add', ...args, String(asked), String(measureMs), window ? '1' : '0']);
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
  const [spent, left, retryAfterMs, lock, recent, parentRemaining, lapsed, down, resetAfterMs] = reply.slice(0, 9).map((_, i) => n(i));
  const tag = reply[9] === '' || reply[9] == null ? null : n(9);
  const flags = { spent: spent === 1, lock: lock === 1, down: down === 1 };
  return { ...flags, left, retryAfterMs, recent, parentRemaining, lapsed, resetAfterMs, tag, storeNow: n(10), waiting: n(11), waitsFor: n(12) };
}
