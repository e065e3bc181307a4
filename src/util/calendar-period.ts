/**
 * Calendar periods in a time zone (`algorithm.calendar` and `algorithm.timezone`, docs/algorithms.md):
 * where the hour, day, week (from Monday), month or year that holds an instant starts, and where the
 * next one starts. Read from the time-zone database through Intl, so a day is 23 or 25 hours when the
 * clocks change.
 *
 * The rule: a period is a run of instants over which the zone's wall clock shows the same hour (with
 * the same UTC offset), day, week, month or year; it starts at the first instant of that run. So an
 * hour repeated when the clocks go back is two periods, a day whose midnight is skipped starts when the
 * clocks jump, and a day or month skipped whole is no period at all.
 *
 * None of this runs per decision: CalendarPeriods keeps the current and next periods and computes
 * again only when a period has ended.
 */

import { CALENDAR_UNITS } from '../schema/policy.js';

export { CALENDAR_UNITS };
export type CalendarUnit = (typeof CALENDAR_UNITS)[number];

/** The zone of a calendar policy that names none. */
export const DEFAULT_TIMEZONE = 'UTC';

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/**
 * How long after a period ends the server still hands out the period pair that holds it: a store
 * whose clock is this much behind the server's still finds its own period among the two.
 */
export const HANDOVER_MS = 60_000;

/** Whether `name` is a time zone of the database (an IANA name such as `Europe/Berlin`, or `UTC`). */
export function isTimeZone(name: string): boolean {
  // Offsets such as "+01:00" are not zone names, though newer engines accept them.
  if (!/^[A-Za-z][A-Za-z0-9_+\-/]*$/.test(name)) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** One zone's wall clock: its UTC offset at an instant, from the time-zone database. */
class ZoneClock {
  private readonly format: Intl.DateTimeFormat;

  constructor(readonly zone: string) {
    this.format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric',
    });
  }

  /** The zone's offset from UTC at instant `t` (ms): the wall clock shows t + offset as a UTC date would. */
  offsetAt(t: number): number {
    const second = Math.floor(t / 1000) * 1000;
    const p: Record<string, number> = {};
    for (const part of this.format.formatToParts(second)) if (part.type !== 'literal') p[part.type] = Number(part.value);
    return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second) - second;
  }

  /** The earliest second in (lo, hi] whose offset is hi's (lo's differs): where the clocks changed. */
  changeIn(lo: number, hi: number): number {
    const target = this.offsetAt(hi);
    let a = Math.floor(lo / 1000);
    let b = Math.ceil(hi / 1000);
    while (b - a > 1) {
      const m = Math.floor((a + b) / 2);
      if (this.offsetAt(m * 1000) === target) b = m;
      else a = m;
    }
    return b * 1000;
  }

  /**
   * The first instant at which the wall clock reaches `wall` (a wall-clock time written as UTC ms);
   * when the clocks jump over `wall`, the instant they jump. A time shown twice (the clocks went
   * back) is the earlier of its two instants, so a day whose midnight repeats starts at the first.
   */
  instantOf(wall: number, hint: number): number {
    // Every offset in force near `wall`: a day either side covers any zone's offset, and the hint's.
    const candidates = [wall - this.offsetAt(wall - DAY_MS), wall - this.offsetAt(wall + DAY_MS), wall - this.offsetAt(hint)];
    let first = Number.POSITIVE_INFINITY;
    for (const c of candidates) if (c < first && c + this.offsetAt(c) === wall) first = c;
    if (first !== Number.POSITIVE_INFINITY) return first;
    // Skipped: the clocks jumped over `wall` between the earliest and the latest reading of it.
    return this.changeIn(Math.min(...candidates), Math.max(...candidates));
  }
}

/** The wall-clock start of the period holding wall-clock time `wall` (UTC ms as the wall clock reads). */
function wallStart(unit: CalendarUnit, wall: number): number {
  const day = wall - mod(wall, DAY_MS);
  switch (unit) {
    case 'hour':
      return wall - mod(wall, HOUR_MS);
    case 'day':
      return day;
    case 'week':
      // getUTCDay: 0 is Sunday; weeks start on Monday.
      return day - ((new Date(day).getUTCDay() + 6) % 7) * DAY_MS;
    case 'month': {
      const d = new Date(wall);
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
    }
    case 'year':
      return Date.UTC(new Date(wall).getUTCFullYear(), 0, 1);
  }
}

