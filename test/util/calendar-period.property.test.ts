/**
 * Calendar boundaries against an independent computation: the wall clock as Intl.DateTimeFormat names
 * it (date parts, weekday and the offset's own name, `longOffset`), sampled minute by minute. The
 * module under test reads only numeric parts and derives offsets by arithmetic, walks by fixpoints and
 * bisection; this oracle only compares names. A boundary is where the name of the period changes
 * (for hours the offset's name is part of it, so a repeated hour is two periods).
 *
 * Instants are drawn near what goes wrong: month ends (leap Februaries among them), year ends, and
 * the daylight-saving changes of each zone in both directions, in zones with 30-minute offsets
 * (Asia/Kolkata, Australia/Adelaide; Australia/Lord_Howe, whose clock change is 30 minutes) and zones whose
 * change skips or repeats midnight (America/Havana, America/Santiago).
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { CALENDAR_UNITS, CalendarPeriods, HANDOVER_MS, pickPeriod, type CalendarUnit } from '../../src/util/calendar-period.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const ZONES = ['UTC', 'Europe/Berlin', 'America/New_York', 'Australia/Adelaide', 'Asia/Kolkata', 'Australia/Lord_Howe', 'America/Havana', 'America/Santiago'] as const;

const formats = new Map<string, Intl.DateTimeFormat>();
function parts(zone: string, t: number): Record<string, string> {
  let f = formats.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-GB', { timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', hourCycle: 'h23', weekday: 'short', timeZoneName: 'longOffset' });
    formats.set(zone, f);
  }
  return Object.fromEntries(f.formatToParts(t).map((p) => [p.type, p.value]));
}

const WEEKDAYS = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'];

/** The name of the period holding `t` as the wall clock shows it. */
function periodName(unit: CalendarUnit, zone: string, t: number): string {
  const p = parts(zone, t);
  const date = `${p.year}-${p.month}-${p.day}`;
  switch (unit) {
    case 'hour':
      return `${date}T${p.hour} ${p.timeZoneName}`;
    case 'day':
      return date;
    case 'week':
      // The Monday of the week, named by counting days back on the calendar (not by instants).
      return new Date(Date.UTC(Number(p.year), Number(p.month) - 1, Number(p.day) - WEEKDAYS.indexOf(p.weekday))).toISOString().slice(0, 10);
    case 'month':
      return `${p.year}-${p.month}`;
    case 'year':
      return p.year;
  }
}

/** How far apart two samples of the oracle may be without missing a run of a period: a minute for hours and days. */
function sampleStep(unit: CalendarUnit): number {
  return unit === 'hour' || unit === 'day' ? MINUTE : 15 * MINUTE;
}

/** The instants at which the zone's offset changes in [from, to), found by the offset's name alone, to the minute. */
function offsetChanges(zone: string, from: number, to: number): number[] {
  const out: number[] = [];
  let name = parts(zone, from).timeZoneName;
  for (let t = from; t < to; t += HOUR) {
    const next = parts(zone, t + HOUR).timeZoneName;
    if (next !== name) {
      for (let m = t + MINUTE; m <= t + HOUR; m += MINUTE) {
        if (parts(zone, m).timeZoneName !== name) {
          out.push(m);
          break;
        }
      }
      name = next;
    }
  }
  return out;
}

/** Instants near each zone's offset changes in 2023-2025, and near month and year ends (2024 is a leap year). */
const anchors = new Map<string, number[]>(
  ZONES.map((zone) => {
    const changes = offsetChanges(zone, Date.UTC(2023, 0, 1), Date.UTC(2026, 0, 1));
    const monthEnds = Array.from({ length: 36 }, (_, i) => Date.UTC(2023, i + 1, 1));
    return [zone, [...changes, ...monthEnds]];
  }),
);

const instantArb = (zone: string): fc.Arbitrary<number> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.tuple(fc.constantFrom(...anchors.get(zone)!), fc.integer({ min: -2 * DAY, max: 2 * DAY })).map(([a, d]) => a + d) },
    { weight: 1, arbitrary: fc.integer({ min: Date.UTC(1995, 0, 1), max: Date.UTC(2060, 0, 1) }) },
  );

const caseArb = fc.constantFrom(...ZONES).chain((zone) => fc.record({ zone: fc.constant(zone), unit: fc.constantFrom(...CALENDAR_UNITS), t: instantArb(zone) }));

