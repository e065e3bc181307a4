import type { WireReply } from '../../../src/redis/script-protocol.js';
import { LEASE_POOL } from '../../../src/regions/lease-pool-protocol.js';
import type { RegionPoolScript } from '../../../src/regions/region-pool.js';

/** The script's reply by name, as it builds it (lease-pool-protocol.ts). */
type PoolReply = WireReply<typeof LEASE_POOL.reply>;

/**
 * The in-memory port of `lua/lease_pool.lua`: region pools kept in this process, on a clock of their own
 * (the clock of the "region store" they stand for), for the lease simulation
 * (test/regions/simulation.property.test.ts), where several RegionCounterStores share one. A line-by-line
 * port (the same steps in the same order, so the numbers are the same; change both together), proven
 * identical to the script by test/regions/region-pool-parity.property.test.ts: every answer, the hash the
 * script leaves, and when its key expires.
 */

/** As the script: made or last refilled, a pool's key lives this long past its newest live units' expiry (none: past now). */
const POOL_TTL_MS = 600_000;

/** The pool hash (lua/lease_pool.lua, KEYS[1]): the tags and the lock's owner are strings. */
export interface PoolFields {
  a_u: number;
  a_e: number;
  a_t: string;
  a_s: number;
  b_u: number;
  b_e: number;
  b_t: string;
  b_s: number;
  lk: string;
  le: number;
  pr: number;
  lc: number;
  du: number;
  dd: number;
  rw: number;
  rs: number;
  rp: number;
  la: number;
  ln: number;
  an: number;
  wd: number;
  lw: number;
  sh: number;
  su: number;
}

const POOL_FIELDS = ['a_u', 'a_e', 'a_t', 'a_s', 'b_u', 'b_e', 'b_t', 'b_s', 'lk', 'le', 'pr', 'lc', 'du', 'dd', 'rw', 'rs', 'rp', 'la', 'ln', 'an', 'wd', 'lw', 'sh', 'su'] as const;

/** A pool as its store holds it: the hash, and when the key expires (this store's clock). */
export interface StoredPool {
  fields: PoolFields;
  expireAt: number;
}

type Generation = 'a' | 'b';
const GENERATIONS: readonly Generation[] = ['a', 'b'];

/** As the script's `earlier_tag`: of two bucket tags (instants), the earlier; '' if either is unknown. */
function earlierTag(x: string, y: string): string {
  if (x === '' || y === '') return '';
  return Number(y) < Number(x) ? y : x;
}

export class MemoryRegionPool implements RegionPoolScript {
  private readonly pools = new Map<string, StoredPool>();

  /** `clock`: this store's clock in epoch ms (what the script's TIME reads). */
  constructor(private readonly clock: () => number) {}

