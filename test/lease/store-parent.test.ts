/**
 * storeParent: a counter as a lease parent, with named takes and gives (lua/includes/lease.lua; both stores are
 * held to the same rules by test/counters/contract.test.ts and the parity property).
 */
import { expect } from 'chai';
import type { RateSpec } from '../../src/counters/counter-spec.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { storeParent, type LeasedSpec } from '../../src/lease/store-parent.js';
import type { LeaseClock } from '../../src/lease/types.js';

const T0 = 1_800_000_000_000 - (1_800_000_000_000 % 3_600_000);

describe('storeParent: named takes and gives', () => {
  let storeNow = T0;
  let holderNow = 5_000;
  const clock: LeaseClock = { now: () => holderNow, setTimer: () => undefined, clearTimer: () => undefined };
  let store: MemoryCounterStore;
  const window: RateSpec = { type: 'fixed_window', limit: 10, windowMs: 60_000 };
  const bucket: RateSpec = { type: 'token_bucket', capacity: 10, rateUnits: 1, ratePeriodMs: 3_600_000 };

  beforeEach(() => {
    storeNow = T0;
    holderNow = 5_000;
    store = new MemoryCounterStore({ now: () => storeNow, sweepIntervalMs: 0 });
  });
  afterEach(() => store.close());

  it('answers the parent clock with every take, and a take past its deadline as late, taking nothing', async () => {
    const parent = storeParent(store, ['w'], window as LeasedSpec, clock, 1_000);
    const first = await parent.take(2);
    expect(first).to.include({ granted: 2, parentNow: T0, outcome: 'done' });
    storeNow = T0 + 30;
    const late = await parent.take(3, { takeId: 'h1-1', deadline: T0 + 29 });
    expect(late).to.include({ granted: 0, parentNow: T0 + 30, outcome: 'late' });
    expect((await parent.peek()).remaining).to.equal(8);
  });

  it('a named take asked again answers its grant; reclaimed, its units go back once', async () => {
    const parent = storeParent(store, ['w'], window as LeasedSpec, clock, 1_000);
    const grant = await parent.take(4, { takeId: 'h1-2', deadline: T0 + 100 });
    expect(await parent.take(4, { takeId: 'h1-2', deadline: T0 + 100 })).to.include({ granted: 4, windowTag: grant.windowTag, outcome: 'repeat' });
    expect(await parent.reclaim!('h1-2', T0 + 100)).to.deep.equal({ returned: 4, lapsed: 0, outcome: 'done', parentNow: T0 });
    expect(await parent.reclaim!('h1-2', T0 + 100)).to.deep.equal({ returned: 4, lapsed: 0, outcome: 'repeat', parentNow: T0 });
    expect((await parent.peek()).remaining).to.equal(10);
    // Reclaimed before it came: the take takes nothing.
    expect(await parent.reclaim!('h1-3', T0 + 100)).to.include({ returned: 0, lapsed: 0, outcome: 'ahead' });
    expect(await parent.take(4, { takeId: 'h1-3', deadline: T0 + 100 })).to.include({ granted: 0, outcome: 'reclaimed' });
  });

  it('a bucket grant asked again is spendable only for what is left of its hold', async () => {
    const parent = storeParent(store, ['b'], bucket as LeasedSpec, clock, 1_000);
    const grant = await parent.take(3, { takeId: 'h1-4' });
    expect(grant.spendBy).to.equal(holderNow + 1_000);
    storeNow = T0 + 400;
    holderNow = 6_000;
    const again = await parent.take(3, { takeId: 'h1-4' });
    expect(again).to.include({ granted: 3, outcome: 'repeat', windowTag: grant.windowTag, spendBy: 6_000 + 600 });
    // Past the hold, its units lapsed: a reclaim says so.
    storeNow = T0 + 1_000;
    expect(await parent.reclaim!('h1-4')).to.include({ returned: 0, lapsed: 3, outcome: 'done' });
  });

  it('a named give answers what it did; late, nothing; its reclaim answers the same, and gives nothing more', async () => {
    const parent = storeParent(store, ['w'], window as LeasedSpec, clock, 1_000);
    const grant = await parent.take(6);
    storeNow = T0 + 30;
    expect(await parent.giveBack(3, grant.windowTag, { takeId: 'g1', deadline: T0 + 29 })).to.deep.equal({ returned: 0, lapsed: 0, outcome: 'late', parentNow: T0 + 30 });
    expect(await parent.giveBack(3, grant.windowTag, { takeId: 'g2', deadline: T0 + 30 })).to.deep.equal({ returned: 3, lapsed: 0, outcome: 'done', parentNow: T0 + 30 });
    expect(await parent.giveBack(3, grant.windowTag, { takeId: 'g2', deadline: T0 + 30 })).to.include({ returned: 3, outcome: 'repeat' });
    expect(await parent.reclaim!('g2', T0 + 30)).to.deep.equal({ returned: 3, lapsed: 0, outcome: 'repeat', parentNow: T0 + 30 });
    expect((await parent.peek()).remaining).to.equal(7);
    // Settled before it came: the give gives nothing, and the units go back under a new id.
    expect(await parent.reclaim!('g3', T0 + 100)).to.include({ returned: 0, lapsed: 0, outcome: 'ahead' });
    expect(await parent.giveBack(3, grant.windowTag, { takeId: 'g3', deadline: T0 + 100 })).to.include({ returned: 0, outcome: 'reclaimed' });
    expect(await parent.giveBack(3, grant.windowTag, { takeId: 'g4', deadline: T0 + 100 })).to.include({ returned: 3, outcome: 'done' });
    expect((await parent.peek()).remaining).to.equal(10);
  });

  it('a store without reclaim (a region pool) gives a parent that names no takes or gives', async () => {
    const { reclaim: _none, ...plain } = { take: store.take.bind(store), giveBack: store.giveBack.bind(store), peek: store.peek.bind(store), reclaim: undefined };
    const parent = storeParent(plain, ['w'], window as LeasedSpec, clock, 1_000);
    expect(parent.reclaim).to.equal(undefined);
    expect((await parent.take(1)).granted).to.equal(1);
    let error: unknown;
    try {
      await parent.take(1, { takeId: 'x' });
    } catch (err) {
      error = err;
    }
    expect((error as Error).message).to.match(/keeps no take ledger/);
    expect(await parent.giveBack(1, 0, { takeId: 'y' }).then(() => 'given', (err: Error) => err.message)).to.match(/keeps no take ledger/);
  });
});
