import type { WireReply } from '../../../src/redis/script-protocol.js';
import { REGION_POOL } from '../../../src/regions/region-pool-protocol.js';
import type { RegionPoolScript } from '../../../src/regions/region-pool.js';

/** The script's reply by name, as it builds it (region-pool-protocol.ts). */
type PoolReply = WireReply<typeof REGION_POOL.reply>;

/**
 * The in-memory port of `lua/region_pool.lua`: region pools kept in this process, on a clock of their own
 * (the clock of the "region store" they stand for), for the lease simulation
 * (test/regions/simulation.property.test.ts), where several RegionCounterStores share one. A line-by-line
 * port (the same steps in the same order, so the numbers are the same; change both together), proven
 * identical to the script by test/regions/region-pool-parity.property.test.ts: every answer, the hash the
 * script leaves, and when its key expires.
 */

/** As the script: made or last refilled, a pool's key lives this long past its newest live units' expiry (none: past now). */
const POOL_TTL_MS = 600_000;

/** The pool hash (lua/region_pool.lua, KEYS[1]): the tags and the lock's owner are strings. */
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
      return Promise.resolve(parse(REGION_POOL.encodeReply(this.run(key, nowMs ?? this.clock(), args))));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** The pool as the last operation left it (a copy), expired or not; undefined if never written. */
  stored(key: string): StoredPool | undefined {
    const pool = this.pools.get(key);
    return pool && { fields: { ...pool.fields }, expireAt: pool.expireAt };
  }

  /** One run of the script at `now`: `argv` is its ARGV from ARGV[2] (the operation) on, read by the protocol's names. */
  run(key: string, now: number, argv: readonly string[]): PoolReply {
    const op = argv[0];
    let held = this.pools.get(key);
    // An expired key is gone, as in Redis (a key lives up to and including its expiry instant).
    if (held !== undefined && now > held.expireAt) {
      this.pools.delete(key);
      held = undefined;
    }
    const names: readonly string[] = (REGION_POOL.operations as Record<string, readonly string[]>)[op] ?? [];
    const args: Args = {};
    names.forEach((name, i) => (args[name] = argv[i + 1]));
    const run = new PoolRun(now, held, (pool) => this.pools.set(key, pool));
    switch (op) {
      case 'spend':
      case 'take':
        return run.spend(op, args);
      case 'add':
        return run.add(args);
      case 'fail':
        return run.fail(args);
      case 'drain':
        return run.drain(args);
      case 'refund':
        return run.refund(args);
      case 'peek':
        return run.peek();
    }
    throw new Error(`ERR rl region_pool: unknown operation ${String(op)}`);
  }
}

/** An operation's arguments by name (region-pool-protocol.ts), as the script's ARGV strings; absent: undefined. */
type Args = Record<string, string | undefined>;
const num = (value: string | undefined): number => Number(value);

/** One run of the script: the pool as read (expired generations lapsed), its helpers, and one method per operation, in the script's steps. */
class PoolRun {
  private readonly stored: PoolFields;
  private readonly p: PoolFields;
  private readonly freshPool: boolean;
  private lapsed = 0;

  constructor(private readonly now: number, private readonly held: StoredPool | undefined, private readonly write: (pool: StoredPool) => void) {
    this.freshPool = held === undefined;
    this.stored = held
      ? { ...held.fields }
      : { a_u: 0, a_e: 0, a_t: '', a_s: 0, b_u: 0, b_e: 0, b_t: '', b_s: 0, lk: '', le: 0, pr: -1, lc: 0, du: 0, dd: 0, rw: now, rs: 0, rp: 0, la: now, ln: 0, an: 0, wd: 0, lw: 0, sh: 0, su: 0 };
    this.p = { ...this.stored };
    for (const g of GENERATIONS) {
      if (this.units(g) > 0 && this.p[`${g}_e` as const] <= now) this.lapse(g);
    }
    this.settle();
  }

  private units(g: Generation): number {
    return this.p[`${g}_u` as const];
  }

