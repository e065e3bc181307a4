/**
 * HolderTakes' reclaims (issue 28 point 4): a take's units are counted once, whichever paths of one holder,
 * and whichever holders, reclaim it; a `repeat` is counted only as the answer of the holder's own lost reclaim.
 */
import { expect } from 'chai';
import { CounterStoreUnavailableError } from '../../src/errors.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { unansweredTakes } from '../../src/lease/lease-holder.js';
import type { UnitOwner } from '../../src/lease/holder-takes.js';
import { storeParent, type LeasedSpec } from '../../src/lease/store-parent.js';
import type { LeaseClock, LeaseParent } from '../../src/lease/types.js';

const T0 = 1_800_000_000_000;
const spec: LeasedSpec = { type: 'fixed_window', limit: 100, windowMs: 3_600_000 };

/** A global counter, and holders of its takes, each with its own HolderTakes; `lose`: the next reclaims run and their answers are lost. */
function world() {
  const clock = { now: T0 };
  const leaseClock: LeaseClock = { now: () => clock.now, setTimer: () => undefined, clearTimer: () => undefined };
  const store = new MemoryCounterStore({ now: () => clock.now, sweepIntervalMs: 0 });
  const parentOf = (key: string) => storeParent(store, [key], spec, leaseClock, 1000);
  const holder = () => {
    const counted = { returned: 0, lapsed: 0 };
    const lose = { reclaims: 0 };
    const outcomes: string[] = [];
    const ownerOf = (key: string): UnitOwner => {
      const real = parentOf(key);
      const parent: LeaseParent = {
        ...real,
        reclaim: async (takeId, deadline, by) => {
          const answer = await real.reclaim!(takeId, deadline, by);
          if (key === 'k') outcomes.push(answer.outcome);
          if (lose.reclaims-- > 0) throw new CounterStoreUnavailableError('the answer was lost on the link');
          return answer;
        },
      };
      const events = { returned: (units: number) => (counted.returned += units), lapsed: (units: number) => (counted.lapsed += units) };
      return { parent, timeoutMs: 1000, events, shape: 'window' };
    };
    return { takes: unansweredTakes(leaseClock), owner: ownerOf('k'), ownerOf, counted, lose, outcomes };
  };
  const used = async () => 100 - (await store.peek(['k'], spec)).remaining;
  return { take: (takeId: string) => parentOf('k').take(3, { takeId }), holder, used };
}

describe('HolderTakes: a take reclaimed is counted once', () => {
  it('a reclaim whose answer was lost, sent again, answers repeat: counted then, once', async () => {
    const w = world();
    const a = w.holder();
    await w.take('x');
    a.lose.reclaims = 1;
    a.takes.failed({ takeId: 'x' }, a.owner);
    await a.takes.settleAll();
    expect(a.counted.returned).to.equal(0);
    await a.takes.settleAll();
    expect(a.outcomes).to.deep.equal(['done', 'repeat']);
    expect(a.counted).to.deep.equal({ returned: 3, lapsed: 0 });
    expect(await w.used()).to.equal(0);
  });

  it("one holder's two paths reclaim an id once; another holder's reclaim of it answers reclaimed and counts nothing", async () => {
    const w = world();
    const a = w.holder();
    const b = w.holder();
    await w.take('x');
    // Its take failed on its way, and the refill lock it took over from itself names that take stale.
    a.takes.failed({ takeId: 'x' }, a.owner);
    await a.takes.reclaim({ takeId: 'x' }, a.owner, 'holder_lost');
    await a.takes.settleAll();
    await b.takes.reclaim({ takeId: 'x' }, b.owner, 'holder_lost');
    expect(a.outcomes).to.deep.equal(['done']);
    expect(b.outcomes).to.deep.equal(['reclaimed']);
    expect(a.counted.returned + b.counted.returned).to.equal(3);
    expect(await w.used()).to.equal(0);
  });

  it('a repeat answering a first attempt (an id kept again once forgotten) is not counted', async () => {
    const w = world();
    const a = w.holder();
    await w.take('x');
    await a.takes.reclaim({ takeId: 'x' }, a.owner, 'holder_lost');
    // 1,024 other ids (another counter's) push it out of the ids the holder remembers.
    for (let i = 0; i < 1024; i++) a.takes.failed({ takeId: `other-${i}` }, a.ownerOf('other'));
    await a.takes.reclaim({ takeId: 'x' }, a.owner, 'holder_lost');
    expect(a.outcomes).to.deep.equal(['done', 'repeat']);
    expect(a.counted).to.deep.equal({ returned: 3, lapsed: 0 });
  });
});
