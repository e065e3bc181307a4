import { expect } from 'chai';
import { Redis } from 'ioredis';
import { connectRedisCounterStore, type RedisCounterStore } from '../../src/redis/redis-store.js';
import { poolKey, RegionPool } from '../../src/regions/region-pool.js';
import { randomPrefix, startRedis, type RedisHandle } from '../support/redis.js';

/**
 * lua/region_pool.lua against a real Redis, at explicit instants (the script's `now`): spending, the
 * refill lock, expiry and lapse, windows never mixing, drain and refund.
 */
describe('region pool (lua/region_pool.lua)', function () {
  this.timeout(20_000);
  let redis: RedisHandle;
  let store: RedisCounterStore;
  let now = 1_000_000;
  let pool: RegionPool;
  let key: string;
  const MEASURE = 1000;

  before(async function () {
    redis = await startRedis();
    store = connectRedisCounterStore(redis.url, { commandTimeoutMs: 2000 });
    await store.waitUntilReady();
    pool = new RegionPool(store, () => now);
  });
  beforeEach(() => {
    key = poolKey(`${randomPrefix()}{p}:fixed_window`);
    now = 1_000_000;
  });
  after(async function () {
    await store?.close();
    await redis?.stop();
  });

  /** A refill's grant, live for `ttlMs` from the current instant (a window's unless `window` is false). */
  const grant = (units: number, ttlMs: number, tag = 1, extra: Partial<{ parentRemaining: number; retryAfterMs: number; asked: number; window: boolean }> = {}) => ({
    units,
    expiresAt: now + ttlMs,
    tag,
    window: extra.window ?? true,
    parentRemaining: extra.parentRemaining ?? 100,
    retryAfterMs: extra.retryAfterMs ?? 0,
    asked: extra.asked ?? units,
  });

  /** A refill's add as its server makes it: under the lock, taken by a look that counts no demand and waits for nothing. */
  async function refilled(g: ReturnType<typeof grant>, token = 'a') {
    const locked = await pool.spend(key, { cost: 1e9, lockMs: 500, token, measureMs: MEASURE, fresh: false, op: 'spend', waitsFor: 1e9 });
    expect(locked.refill, 'the refill lock').to.be.a('string');
    return pool.add(key, g, locked.refill!, MEASURE);
  }

  it('an empty pool spends nothing and hands the refill lock to one caller only', async function () {
    const first = await pool.spend(key, { cost: 1, lockMs: 500, token: 'server-a', measureMs: MEASURE });
    expect(first).to.include({ spent: false, left: 0, lock: true, parentRemaining: -1 });
    const second = await pool.spend(key, { cost: 1, lockMs: 500, token: 'server-b', measureMs: MEASURE });
    expect(second).to.include({ spent: false, lock: false });
    // The holder's add releases the lock; the units are spent whole or not at all.
    expect(await pool.add(key, grant(10, 5000), first.refill!, MEASURE)).to.include({ spent: true, left: 10 });
    // A decision that does not fit asks for a refill at once.
    const short = await pool.spend(key, { cost: 11, lockMs: 500, token: 'server-b', measureMs: MEASURE });
    expect(short).to.include({ spent: false, left: 10, lock: true });
    await pool.fail(key, short.refill!, 0);
    const spent = await pool.spend(key, { cost: 4, lockMs: 500, token: 'server-b', measureMs: MEASURE });
    // Demand counts whether met or not: 1 + 1 + 11 wanted, 4 spent.
    expect(spent).to.include({ spent: true, left: 6, lock: false, recent: 17 });
    // Half of the last chunk spent: the next spend refills ahead.
    expect(await pool.spend(key, { cost: 1, lockMs: 500, token: 'server-b', measureMs: MEASURE })).to.include({ spent: true, left: 5, lock: true });
  });

  it('a lock whose holder vanished expires, so another server refills, told which refill to reclaim; the late add is refused', async function () {
    const crashed = await pool.spend(key, { cost: 1, lockMs: 500, token: 'crashed', measureMs: MEASURE });
    // The refill's id (its take's at the global counter): the lock's owner, the refill number, the lock's expiry.
    expect(crashed).to.include({ lock: true, refill: `crashed:1:${now + 500}`, stale: undefined });
    now += 499;
    expect((await pool.spend(key, { cost: 1, lockMs: 500, token: 'other', measureMs: MEASURE })).lock).to.equal(false);
    now += 1;
    const other = await pool.spend(key, { cost: 1, lockMs: 500, token: 'other', measureMs: MEASURE });
    expect(other).to.include({ lock: true, refill: `other:2:${now + 500}`, stale: crashed.refill });
    // The crashed server's refill comes back after all: refused (its take is being reclaimed), nothing changes.
    const before = await pool.peek(key);
    expect(await pool.add(key, grant(10, 5000), crashed.refill!, MEASURE)).to.include({ spent: false, left: 0, lapsed: 0 });
    expect(await pool.fail(key, crashed.refill!, 0)).to.include({ left: 0 });
    expect(await pool.peek(key)).to.deep.equal(before);
    // The lock is still the new holder's: its add lands and releases it, and no one is told of a stale refill.
    expect(await pool.add(key, grant(10, 5000), other.refill!, MEASURE)).to.include({ spent: true, left: 10 });
    expect(await pool.add(key, grant(10, 5000), other.refill!, MEASURE)).to.include({ spent: false, left: 10 });
    now += 1000;
    const next = await pool.spend(key, { cost: 11, lockMs: 500, token: 'other', measureMs: MEASURE });
    expect(next).to.include({ lock: true, stale: undefined });
  });

  it('an add or a fail of a refill whose lock expired, but that no one took over, still lands', async function () {
    const slow = await pool.spend(key, { cost: 1, lockMs: 500, token: 'slow', measureMs: MEASURE });
    now += 600;
    expect(await pool.add(key, grant(4, 5000), slow.refill!, MEASURE)).to.include({ spent: true, left: 4 });
    const late = await pool.spend(key, { cost: 9, lockMs: 500, token: 'slow', measureMs: MEASURE });
    now += 600;
    await pool.fail(key, late.refill!, 0);
    // Released: the next holder is told of no stale refill.
    expect(await pool.spend(key, { cost: 9, lockMs: 500, token: 'other', measureMs: MEASURE })).to.include({ lock: true, stale: undefined });
  });

  it("the pool's key lives past its live units' expiry (a long window's units are never deleted with it)", async function () {
    const admin = new Redis(redis.url);
    try {
      await refilled(grant(10, 3_600_000));
      // (With an explicit time the script pads every TTL by a minute.)
      expect(await admin.pttl(key)).to.be.above(3_600_000 + 600_000);
    } finally {
      admin.disconnect();
    }
  });

  it('answers with its own clock, and units that arrive past their expiry lapse at once', async function () {
    expect((await pool.peek(key)).storeNow).to.equal(now);
    expect(await refilled(grant(10, 0))).to.include({ left: 0, lapsed: 10 });
  });

  it('units expire at their expiry (this store’s clock) and are reported lapsed once', async function () {
    await refilled(grant(10, 1000));
    now += 999;
    expect(await pool.spend(key, { cost: 2, lockMs: 500, token: 'a', measureMs: MEASURE })).to.include({ spent: true, left: 8, lapsed: 0, resetAfterMs: 1 });
    now += 1;
    expect(await pool.spend(key, { cost: 1, lockMs: 500, token: 'a', measureMs: MEASURE })).to.include({ spent: false, left: 0, lapsed: 8 });
    expect(await pool.peek(key)).to.include({ left: 0, lapsed: 0 });
  });

  it('units of a newer window never mix with an older window’s: the older ones lapse', async function () {
    await refilled(grant(5, 10_000, 1));
    const added = await refilled(grant(7, 10_000, 2));
    expect(added).to.include({ left: 7, lapsed: 5, tag: 2 });
    // Same window: the units add up, and two generations keep their own expiry (older first).
    await refilled(grant(3, 2_000, 2));
    expect((await pool.peek(key)).left).to.equal(10);
    now += 2_000;
    // Expiry is per generation: at +2 s the 3 lapse, the 7 live on until +10 s.
    expect(await pool.peek(key)).to.include({ left: 7, lapsed: 3 });
  });

  it('spends the units that expire first before the newer ones', async function () {
    await refilled(grant(3, 1_000, 1));
    await refilled(grant(3, 5_000, 1));
    expect((await pool.spend(key, { cost: 4, lockMs: 500, token: 'a', measureMs: MEASURE })).left).to.equal(2);
    now += 1_000;
    // The 3 older were all spent (plus 1 newer): nothing lapses at their expiry.
    expect(await pool.peek(key)).to.include({ left: 2, lapsed: 0 });
  });

  it('a take that granted nothing refuses spends for retry_after without a refill', async function () {
    const locked = await pool.spend(key, { cost: 1, lockMs: 500, token: 'a', measureMs: MEASURE });
    expect(locked.lock).to.equal(true);
    await pool.add(key, grant(0, 0, 1, { parentRemaining: 0, retryAfterMs: 300 }), locked.refill!, MEASURE);
    expect(await pool.spend(key, { cost: 1, lockMs: 500, token: 'a', measureMs: MEASURE })).to.include({ spent: false, retryAfterMs: 300, lock: false, parentRemaining: 0 });
    now += 300;
    expect(await pool.spend(key, { cost: 1, lockMs: 500, token: 'a', measureMs: MEASURE })).to.include({ spent: false, retryAfterMs: 0, lock: true });
  });

  it('decisions waiting count once in what the next refill asks for, and are refused after it if the parent admits no more', async function () {
    // a waits (and takes the lock: its refill, 1, serves it); b and c wait for the refill after it.
    const a = await pool.spend(key, { cost: 1, lockMs: 500, token: 's1', measureMs: MEASURE });
    expect(a).to.include({ spent: false, lock: true, waiting: 1, waitsFor: 1 });
    const b = await pool.spend(key, { cost: 2, lockMs: 500, token: 's2', measureMs: MEASURE });
    expect(b).to.include({ spent: false, lock: false, waitsFor: 2 });
    const c = await pool.spend(key, { cost: 3, lockMs: 500, token: 's2', measureMs: MEASURE });
    expect(c).to.include({ waiting: 5, waitsFor: 2 });
    // Looking again while their refill has not landed counts nothing more.
    expect(await pool.spend(key, { cost: 2, lockMs: 500, token: 's2', measureMs: MEASURE, fresh: false, op: 'spend', waitsFor: b.waitsFor })).to.include({ spent: false, waiting: 5, waitsFor: 2 });
    // Refill 1 lands with 1 unit (the parent had plenty left); a spends it and takes the lock (the
    // chunk is spent): refill 2 must ask for the 5 units b and c want.
    await pool.add(key, grant(1, 60_000, 1, { parentRemaining: 50 }), a.refill!, MEASURE);
    const refill2 = await pool.spend(key, { cost: 1, lockMs: 500, token: 's1', measureMs: MEASURE, fresh: false, op: 'spend', waitsFor: a.waitsFor });
    expect(refill2).to.include({ spent: true, lock: true, waiting: 5 });
    expect(await pool.spend(key, { cost: 2, lockMs: 500, token: 's2', measureMs: MEASURE, fresh: false, op: 'spend', waitsFor: b.waitsFor })).to.include({ spent: false, lock: false, waiting: 0, waitsFor: 2 });
    // Refill 2 gets 2 of the 5 and leaves the parent empty for 700 ms (its retry_after): b is paid (and
    // takes the lock of refill 3); c, still short, is refused (the parent admits no more now) instead of
    // waiting on, told what is left of the parent's retry_after.
    await pool.add(key, grant(2, 60_000, 1, { parentRemaining: 0, asked: 5, retryAfterMs: 700 }), refill2.refill!, MEASURE);
    const refill3 = await pool.spend(key, { cost: 2, lockMs: 500, token: 's2', measureMs: MEASURE, fresh: false, op: 'spend', waitsFor: b.waitsFor });
    expect(refill3).to.include({ spent: true, lock: true });
    now += 200;
    expect(await pool.spend(key, { cost: 3, lockMs: 500, token: 's2', measureMs: MEASURE, fresh: false, op: 'spend', waitsFor: c.waitsFor })).to.include({ spent: false, retryAfterMs: 500, lock: false, waitsFor: 0 });
    // Past it, a refusal says 1 ms (the parent may admit again: look again at once).
    now += 500;
    expect(await pool.spend(key, { cost: 3, lockMs: 500, token: 's2', measureMs: MEASURE, fresh: false, op: 'spend', waitsFor: c.waitsFor })).to.include({ spent: false, retryAfterMs: 1, waitsFor: 0 });
    // Had the parent had more left after refill 3, c would wait for the next one, counted in it again.
    await pool.add(key, grant(1, 60_000, 1, { parentRemaining: 10 }), refill3.refill!, MEASURE);
    expect(await pool.spend(key, { cost: 3, lockMs: 500, token: 's2', measureMs: MEASURE, fresh: false, op: 'spend', waitsFor: c.waitsFor })).to.include({ spent: false, retryAfterMs: 0, lock: true, waiting: 3, waitsFor: 4 });
  });

  it('a failed refill releases the lock and marks the parent down for a while', async function () {
    const locked = await pool.spend(key, { cost: 1, lockMs: 500, token: 'a', measureMs: MEASURE });
    expect(locked.lock).to.equal(true);
    await pool.fail(key, locked.refill!, 1000);
    expect(await pool.spend(key, { cost: 1, lockMs: 500, token: 'b', measureMs: MEASURE })).to.include({ spent: false, down: true, lock: false });
    now += 1000;
    expect(await pool.spend(key, { cost: 1, lockMs: 500, token: 'b', measureMs: MEASURE })).to.include({ down: false, lock: true });
  });

  it('drains only after idle_ms without a spend, and only once', async function () {
    await refilled(grant(10, 60_000, 9));
    await pool.spend(key, { cost: 1, lockMs: 500, token: 'a', measureMs: MEASURE });
    now += 999;
    expect(await pool.drain(key, 1000, true)).to.include({ spent: false });
    now += 1;
    expect(await pool.drain(key, 1000, true)).to.include({ spent: true, left: 9, tag: 9 });
    expect(await pool.drain(key, 0, true)).to.include({ spent: false, left: 0 });
  });

  it('a refund goes back to live units, at most what was spent lately', async function () {
    await refilled(grant(10, 60_000));
    await pool.spend(key, { cost: 3, lockMs: 500, token: 'a', measureMs: MEASURE });
    expect((await pool.refund(key, 5)).left).to.equal(3);
    expect((await pool.peek(key)).left).to.equal(10);
    // Nothing live: a refund finds no units to join (they belonged to a window that is over).
    now += 60_000;
    await pool.spend(key, { cost: 1, lockMs: 500, token: 'a', measureMs: MEASURE });
    expect((await pool.refund(key, 1)).left).to.equal(0);
  });

  it('a refund never puts back more than was spent from the units (demand the pool could not meet is not spending)', async function () {
    await refilled(grant(2, 60_000));
    // Two decisions of 5 find 2 units: refused, but their demand is measured for the chunk rule.
    expect((await pool.spend(key, { cost: 5, lockMs: 500, token: 'a', measureMs: MEASURE })).spent).to.equal(false);
    expect((await pool.spend(key, { cost: 5, lockMs: 500, token: 'a', measureMs: MEASURE })).spent).to.equal(false);
    // Nothing was spent: a refund (however large) adds nothing to the 2 units the global counter granted.
    expect((await pool.refund(key, 5)).left).to.equal(0);
    expect((await pool.peek(key)).left).to.equal(2);
    // One unit spent: at most that one goes back, and the pool never holds more than it was granted.
    await pool.spend(key, { cost: 1, lockMs: 500, token: 'a', measureMs: MEASURE });
    expect((await pool.refund(key, 5)).left).to.equal(1);
    expect((await pool.peek(key)).left).to.equal(2);
    // A process lease cannot return more than it took either.
    const taken = await pool.spend(key, { cost: 1, lockMs: 500, token: 'a', measureMs: MEASURE, fresh: true, op: 'take' });
    expect(taken).to.include({ spent: true, left: 1 });
    expect((await pool.refund(key, 3, { tag: taken.tag })).left).to.equal(1);
    expect((await pool.peek(key)).left).to.equal(2);
  });

  it('a process lease takes up to n units, with their window and expiry, and returns them only into that window', async function () {
    await refilled(grant(3, 1_000, 1));
    await refilled(grant(4, 5_000, 1));
    // Partial: 5 asked, 5 taken from the older units first; they expire with the earlier generation.
    const taken = await pool.spend(key, { cost: 5, lockMs: 500, token: 'a', measureMs: MEASURE, fresh: true, op: 'take' });
    // (2 left of a chunk of 4: time to refill ahead.)
    expect(taken).to.include({ spent: true, left: 5, tag: 1, resetAfterMs: 1_000, lock: true });
    const rest = await pool.spend(key, { cost: 5, lockMs: 500, token: 'a', measureMs: MEASURE, fresh: true, op: 'take' });
    expect(rest).to.include({ spent: true, left: 2, resetAfterMs: 5_000 });
    expect((await pool.spend(key, { cost: 1, lockMs: 500, token: 'a', measureMs: MEASURE, fresh: true, op: 'take' })).spent).to.equal(false);
    // A return from another window lapses; one from this window goes back, even into an emptied pool.
    expect((await pool.refund(key, 2, { tag: 0 })).left).to.equal(0);
    expect((await pool.refund(key, 2, { tag: 1 })).left).to.equal(2);
    expect((await pool.peek(key)).left).to.equal(2);
    // Not once the window's units have expired.
    now += 5_000;
    expect((await pool.refund(key, 2, { tag: 1 })).left).to.equal(0);
  });

  it("a bucket's units of two refills stay side by side, go back by the earlier tag, and a process's return only into the units it came from", async function () {
    // A bucket's tag: the instant, by the global store's clock, its units must be back there by.
    const bucket = (units: number, ttlMs: number, tag: number) => grant(units, ttlMs, tag, { window: false });
    await refilled(bucket(3, 1_000, 1100));
    expect(await refilled(bucket(4, 5_000, 1500))).to.include({ left: 7, lapsed: 0 });
    // A process lease takes 2 of the older units, and names them when it gives them back: into the newer
    // ones they would outlive max_hold, so they go only into those they came from.
    const taken = await pool.spend(key, { cost: 2, lockMs: 500, token: 'a', measureMs: MEASURE, fresh: true, op: 'take' });
    expect(taken).to.include({ spent: true, left: 2, tag: 1100, resetAfterMs: 1_000 });
    expect((await pool.refund(key, 2, { tag: 1500 })).left).to.equal(0);
    expect((await pool.refund(key, 2, { tag: 1100 })).left).to.equal(2);
    // A third refill merges the older two, under the earlier expiry and tag; drained, all of a bucket's
    // units go back by the earlier tag.
    await refilled(bucket(5, 9_000, 1900));
    expect(await pool.drain(key, 0, false)).to.include({ spent: true, left: 12, tag: 1100, lapsed: 0 });
    // A window's drain (the tags are windows) lets an older window's units lapse instead.
    await refilled(bucket(3, 1_000, 1100));
    await refilled(bucket(4, 5_000, 1500));
    expect(await pool.drain(key, 0, true)).to.include({ spent: true, left: 4, tag: 1500, lapsed: 3 });
  });

  it('measures what the region spent over the last measure period (the chunk rule’s rate)', async function () {
    await refilled(grant(100, 60_000));
    for (let i = 0; i < 5; i++) await pool.spend(key, { cost: 2, lockMs: 500, token: 'a', measureMs: MEASURE });
    now += MEASURE;
    expect((await pool.spend(key, { cost: 1, lockMs: 500, token: 'a', measureMs: MEASURE })).recent).to.equal(10);
    now += 2 * MEASURE;
    expect((await pool.spend(key, { cost: 1, lockMs: 500, token: 'a', measureMs: MEASURE })).recent).to.equal(1);
  });
});