  private lapse(g: Generation): void {
    this.lapsed = this.lapsed + this.units(g);
    this.p[`${g}_u` as const] = 0;
  }

  private settle(): void {
    const p = this.p;
    if (p.a_u === 0 && p.b_u > 0) {
      [p.a_u, p.a_e, p.a_t, p.a_s, p.b_u, p.b_s] = [p.b_u, p.b_e, p.b_t, p.b_s, 0, 0];
    }
  }

  private measure(period: number): void {
    const p = this.p;
    if (this.now - p.rw >= period) {
      if (this.now - p.rw >= 2 * period) p.rp = 0;
      else p.rp = p.rs;
      p.rs = 0;
      p.rw = this.now;
    }
  }

  private left(): number {
    return this.p.a_u + this.p.b_u;
  }

  private resetAfter(): number {
    const p = this.p;
    let e = 0;
    if (p.a_u > 0) e = p.a_e;
    if (p.b_u > 0 && p.b_e > e) e = p.b_e;
    if (e === 0) return 0;
    return e - this.now;
  }

  private save(refresh = false): void {
    const now = this.now;
    const changed = this.freshPool || POOL_FIELDS.some((f) => this.p[f] !== this.stored[f]);
    const expires = refresh || this.freshPool;
    if (!changed && !expires) return;
    const expireAt = expires ? now + Math.max(1, Math.ceil(now + this.resetAfter() + POOL_TTL_MS - now)) : this.held!.expireAt;
    this.write({ fields: { ...this.p }, expireAt });
  }

  private newestTag(): string {
    if (this.p.b_u > 0) return this.p.b_t;
    if (this.p.a_u > 0) return this.p.a_t;
    return '';
  }

  private refillId(): string {
    return `${this.p.lk}:${this.p.ln}:${this.p.le}`;
  }

  private answer(spent: boolean, retry: number, lock: string | false, tag?: string): PoolReply {
    const p = this.p;
    let recent = p.rs;
    if (p.rp > recent) recent = p.rp;
    return {
      spent, left: this.left(), retryAfterMs: retry, refill: lock || undefined, recent, parentRemaining: p.pr, lapsed: this.lapsed, down: p.dd > this.now,
      resetAfterMs: this.resetAfter(), tag: tag ?? this.newestTag(), storeNow: this.now, waiting: p.wd, waitsFor: 0, stale: undefined,
    };
  }

