import { expect } from 'chai';
import fc from 'fast-check';
import { SeriesRing } from '../../src/analytics/series-ring.js';

const rates = (allowed: number, denied = 0, shadow = 0) => ({ allowed, denied, shadow });

describe('analytics/series-ring', () => {
  it('is empty before the first tick', () => {
    expect(new SeriesRing(4, 2).history()).to.deep.equal({ at: [], allowed: [], denied: [], shadow: [], policies: [] });
  });

  it('keeps the last `capacity` ticks, oldest first, overwriting the oldest', () => {
    const ring = new SeriesRing(3, 1);
    for (let t = 1; t <= 5; t++) ring.push(t * 1000, rates(t, 10 * t, 100 * t), [{ policy_id: 'p', ...rates(t) }]);
    expect(ring.size).to.equal(3);
    expect(ring.history()).to.deep.equal({
      at: [3000, 4000, 5000],
      allowed: [3, 4, 5],
      denied: [30, 40, 50],
      shadow: [300, 400, 500],
      policies: [{ policy_id: 'p', allowed: [3, 4, 5], denied: [0, 0, 0], shadow: [0, 0, 0] }],
    });
  });

  it("gives the newest tick's busiest policies over the whole history, null where a tick did not keep them", () => {
    const ring = new SeriesRing(10, 2);
    ring.push(1, rates(1), [{ policy_id: 'a', ...rates(1) }, { policy_id: 'b', ...rates(2) }, { policy_id: 'c', ...rates(3) }]);
    ring.push(2, rates(2), [{ policy_id: 'c', ...rates(4, 1, 1) }, { policy_id: 'a', ...rates(5) }]);
    expect(ring.history().policies).to.deep.equal([
      // c was third in the first tick: past the two kept per tick, so unknown there.
      { policy_id: 'c', allowed: [null, 4], denied: [null, 1], shadow: [null, 1] },
      { policy_id: 'a', allowed: [1, 5], denied: [0, 0], shadow: [0, 0] },
    ]);
  });

  it('agrees with a plain list of the last capacity ticks, whatever the sequence', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), fc.array(fc.tuple(fc.nat(50), fc.nat(50), fc.nat(50)), { maxLength: 30 }), (capacity, ticks) => {
        const ring = new SeriesRing(capacity, 0);
        ticks.forEach(([a, d, s], i) => ring.push(i, rates(a, d, s), []));
        const kept = ticks.map((t, i) => [i, ...t]).slice(-capacity);
        const history = ring.history();
        expect(history.at).to.deep.equal(kept.map((t) => t[0]));
        expect([history.allowed, history.denied, history.shadow]).to.deep.equal([1, 2, 3].map((k) => kept.map((t) => t[k])));
      }),
    );
  });

  it('refuses a size it cannot hold', () => {
    expect(() => new SeriesRing(0, 1)).to.throw(RangeError);
    expect(() => new SeriesRing(1, -1)).to.throw(RangeError);
  });
});