describe('calendar periods (src/util/calendar-period.ts) against the wall clock Intl names', function () {
  this.timeout(120_000);

  it('shows that the anchors hold changes in both directions in every zone with daylight saving', function () {
    for (const zone of ['Europe/Berlin', 'America/New_York', 'Australia/Adelaide', 'Australia/Lord_Howe', 'America/Havana', 'America/Santiago']) {
      const changes = offsetChanges(zone, Date.UTC(2024, 0, 1), Date.UTC(2025, 0, 1));
      expect(changes.length, zone).to.equal(2);
    }
    expect(offsetChanges('Asia/Kolkata', Date.UTC(2024, 0, 1), Date.UTC(2025, 0, 1))).to.deep.equal([]);
  });

  it('the period holding t starts and ends where the name of the period changes, and the name stays the same between', function () {
    fc.assert(
      fc.property(caseArb, ({ zone, unit, t }) => {
        const periods = new CalendarPeriods(unit, zone);
        const start = periods.startOf(t);
        const end = periods.nextAfter(start);
        const name = periodName(unit, zone, t);
        expect(start, 'start').to.be.at.most(t);
        expect(end, 'end').to.be.above(t);
        // Edges to the second: the name changes exactly there.
        expect(periodName(unit, zone, start), 'at start').to.equal(name);
        expect(periodName(unit, zone, start - 1000), 'before start').to.not.equal(name);
        expect(periodName(unit, zone, end - 1000), 'before end').to.equal(name);
        expect(periodName(unit, zone, end), 'at end').to.not.equal(name);
        // Between: sampled, the name never changes.
        const step = sampleStep(unit);
        for (let s = start; s < end; s += step) expect(periodName(unit, zone, s), new Date(s).toISOString()).to.equal(name);
      }),
      { numRuns: 80 },
    );
  });

  it('a day is 23 or 25 hours on a daylight-saving change, a month and a year as long as the calendar says', function () {
    const berlin = (unit: CalendarUnit) => new CalendarPeriods(unit, 'Europe/Berlin');
    // 2024-03-31 (clocks forward) and 2024-10-27 (back) in Berlin.
    const spring = berlin('day').startOf(Date.UTC(2024, 2, 31, 12));
    expect(berlin('day').nextAfter(spring) - spring).to.equal(23 * HOUR);
    const autumn = berlin('day').startOf(Date.UTC(2024, 9, 27, 12));
    expect(berlin('day').nextAfter(autumn) - autumn).to.equal(25 * HOUR);
    // February 2024 (leap year) in Adelaide: 29 days, all at +10:30.
    const feb = new CalendarPeriods('month', 'Australia/Adelaide').startOf(Date.UTC(2024, 1, 15));
    expect(new CalendarPeriods('month', 'Australia/Adelaide').nextAfter(feb) - feb).to.equal(29 * DAY);
    expect(feb).to.equal(Date.UTC(2024, 1, 1) - 10.5 * HOUR);
    // 2024 in Kolkata: 366 days from 2023-12-31T18:30Z.
    const year = new CalendarPeriods('year', 'Asia/Kolkata');
    expect(year.startOf(Date.UTC(2024, 5, 1))).to.equal(Date.UTC(2023, 11, 31, 18, 30));
    expect(year.nextAfter(year.startOf(Date.UTC(2024, 5, 1))) - year.startOf(Date.UTC(2024, 5, 1))).to.equal(366 * DAY);
    // Havana's clocks went back at 01:00 on 2024-11-03, so its midnight was shown twice (04:00Z and 05:00Z):
    // the day starts at the first, and an instant in the repeated hour is in it.
    const havana = new CalendarPeriods('day', 'America/Havana');
    expect(havana.startOf(Date.UTC(2024, 10, 3, 5))).to.equal(Date.UTC(2024, 10, 3, 4));
    expect(havana.nextAfter(Date.UTC(2024, 10, 3, 4)) - Date.UTC(2024, 10, 3, 4)).to.equal(25 * HOUR);
    expect(havana.nextAfter(Date.UTC(2024, 10, 2, 4))).to.equal(Date.UTC(2024, 10, 3, 4));
    // Weeks start on Monday: 2024-01-01 was one.
    expect(new CalendarPeriods('week', 'UTC').startOf(Date.UTC(2024, 0, 7, 23))).to.equal(Date.UTC(2024, 0, 1));
  });

  it('the pair it hands out holds the current period and the next, and one whose clock is up to the handover behind', function () {
    fc.assert(
      fc.property(caseArb, fc.integer({ min: 0, max: 5 }), ({ zone, unit, t }, later) => {
        const periods = new CalendarPeriods(unit, zone);
        // A server whose clock moves on from t: each pair is consistent with the periods around it.
        let now = t;
        for (let i = 0; i <= later; i++) {
          const pair = periods.around(now);
          expect(pair[0]).to.be.below(pair[1]);
          expect(pair[1]).to.equal(periods.nextAfter(pair[0]));
          expect(pair[2]).to.equal(periods.nextAfter(pair[1]));
          const current = pickPeriod(pair, now)!;
          expect(current[0], 'current start').to.equal(periods.startOf(now));
          expect(current[1]).to.equal(periods.nextAfter(current[0]));
          // A store clock a handover behind, or ahead into the next period, still finds its period.
          const behind = Math.max(now - HANDOVER_MS, pair[0]);
          expect(pickPeriod(pair, behind)![0]).to.equal(periods.startOf(behind));
          if (current[0] === pair[0]) expect(pickPeriod(pair, current[1])![0]).to.equal(current[1]);
          else expect(pickPeriod(pair, current[1]), 'past the pair').to.equal(undefined);
          now = current[1] + (i % 2 === 0 ? 1 : HANDOVER_MS);
        }
      }),
      { numRuns: 60 },
    );
  });
});