  spend(op: 'spend' | 'take', args: Args): PoolReply {
    const { p, now } = this;
    const cost = num(args.cost);
    this.measure(num(args.measureMs));
    let taken = 0;
    if (op === 'take') taken = Math.min(cost, this.left());
    else if (cost <= this.left()) taken = cost;
    const tag = p.a_t;
    let expires = p.a_e;
    if (taken > 0) {
      const fromA = Math.min(taken, p.a_u);
      p.a_u = p.a_u - fromA;
      p.b_u = p.b_u - (taken - fromA);
      p.a_s = p.a_s + fromA;
      p.b_s = p.b_s + (taken - fromA);
      if (taken > fromA) expires = Math.min(expires, p.b_e);
      this.settle();
      p.la = now;
    }
    if (taken > 0 || args.fresh === '1') p.rs = p.rs + cost;
    let retry = 0;
    if (p.du > now) retry = p.du - now;
    let waitsFor = 0;
    if (taken === 0 && retry === 0 && p.dd <= now) {
      waitsFor = num(args.waitsFor);
      const needs = op === 'take' ? 1 : cost;
      if (waitsFor > 0 && waitsFor <= p.an && (p.sh === 1 || (p.pr >= 0 && p.pr < needs))) {
        retry = Math.max(1, p.su - now);
        waitsFor = 0;
      } else if (waitsFor <= p.an) {
        p.wd = p.wd + needs;
        waitsFor = p.ln + 1;
      }
    }
    const { lock, stale } = this.lockForRefill(taken < cost, retry, args);
    const waiting = p.wd;
    if (lock) {
      p.ln = p.ln + 1;
      p.lw = p.wd;
      p.wd = 0;
    }
    this.save();
    const reply = this.answer(taken > 0, retry, lock && this.refillId());
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

  /** Refill ahead once half the last chunk is spent, or now for a demand that does not fit: the lock, and the expired refill it takes over. */
  private lockForRefill(short: boolean, retry: number, args: Args): { lock: boolean; stale: string | undefined } {
    const { p, now } = this;
    let stale: string | undefined;
    if (!((short || this.left() * 2 <= p.lc) && retry === 0 && p.dd <= now && (p.lk === '' || p.le <= now))) return { lock: false, stale };
    if (p.lk !== '') stale = this.refillId();
    p.lk = args.token!;
    p.le = now + num(args.lockMs);
    return { lock: true, stale };
  }

  add(args: Args): PoolReply {
    const { p, now } = this;
    if (p.lk === '' || args.refill !== this.refillId()) {
      if (this.lapsed > 0) this.save();
      return this.answer(false, 0, false);
    }
    const added = num(args.units);
    const expires = num(args.expiresAt);
    const tag = args.tag!;
    p.pr = num(args.parentRemaining);
    const retry = num(args.retryAfterMs);
    p.lc = num(args.asked);
    this.measure(num(args.measureMs));
    const window = args.window === '1';
    if (added > 0 && expires <= now) {
      this.lapsed = this.lapsed + added;
    } else if (added > 0) {
      this.addGeneration(added, expires, tag, window);
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
    this.save(true);
    return this.answer(true, 0, false);
  }

  /** A refill's units as the newest generation; of a window, older windows' lapse; two generations at most. */
  private addGeneration(added: number, expires: number, tag: string, window: boolean): void {
    const p = this.p;
    if (window && tag !== '') {
      for (const g of GENERATIONS) {
        if (this.units(g) > 0 && p[`${g}_t` as const] !== tag) this.lapse(g);
      }
      this.settle();
    }
    if (p.a_u === 0) {
      [p.a_u, p.a_e, p.a_t, p.a_s] = [added, expires, tag, 0];
      return;
    }
    if (p.b_u > 0) {
      p.a_u = p.a_u + p.b_u;
      p.a_e = Math.min(p.a_e, p.b_e);
      p.a_s = p.a_s + p.b_s;
      if (!window) p.a_t = earlierTag(p.a_t, p.b_t);
    }
    [p.b_u, p.b_e, p.b_t, p.b_s] = [added, expires, tag, 0];
  }

  fail(args: Args): PoolReply {
    const p = this.p;
    if (p.lk !== '' && args.refill === this.refillId()) {
      p.lk = '';
      p.le = 0;
    }
    p.dd = this.now + num(args.downMs);
    this.save();
    return this.answer(false, 0, false);
  }

  drain(args: Args): PoolReply {
    const p = this.p;
    if (this.left() === 0 || this.now - p.la < num(args.idleMs)) {
      if (this.lapsed > 0) this.save();
      return this.answer(false, 0, false, '');
    }
    let out = this.left();
    let tag = p.a_t;
    if (args.window !== '1') {
      if (p.b_u > 0) tag = earlierTag(p.a_t, p.b_t);
    } else {
      if (p.b_u > 0) tag = p.b_t;
      if (p.b_u > 0 && p.a_u > 0 && p.a_t !== p.b_t) {
        this.lapsed = this.lapsed + p.a_u;
        out = p.b_u;
      }
    }
    p.a_u = 0;
    p.b_u = 0;
    this.save();
    const reply = this.answer(true, 0, false, tag);
    reply.left = out;
    return reply;
  }

  refund(args: Args): PoolReply {
    const { p, now } = this;
    let back = num(args.units);
    const tag = args.tag ?? '';
    const below = args.below === '1';
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
      this.settle();
    }
    if (!below) p.rs = p.rs - back;
    this.save();
    const reply = this.answer(true, 0, false);
    reply.left = back;
    return reply;
  }

  peek(): PoolReply {
    if (this.lapsed > 0) this.save();
    return this.answer(false, 0, false);
  }
}
