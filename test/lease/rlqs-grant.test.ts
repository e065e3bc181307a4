/**
 * takeLayered, layer by layer on counters that answer as told: every layer is decided as a check decides
 * it (a store failing open in one layer leaves the others to decide), and units a give back could not
 * return are counted lapsed (parent_unreachable), never silently lost.
 */
import { expect } from 'chai';
import { CounterStoreUnavailableError } from '../../src/errors.js';
import { takeLayered, type LayerCounter } from '../../src/lease/rlqs-grant.js';
import type { FailureMode } from '../../src/policy/types.js';
import type { StoreMs } from '../../src/counters/counter-store.js';
import type { Grant, LapseReason, LeaseParent, LocalMs } from '../../src/lease/types.js';

interface Counter {
  left: number;
  takeFails?: boolean;
  giveFails?: boolean;
  given: number;
}

function layer(policyId: string, counter: Counter, failureMode: FailureMode = 'fail_closed'): LayerCounter {
  const down = () => new CounterStoreUnavailableError('simulated outage');
  const parent = {
    take: async (n: number): Promise<Grant> => {
      if (counter.takeFails) throw down();
      const granted = Math.min(n, counter.left);
      counter.left -= granted;
      return { granted, remaining: counter.left, retryAfterMs: granted === 0 ? 500 : 0, resetAfterMs: 1000, windowTag: 7, spendBy: 10_000 as LocalMs, parentNow: 0 as StoreMs, outcome: 'done' };
    },
    giveBack: async (units: number) => {
      if (counter.giveFails) throw down();
      counter.left += units;
      counter.given += units;
      return { returned: units, lapsed: 0, outcome: 'done' as const, parentNow: 0 as StoreMs };
    },
  } as unknown as LeaseParent;
  return { policyId, parent, holdMs: 1000, maxUnits: 100, failureMode, expiry: 'window_ended' };
}

const lapses = () => {
  const seen: { policyId: string; units: number; reason: LapseReason }[] = [];
  return { seen, onLapse: (l: LayerCounter, units: number, reason: LapseReason) => seen.push({ policyId: l.policyId, units, reason }) };
};

describe('RLQS takeLayered: every layer decided, every unit accounted for', () => {
  it('a layer whose store fails open leaves the other layers to decide: their units are taken, the grant marked failed open', async () => {
    const user: Counter = { left: 3, given: 0 };
    const platform: Counter = { left: 100, takeFails: true, given: 0 };
    const answer = await takeLayered([layer('platform', platform, 'fail_open'), layer('user', user)], 5);
    expect(answer.refused).to.equal(undefined);
    if (answer.refused !== undefined) return;
    expect(answer.units, 'the user layer still bounds it').to.equal(3);
    expect(answer.layers.map((l) => l.policyId)).to.deep.equal(['user']);
    expect(answer.failedOpen).to.equal(true);
    expect(user.left).to.equal(0);
  });

  it('a spent layer after a fail_open failure still refuses: the failure mode does not skip it', async () => {
    const answer = await takeLayered([layer('platform', { left: 100, takeFails: true, given: 0 }, 'fail_open'), layer('user', { left: 0, given: 0 })], 5);
    expect(answer).to.deep.include({ refused: 'spent' });
  });

  it('every layer failing open answers the failure mode fail_open; one failing closed refuses', async () => {
    const open = await takeLayered([layer('a', { left: 5, takeFails: true, given: 0 }, 'fail_open')], 2);
    expect(open).to.deep.include({ refused: 'failed', failureMode: 'fail_open' });
    const first: Counter = { left: 5, given: 0 };
    const closed = await takeLayered([layer('a', first), layer('b', { left: 5, takeFails: true, given: 0 }, 'fail_closed')], 2);
    expect(closed).to.deep.include({ refused: 'failed', failureMode: 'fail_closed' });
    expect(first).to.deep.include({ left: 5, given: 2 });
  });

  it('counts lapsed (parent_unreachable) what a give back could not return: the surplus of a smaller grant, a refused take', async () => {
    const { seen, onLapse } = lapses();
    const wide: Counter = { left: 100, given: 0 };
    await takeLayered([layer('wide', wide), layer('narrow', { left: 4, given: 0 })], 10, onLapse);
    expect(wide.given, 'the surplus went back while the store answered').to.equal(6);
    wide.giveFails = true;
    await takeLayered([layer('wide', wide), layer('narrow', { left: 4, given: 0 })], 10, onLapse);
    await takeLayered([layer('wide', wide), layer('spent', { left: 0, given: 0 })], 10, onLapse);
    expect(seen).to.deep.equal([
      { policyId: 'wide', units: 6, reason: 'parent_unreachable' },
      { policyId: 'wide', units: 10, reason: 'parent_unreachable' },
    ]);
  });
});
