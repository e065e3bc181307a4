/**
 * What a server shows of a shared global budget (/rl/v1/info `region.shares`, `rl status`): each region's
 * units of the window as the global counter last answered, beside its guarantee, and the common share;
 * nothing taken once the window ended.
 */
import { expect } from 'chai';
import type { Grant, GivenBack, LeaseParent } from '../../src/lease/types.js';
import { ShareViews } from '../../src/regions/share-view.js';
import { shareText } from '../../src/cli/share-text.js';
import { compileShares } from '../../src/policy/budget-shares.js';
import { TestClock } from '../lease/support/test-clock.js';

describe('shares as a server shows them', () => {
  const budget = { policyId: 'api', shares: compileShares({ eu: 3, us: 1, '*': 1 }, 10) };
  const grant = (shareTaken: Record<string, number>, spendBy: number): Grant => ({
    granted: 1, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, windowTag: 0, spendBy, parentNow: 0, outcome: 'done', shareTaken,
  });

  it('notes every take and give of the global counter, and shows each region until the window ends', async () => {
    const world = new TestClock(1_000);
    const views = new ShareViews(world.clockFor());
    const answers: (Grant | GivenBack)[] = [grant({ us: 4 }, 31_000), { returned: 3, lapsed: 0, outcome: 'done', parentNow: 0, shareTaken: { eu: 6, us: 1 } }];
    const parent: LeaseParent = {
      take: async () => answers.shift() as Grant,
      giveBack: async () => answers.shift() as GivenBack,
      peek: async () => ({ allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 0 }),
    };
    const observed = views.observe(parent, budget);
    expect(views.status()).to.deep.equal([]);
    await observed.take(10);
    expect(views.status()).to.deep.equal([
      { policy_id: 'api', window_left_ms: 30_000, regions: [{ region: 'eu', taken: 0, guaranteed: 6 }, { region: 'us', taken: 4, guaranteed: 2 }], common: { size: 2, taken: 2 } },
    ]);
    await observed.giveBack(3, 0);
    const [use] = views.status();
    expect(use.regions).to.deep.equal([{ region: 'eu', taken: 6, guaranteed: 6 }, { region: 'us', taken: 1, guaranteed: 2 }]);
    expect(shareText(use)).to.equal('api: eu 6/6, us 1/2, common 0/2 (30 s of the window left)');
    // The window the take named has ended: nothing held of it any more.
    await world.advanceTo(31_000);
    expect(views.status()[0]).to.deep.include({ window_left_ms: 0, common: { size: 2, taken: 0 } });
    expect(views.status()[0].regions.map((r) => r.taken)).to.deep.equal([0, 0]);
  });

  it('a sliding window: each region shows until the window has slid past what the counter said, past the end of its sub-window', async () => {
    const world = new TestClock(1_000);
    const views = new ShareViews(world.clockFor());
    // A window of 60 s in 4 sub-windows: the take's units are spent by its sub-window's end, 15 s on.
    const parent: LeaseParent = {
      take: async () => grant({ eu: 5 }, 16_000),
      giveBack: async () => ({ returned: 0, lapsed: 0, outcome: 'done', parentNow: 0 }),
      peek: async () => ({ allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 0 }),
    };
    await views.observe(parent, budget, 60_000).take(5);
    await world.advanceTo(20_000);
    // The sub-window ended, but eu's units still count in the window.
    expect(views.status()[0]).to.deep.include({ window_left_ms: 0 });
    expect(views.status()[0].regions).to.deep.equal([{ region: 'eu', taken: 5, guaranteed: 6 }, { region: 'us', taken: 0, guaranteed: 2 }]);
    await world.advanceTo(61_000);
    expect(views.status()[0].regions.map((r) => r.taken)).to.deep.equal([0, 0]);
  });
});
