import type { StoreMs } from '../counters/counter-store.js';

/**
 * The script's reply: `left` the live units, or take's units taken, drain's taken out, refund's taken back; `tag` null for none;
 * `refill` the id of the refill the lock was given for (it names the take), `stale` that of the one whose expired lock this took over.
 */
export type PoolAnswer = ReturnType<typeof parsePoolReply>;

/** The pool's key: beside the counter's keys, in the same hash slot (its `{tag}`). */
export function poolKey(counterKey: string): string {
  return `${counterKey}:pool`;
}

/** A region pool's operations, as RegionCounterStore (and the simulation's observer) sees them. */
export type RegionPoolStore = Pick<RegionPool, 'spend' | 'add' | 'fail' | 'drain' | 'refund' | 'peek'>;

/** What a refill brings to the pool. */
export interface PoolGrant {
  units: number;
  expiresAt: StoreMs;
  tag: number;
  /** The tag is a window's (units of another window lapse), not a bucket's. */
  window: boolean;
  parentRemaining: number;
  /** > 0: the parent admits no more for this long. */
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

/**
 * A region's units of one `budget: "global"` counter, kept in the region's store by `lua/lease_pool.lua`
 * (its header documents every operation and reply field), so every server of the region spends from the
 * same units. `now`: tests only, an explicit time instead of the store's TIME.
 */
export class RegionPool {
  constructor(private readonly store: LeasePoolScript, private readonly now?: () => number) {}

  /** spend: `cost` units, all or nothing; take: up to `cost`. `fresh`: a decision's first look (its demand counts once). */
  spend(
    key: string, cost: number, lockMs: number, token: string, measureMs: number, fresh = true, op: 'spend' | 'take' = 'spend', waitsFor = 0,
  ): Promise<PoolAnswer> {
    return this.run(key, [op, String(cost), String(Math.ceil(lockMs)), token, String(measureMs), fresh ? '1' : '0', String(waitsFor)]);
  }

  /** Adds a refill's units and releases its lock; `spent` false: refused, its lock was taken over (its take is reclaimed). */
  add(key: string, grant: PoolGrant, refill: string, measureMs: number): Promise<PoolAnswer> {
    const { units, expiresAt, tag, parentRemaining, retryAfterMs, asked, window } = grant;
    const args = [String(units), String(Math.floor(expiresAt)), tagArg(tag), String(parentRemaining), refill, String(Math.ceil(retryAfterMs))];
    return this.run(key, ['add', ...args, String(asked), String(measureMs), window ? '1' : '0']);
  }

  /** A refill could not reach the parent: releases the lock; for `downMs` decisions that do not fit fail at once. */
  fail(key: string, refill: string, downMs: number): Promise<PoolAnswer> {
    return this.run(key, ['fail', refill, String(Math.ceil(downMs))]);
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

function parsePoolReply(reply: unknown) {
  if (!Array.isArray(reply) || reply.length < 13 || reply.length > 14) throw new Error(`unexpected lease_pool reply ${JSON.stringify(reply)}`);
  const n = (i: number) => {
    const value = Number(reply[i]);
    if (!Number.isFinite(value)) throw new Error(`unexpected number ${JSON.stringify(reply[i])} in lease_pool reply`);
    return value;
  };
  // Field by field into one literal: this runs once per decision, and a spread or a destructured slice is slow here (BENCHMARKS.md, scenario 13).
  // reply[3]: the id of the refill the lock was given for, or 0.
  const refill = typeof reply[3] === 'string' ? (reply[3] as string) : undefined;
  return {
    spent: n(0) === 1,
    left: n(1),
    retryAfterMs: n(2),
    lock: refill !== undefined,
    recent: n(4),
    parentRemaining: n(5),
    lapsed: n(6),
    down: n(7) === 1,
    resetAfterMs: n(8),
    tag: reply[9] === '' || reply[9] == null ? null : n(9),
    storeNow: n(10) as StoreMs,
    waiting: n(11),
    waitsFor: n(12),
    refill,
    stale: typeof reply[13] === 'string' ? (reply[13] as string) : undefined,
  };
}