/** The wall-clock start of the period after the one starting at wall-clock time `start`. */
function wallNext(unit: CalendarUnit, start: number): number {
  switch (unit) {
    case 'hour':
      return start + HOUR_MS;
    case 'day':
      return start + DAY_MS;
    case 'week':
      return start + 7 * DAY_MS;
    case 'month': {
      const d = new Date(start);
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
    }
    case 'year':
      return Date.UTC(new Date(start).getUTCFullYear() + 1, 0, 1);
  }
}

function mod(a: number, b: number): number {
  return ((a % b) + b) % b;
}

/** The start of the period holding instant `t`. */
export function periodStart(unit: CalendarUnit, clock: ZoneClock, t: number): number {
  const offset = clock.offsetAt(t);
  const wall = wallStart(unit, t + offset);
  if (unit !== 'hour') return clock.instantOf(wall, t);
  // An hour also ends when the offset changes: back to that change if there was one in the hour.
  const c = wall - offset;
  return clock.offsetAt(c) === offset ? c : clock.changeIn(c, t);
}

/** The start of the period after the one starting at `start`. */
export function nextPeriodStart(unit: CalendarUnit, clock: ZoneClock, start: number): number {
  const offset = clock.offsetAt(start);
  const wall = wallNext(unit, wallStart(unit, start + offset));
  if (unit !== 'hour') return clock.instantOf(wall, start);
  const c = wall - offset;
  return clock.offsetAt(c) === offset ? c : clock.changeIn(start, c);
}

/** [start of the current period, start of the next, end of the next]. */
export type PeriodPair = readonly [number, number, number];

/**
 * One zone's periods of one unit, as the counters read them: the current period and the next, kept
 * until HANDOVER_MS after the current one ends, then computed again. Shared by every policy of that
 * unit and zone (calendarPeriods).
 */
export class CalendarPeriods {
  private readonly clock: ZoneClock;
  private pair: PeriodPair | undefined;

  constructor(readonly unit: CalendarUnit, readonly zone: string) {
    this.clock = new ZoneClock(zone);
  }

  /** The period pair to hand a store whose clock is near `now`: the same array until a period change. */
  around(now: number): PeriodPair {
    const pair = this.pair;
    if (pair !== undefined && now >= pair[0] && now < pair[1] + HANDOVER_MS) return pair;
    this.pair = pair !== undefined && now >= pair[1] && now < pair[2] ? this.rolled(pair) : this.fresh(now);
    return this.pair;
  }

  /** The period holding `now`: [start, end). */
  periodAt(now: number): readonly [number, number] {
    const [a, b, c] = this.around(now);
    return now < b ? [a, b] : [b, c];
  }

  /** The length of the period holding `now` (ms): the Decision's `window`. */
  lengthAt(now: number): number {
    const pair = this.around(now);
    return now < pair[1] ? pair[1] - pair[0] : pair[2] - pair[1];
  }

  /** The start of the period holding `t` (for tests and display). */
  startOf(t: number): number {
    return periodStart(this.unit, this.clock, t);
  }

  /** The start of the period after the one starting at `start`. */
  nextAfter(start: number): number {
    return nextPeriodStart(this.unit, this.clock, start);
  }

  private rolled(pair: PeriodPair): PeriodPair {
    return [pair[1], pair[2], this.nextAfter(pair[2])];
  }

  private fresh(now: number): PeriodPair {
    const start = this.startOf(now);
    // Just after a change, the pair still holds the period that ended, for a store clock a little behind.
    if (now < start + HANDOVER_MS) {
      const previous = this.startOf(start - 1);
      return [previous, start, this.nextAfter(start)];
    }
    const next = this.nextAfter(start);
    return [start, next, this.nextAfter(next)];
  }
}

const shared = new Map<string, CalendarPeriods>();

/** The CalendarPeriods of a unit and zone, one per pair in the process (policies compile to it). */
export function calendarPeriods(unit: CalendarUnit, zone: string): CalendarPeriods {
  const key = `${unit} ${zone}`;
  let periods = shared.get(key);
  if (periods === undefined) {
    periods = new CalendarPeriods(unit, zone);
    shared.set(key, periods);
  }
  return periods;
}

/**
 * The period of a pair that holds `now` (the store's clock): [start, end), or undefined when the clock
 * is outside both. lua/includes/calendar.lua picks the same way; change both together.
 */
export function pickPeriod(pair: PeriodPair, now: number): readonly [number, number] | undefined {
  if (now >= pair[0] && now < pair[1]) return [pair[0], pair[1]];
  if (now >= pair[1] && now < pair[2]) return [pair[1], pair[2]];
  return undefined;
}