  runRegionPool<T>(key: string, args: string[], parse: (reply: unknown) => T, nowMs?: number): Promise<T> {
    try {
      return Promise.resolve(parse(LEASE_POOL.encodeReply(this.run(key, nowMs ?? this.clock(), args))));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** The pool as the last operation left it (a copy), expired or not; undefined if never written. */
  stored(key: string): StoredPool | undefined {
    const pool = this.pools.get(key);
    return pool && { fields: { ...pool.fields }, expireAt: pool.expireAt };
  }

  /** One run of the script at `now`: `argv` is its ARGV from ARGV[2] (the operation) on. */
  run(key: string, now: number, argv: readonly string[]): PoolReply {
    // The script's ARGV[i] (ARGV[1] is `now`).
    const arg = (i: number): string | undefined => argv[i - 2];
    const num = (i: number): number => Number(arg(i));
    const op = arg(2);

    let held = this.pools.get(key);
    // An expired key is gone, as in Redis (a key lives up to and including its expiry instant).
    if (held !== undefined && now > held.expireAt) {
      this.pools.delete(key);
      held = undefined;
    }
    const freshPool = held === undefined;
    const stored: PoolFields = held
      ? { ...held.fields }
      : { a_u: 0, a_e: 0, a_t: '', a_s: 0, b_u: 0, b_e: 0, b_t: '', b_s: 0, lk: '', le: 0, pr: -1, lc: 0, du: 0, dd: 0, rw: now, rs: 0, rp: 0, la: now, ln: 0, an: 0, wd: 0, lw: 0, sh: 0, su: 0 };
    const p: PoolFields = { ...stored };

    let lapsed = 0;
    const units = (g: Generation) => p[`${g}_u` as const];

    const lapse = (g: Generation): void => {
      lapsed = lapsed + units(g);
      p[`${g}_u` as const] = 0;
    };

    const settle = (): void => {
      if (p.a_u === 0 && p.b_u > 0) {
        [p.a_u, p.a_e, p.a_t, p.a_s, p.b_u, p.b_s] = [p.b_u, p.b_e, p.b_t, p.b_s, 0, 0];
      }
    };

    for (const g of GENERATIONS) {
      if (units(g) > 0 && p[`${g}_e` as const] <= now) lapse(g);
    }
    settle();

    const measure = (period: number): void => {
      if (now - p.rw >= period) {
        if (now - p.rw >= 2 * period) p.rp = 0;
        else p.rp = p.rs;
        p.rs = 0;
        p.rw = now;
      }
    };

    const left = (): number => p.a_u + p.b_u;

    const resetAfter = (): number => {
      let e = 0;
      if (p.a_u > 0) e = p.a_e;
      if (p.b_u > 0 && p.b_e > e) e = p.b_e;
      if (e === 0) return 0;
      return e - now;
    };

    const save = (refresh = false): void => {
      const changed = freshPool || POOL_FIELDS.some((f) => p[f] !== stored[f]);
      const expires = refresh || freshPool;
      if (!changed && !expires) return;
      const expireAt = expires ? now + Math.max(1, Math.ceil(now + resetAfter() + POOL_TTL_MS - now)) : held!.expireAt;
      this.pools.set(key, { fields: { ...p }, expireAt });
    };

    const newestTag = (): string => {
      if (p.b_u > 0) return p.b_t;
      if (p.a_u > 0) return p.a_t;
      return '';
    };

    const refillId = (): string => `${p.lk}:${p.ln}:${p.le}`;

    const answer = (spent: boolean, retry: number, lock: string | false, tag?: string): PoolReply => {
      let recent = p.rs;
      if (p.rp > recent) recent = p.rp;
      const refill = lock || undefined;
      return {
        spent, left: left(), retryAfterMs: retry, refill, recent, parentRemaining: p.pr, lapsed, down: p.dd > now, resetAfterMs: resetAfter(),
        tag: tag ?? newestTag(), storeNow: now, waiting: p.wd, waitsFor: 0, stale: undefined,
      };
    };

    if (op === 'spend' || op === 'take') {
      const cost = num(3);
      const lockMs = num(4);
      const token = arg(5)!;
      measure(num(6));
      let taken = 0;
      if (op === 'take') taken = Math.min(cost, left());
      else if (cost <= left()) taken = cost;
      const tag = p.a_t;
      let expires = p.a_e;
      if (taken > 0) {
        const fromA = Math.min(taken, p.a_u);
        p.a_u = p.a_u - fromA;
        p.b_u = p.b_u - (taken - fromA);
        p.a_s = p.a_s + fromA;
        p.b_s = p.b_s + (taken - fromA);
        if (taken > fromA) expires = Math.min(expires, p.b_e);
        settle();
        p.la = now;
      }
      if (taken > 0 || arg(7) === '1') p.rs = p.rs + cost;
      let retry = 0;
      if (p.du > now) retry = p.du - now;
      let waitsFor = 0;
      if (taken === 0 && retry === 0 && p.dd <= now) {
        waitsFor = num(8);
        const needs = op === 'take' ? 1 : cost;
        if (waitsFor > 0 && waitsFor <= p.an && (p.sh === 1 || (p.pr >= 0 && p.pr < needs))) {
          retry = Math.max(1, p.su - now);
          waitsFor = 0;
        } else if (waitsFor <= p.an) {
          p.wd = p.wd + needs;
          waitsFor = p.ln + 1;
        }
      }
      let lock = false;
      let stale: string | undefined;
      if ((taken < cost || left() * 2 <= p.lc) && retry === 0 && p.dd <= now && (p.lk === '' || p.le <= now)) {
        if (p.lk !== '') stale = refillId();
        p.lk = token;
        p.le = now + lockMs;
        lock = true;
      }
      const waiting = p.wd;
      if (lock) {
        p.ln = p.ln + 1;
        p.lw = p.wd;
        p.wd = 0;
      }
      save();
      const reply = answer(taken > 0, retry, lock && refillId());
      reply.waiting = waiting;
      reply.waitsFor = waitsFor;
      reply.stale = stale;
      if (op === 'take') {
        reply.left = taken;
        if (taken > 0) {
          reply.resetAfterMs = expires - now;
          reply.tag = tag;
        }
      }
      return reply;
    }

    if (op === 'add' && (p.lk === '' || arg(7) !== refillId())) {
      if (lapsed > 0) save();
      return answer(false, 0, false);
    }

    if (op === 'add') {
      const added = num(3);
      const expires = num(4);
      const tag = arg(5)!;
      p.pr = num(6);
      const retry = num(8);
      p.lc = num(9);
      measure(num(10));
      const window = arg(11) === '1';
      if (added > 0 && expires <= now) {
        lapsed = lapsed + added;
      } else if (added > 0) {
        if (window && tag !== '') {
          for (const g of GENERATIONS) {
            if (units(g) > 0 && p[`${g}_t` as const] !== tag) lapse(g);
          }
          settle();
        }
        if (p.a_u === 0) {
          [p.a_u, p.a_e, p.a_t, p.a_s] = [added, expires, tag, 0];
        } else {
          if (p.b_u > 0) {
            p.a_u = p.a_u + p.b_u;
            p.a_e = Math.min(p.a_e, p.b_e);
            p.a_s = p.a_s + p.b_s;
            if (!window) p.a_t = earlierTag(p.a_t, p.b_t);
          }
          [p.b_u, p.b_e, p.b_t, p.b_s] = [added, expires, tag, 0];
        }
        p.du = 0;
      } else if (added <= 0) {
        p.du = now + Math.max(1, retry);
      }
      p.su = retry > 0 ? now + retry : 0;
      p.dd = 0;
      p.an = p.ln;
      p.sh = added < p.lw ? 1 : 0;
      p.lk = '';
      p.le = 0;
      save(true);
      return answer(true, 0, false);
    }

    if (op === 'fail') {
      if (p.lk !== '' && arg(3) === refillId()) {
        p.lk = '';
        p.le = 0;
      }
      p.dd = now + num(4);
      save();
      return answer(false, 0, false);
    }

    if (op === 'drain') {
      const idleMs = num(3);
      if (left() === 0 || now - p.la < idleMs) {
        if (lapsed > 0) save();
        return answer(false, 0, false, '');
      }
      let out = left();
      let tag = p.a_t;
      if (arg(4) !== '1') {
        if (p.b_u > 0) tag = earlierTag(p.a_t, p.b_t);
      } else {
        if (p.b_u > 0) tag = p.b_t;
        if (p.b_u > 0 && p.a_u > 0 && p.a_t !== p.b_t) {
          lapsed = lapsed + p.a_u;
          out = p.b_u;
        }
      }
      p.a_u = 0;
      p.b_u = 0;
      save();
      const reply = answer(true, 0, false, tag);
      reply.left = out;
      return reply;
    }

    if (op === 'refund') {
      let back = num(3);
      const tag = arg(4) ?? '';
      const below = arg(5) === '1';
      if (!below) back = Math.min(back, p.rs);
      let into: Generation | undefined;
      for (const g of GENERATIONS) {
        if (into === undefined && p[`${g}_e` as const] > now && p[`${g}_s` as const] > 0 && (!below || p[`${g}_t` as const] === tag)) into = g;
      }
      if (into === undefined) {
        back = 0;
      } else {
        back = Math.min(back, p[`${into}_s` as const]);
        p[`${into}_u` as const] = p[`${into}_u` as const] + back;
        p[`${into}_s` as const] = p[`${into}_s` as const] - back;
        settle();
      }
      if (!below) p.rs = p.rs - back;
      save();
      const reply = answer(true, 0, false);
      reply.left = back;
      return reply;
    }

    if (op === 'peek') {
      if (lapsed > 0) save();
      return answer(false, 0, false);
    }

    throw new Error(`ERR rl lease_pool: unknown operation ${String(op)}`);
  }
}
