/**
 * The page's series and chart axis rules (dashboard/src/series.ts, DOM-free): history then snapshots,
 * capped; ranges cut by time; an empty range as a flat zero line; tick labels that fit the range.
 */
import { expect } from 'chai';
import { LiveSeries, drawable, timeAxis } from '../../dashboard/src/series.js';
import type { Snapshot } from '../../dashboard/src/types.js';

const snapshot = (at: number, allowed: number, policies: { policy_id: string; allowed: number }[] = []) =>
  ({ at, rates: { allowed, denied: 0, shadow: 0 }, policies: policies.map((p) => ({ ...p, denied: 0, shadow: 0 })) }) as unknown as Snapshot;

describe('dashboard: the live series and chart axes', () => {
  it('starts from the hello history, appends snapshots, and keeps at most its capacity', () => {
    const series = new LiveSeries(3);
    series.reset({ at: [1000, 2000], allowed: [1, 2], denied: [0, 0], shadow: [0, 0], policies: [{ policy_id: 'p', allowed: [1, null], denied: [0, null], shadow: [0, null] }] });
    series.push(snapshot(3000, 3, [{ policy_id: 'q', allowed: 3 }]));
    series.push(snapshot(4000, 4, [{ policy_id: 'q', allowed: 4 }]));
    expect(series.size).to.equal(3);
    expect(series.totalsIn(0, 10_000)).to.deep.equal([[2, 3, 4], [2, 3, 4], [0, 0, 0], [0, 0, 0]]);
    // p is unknown in every tick still held (null), q before it first appeared.
    expect(series.policyIn('p', 0, 10_000)[1]).to.deep.equal([null, null, null]);
    expect(series.policyIn('q', 0, 10_000)[1]).to.deep.equal([null, 3, 4]);
    expect(series.totalsIn(3000, 3500)[0]).to.deep.equal([3]);
    expect(series.newest).to.equal(4000);
  });

  it('draws an empty range as a flat zero line across it, and a filled one as it is', () => {
    expect(drawable([[], [], [], []], 100, 400)).to.deep.equal([[100, 400], [0, 0], [0, 0], [0, 0]]);
    expect(drawable([[200], [1], [2], [3]], 100, 400)).to.deep.equal([[200], [1], [2], [3]]);
  });

  it('labels minutes-long ranges in clock time, never dates or fractions of a second', () => {
    const at = new Date(2027, 0, 5, 13, 7, 30).getTime() / 1000;
    expect(timeAxis(300).label(at)).to.equal('13:07:30');
    expect(timeAxis(900).label(at)).to.equal('13:07');
    expect(timeAxis(3600).label(at)).to.equal('13:07');
    // Steps of whole seconds, at least 30: a 5-minute range never gets sub-second ticks.
    for (const range of [300, 900, 3600]) for (const step of timeAxis(range).incrs) expect(step).to.be.at.least(30);
  });
});
