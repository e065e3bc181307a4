import type { StoreMs } from '../counters/counter-store.js';
import type { ParsedReply } from '../redis/script-protocol.js';
import { REGION_POOL } from './region-pool-protocol.js';

/**
 * The script's reply (region-pool-protocol.ts): `left` the live units, or take's units taken, drain's taken out, refund's taken back;
 * `tag` null for none; `refill` the id of the refill the lock was given for (it names the take), `lock` whether there is one,
 * `stale` the id of the refill whose expired lock this took over.
 */
export type PoolAnswer = ParsedReply<typeof REGION_POOL.reply> & { storeNow: StoreMs; lock: boolean };

/** A spend of `cost` units, all or nothing, or (`op` take) a take of up to `cost`. */
export interface PoolSpend {
  cost: number;
  lockMs: number;
  /** This server's id, the refill lock's owner. */
  token: string;
  measureMs: number;
  /** A decision's first look (default): its demand counts once. */
  fresh?: boolean;
  op?: 'spend' | 'take';
  /** The refill this decision waits for, as the last answer said (0, default: none). */
  waitsFor?: number;
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
export interface RegionPoolScript {
  runRegionPool<T>(key: string, args: string[], parse: (reply: unknown) => T, nowMs?: number): Promise<T>;
}

/**
 * A region's units of one `budget: "global"` counter, kept in the region's store by `lua/region_pool.lua`
 * (its header documents every operation and reply field), so every server of the region spends from the
 * same units. `now`: tests only, an explicit time instead of the store's TIME.
 */
export class RegionPool {
  constructor(private readonly store: RegionPoolScript, private readonly now?: () => number) {}

  /** spend: `cost` units, all or nothing; take: up to `cost`. */
  spend(key: string, s: PoolSpend): Promise<PoolAnswer> {
    const args = { cost: s.cost, lockMs: Math.ceil(s.lockMs), token: s.token, measureMs: s.measureMs, fresh: s.fresh ?? true, waitsFor: s.waitsFor ?? 0 };
    return this.run(key, REGION_POOL.argv(s.op ?? 'spend', args));
  }

  /** Adds a refill's units and releases its lock; `spent` false: refused, its lock was taken over (its take is reclaimed). */
  add(key: string, grant: PoolGrant, refill: string, measureMs: number): Promise<PoolAnswer> {
    const { units, parentRemaining, asked, window } = grant;
    const args = { units, expiresAt: Math.floor(grant.expiresAt), tag: grant.tag, parentRemaining, refill, retryAfterMs: Math.ceil(grant.retryAfterMs), asked, measureMs, window };
    return this.run(key, REGION_POOL.argv('add', args));
  }

  /** A refill could not reach the parent: releases the lock; for `downMs` decisions that do not fit fail at once. */
  fail(key: string, refill: string, downMs: number): Promise<PoolAnswer> {
    return this.run(key, REGION_POOL.argv('fail', { refill, downMs: Math.ceil(downMs) }));
  }

  /** Takes every live unit out if none was spent for `idleMs` (0: now); `window`: older windows' units lapse. */
  drain(key: string, idleMs: number, window: boolean): Promise<PoolAnswer> {
    return this.run(key, REGION_POOL.argv('drain', { idleMs, window }));
  }

  /** A decision's refund; with `below`, a process lease's return into units of that tag only. */
  refund(key: string, units: number, below?: { tag: number | null }): Promise<PoolAnswer> {
    return this.run(key, REGION_POOL.argv('refund', { units, tag: below ? below.tag : null, below: below !== undefined }));
  }

  peek(key: string): Promise<PoolAnswer> {
    return this.run(key, REGION_POOL.argv('peek', {}));
  }

  private run(key: string, args: string[]): Promise<PoolAnswer> {
    return this.store.runRegionPool(key, args, parsePoolReply, this.now?.());
  }
}

/** One parse per decision: the protocol's object, and `lock` always set after it, so every answer has one shape (BENCHMARKS.md, scenario 13). */
function parsePoolReply(reply: unknown): PoolAnswer {
  const answer = REGION_POOL.parse(reply) as PoolAnswer;
  answer.lock = answer.refill !== undefined;
  return answer;
}
