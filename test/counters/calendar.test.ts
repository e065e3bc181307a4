/**
 * Calendar periods on the counters (fixed_window and quota with `calendar`), on the emulator and on
 * the Lua scripts with explicit times: a day of 23 and one of 25 hours, a month end in a zone with a
 * 30-minute offset, leases' tags. And the store's clock picks the period of the pair the server
 * passed: the scripts run directly with a pair computed before a boundary and a clock after it.
 */
import { expect } from 'chai';
import type { CalendarSpec } from '../../src/counters/counter-spec.js';
import { isCalendarSpec, windowMsOf } from '../../src/counters/counter-spec.js';
import { counterKeys } from '../../src/counters/keys.js';
import { readScript } from '../../src/redis/lua-scripts.js';
import { FIXED_WINDOW, QUOTA } from '../../src/redis/counter-script-protocols.js';
import { calendarPeriods, CalendarPeriods } from '../../src/util/calendar-period.js';
import { connectRedisStore, forEachStore, getSuiteRedis } from '../support/counter-stores.js';
import { randomPrefix } from '../support/redis.js';

const HOUR = 3_600_000;

/** Berlin's clocks go forward on 2027-03-28 at 01:00Z and back on 2027-10-31 at 01:00Z (after T0: explicit times stay in Redis's future). */
const BERLIN_SPRING_DAY = Date.UTC(2027, 2, 27, 23); // 2027-03-28 00:00 CET
const BERLIN_AUTUMN_DAY = Date.UTC(2027, 9, 30, 22); // 2027-10-31 00:00 CEST

function spec(type: 'fixed_window' | 'quota', limit: number, periods: CalendarPeriods): CalendarSpec {
  return type === 'fixed_window' ? { type, limit, windowMs: 0, calendar: periods } : { type, limit, periodMs: 0, calendar: periods };
}

describe('calendar periods on the counters', function () {
  forEachStore((_name, getStore) => {
    for (const type of ['fixed_window', 'quota'] as const) {
      describe(type, function () {
        it('a day with the clocks going forward is 23 hours: used up, refused until the next local midnight', async function () {
          const { store, keys } = getStore();
          const s = spec(type, 2, calendarPeriods('day', 'Europe/Berlin'));
          const k = keys('cal-day', s);
          const noon = BERLIN_SPRING_DAY + 11 * HOUR; // 12:00 CEST
          expect(windowMsOf(s, noon)).to.equal(23 * HOUR);
          expect(await store.consume(k, s, 2, noon)).to.deep.equal({ allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 12 * HOUR });
          expect(await store.consume(k, s, 1, noon + 1)).to.deep.equal({ allowed: false, remaining: 0, retryAfterMs: 12 * HOUR - 1, resetAfterMs: 12 * HOUR - 1 });
          // 2027-03-29 00:00 CEST is 22:00Z: a whole budget again.
          const next = BERLIN_SPRING_DAY + 23 * HOUR;
          expect(await store.consume(k, s, 1, next - 1)).to.include({ allowed: false, retryAfterMs: 1 });
          expect(await store.consume(k, s, 1, next)).to.deep.equal({ allowed: true, remaining: 1, retryAfterMs: 0, resetAfterMs: 24 * HOUR });
        });

        it('a day with the clocks going back is 25 hours', async function () {
          const { store, keys } = getStore();
          const s = spec(type, 1, calendarPeriods('day', 'Europe/Berlin'));
          const k = keys('cal-autumn', s);
          expect(windowMsOf(s, BERLIN_AUTUMN_DAY)).to.equal(25 * HOUR);
          expect(await store.consume(k, s, 1, BERLIN_AUTUMN_DAY)).to.include({ allowed: true, resetAfterMs: 25 * HOUR });
          expect(await store.consume(k, s, 1, BERLIN_AUTUMN_DAY + 24 * HOUR)).to.include({ allowed: false, retryAfterMs: HOUR });
          expect(await store.consume(k, s, 1, BERLIN_AUTUMN_DAY + 25 * HOUR)).to.include({ allowed: true });
        });

        it('a month in Adelaide (+10:30) ends at local midnight of the 1st; a peek and a refund stay in it', async function () {
          const { store, keys } = getStore();
          const s = spec(type, 10, calendarPeriods('month', 'Australia/Adelaide'));
          const k = keys('cal-month', s);
          // 2028-03-01 00:00 ACDT (+10:30) is 2028-02-29T13:30Z (a leap year).
          const end = Date.UTC(2028, 1, 29, 13, 30);
          const t = end - 90_000;
          expect(await store.consume(k, s, 7, t)).to.deep.equal({ allowed: true, remaining: 3, retryAfterMs: 0, resetAfterMs: 90_000 });
          expect(await store.peek(k, s, t + 1)).to.deep.equal({ allowed: true, remaining: 3, retryAfterMs: 0, resetAfterMs: 89_999 });
          expect(await store.refund(k, s, 2, t + 2)).to.deep.equal({ allowed: true, remaining: 5, retryAfterMs: 0, resetAfterMs: 89_998 });
          expect(await store.peek(k, s, end)).to.deep.equal({ allowed: true, remaining: 10, retryAfterMs: 0, resetAfterMs: 0 });
        });

        it("a take's tag is the period's start; a give after the period ended lapses", async function () {
          const { store, keys } = getStore();
          const periods = calendarPeriods('hour', 'Asia/Kolkata');
          const s = spec(type, 5, periods);
          const k = keys('cal-take', s);
          const t = Date.UTC(2027, 5, 1, 10, 40); // 16:10 IST: the hour began at 10:30Z
          const taken = await store.take!(k, s, 3, t);
          expect(taken).to.include({ units: 3, windowTag: Date.UTC(2027, 5, 1, 10, 30), windowLeftMs: 50 * 60_000 });
          expect(await store.giveBack!(k, s, { units: 1, windowTag: taken.windowTag, nowMs: t + 1 })).to.include({ units: 1, remaining: 3 });
          const late = await store.giveBack!(k, s, { units: 2, windowTag: taken.windowTag, nowMs: Date.UTC(2027, 5, 1, 11, 30) });
          expect(late).to.include({ units: 0, lapsed: 2, remaining: 5 });
        });
      });
    }

    it('a calendar counter and an epoch-aligned one of the same policy are different keys', function () {
      const { keys } = getStore();
      const calendar = spec('fixed_window', 1, calendarPeriods('day', 'UTC'));
      expect(isCalendarSpec(calendar)).to.equal(true);
      expect(keys('p', calendar)[0]).to.match(/:fixed_window:calendar$/);
      expect(keys('p', { type: 'fixed_window', limit: 1, windowMs: 86_400_000 })[0]).to.match(/:fixed_window$/);
    });
  });

  describe('the store clock picks the period (the scripts, run directly)', function () {
    this.timeout(20_000);
    const periods = new CalendarPeriods('day', 'Europe/Berlin');
    // The server's pair, computed before the spring day ended: [the spring day, the next day, its end].
    const serverNow = BERLIN_SPRING_DAY + 23 * HOUR - 5;
    const pair = periods.around(serverNow);

    for (const name of ['fixed_window', 'quota'] as const) {
      it(`${name}.lua: a clock still in the period, past its end, or outside the pair`, async function () {
        const redis = await getSuiteRedis();
        const store = connectRedisStore(redis.url);
        try {
          await store.waitUntilReady();
          const script = readScript(name);
          const key = counterKeys(randomPrefix(), 'direct', spec(name, 3, periods), [])[0];
          // A calendar spec's length is 0; its period pair goes last (the scripts' optional arguments).
          const periodArgs = { operation: 'consume', units: 1, limit: 3, periodStart: pair[0], nextStart: pair[1], nextEnd: pair[2] };
          const argv = name === 'fixed_window' ? FIXED_WINDOW.argv('counter', { ...periodArgs, windowMs: 0 }) : QUOTA.argv('counter', { ...periodArgs, periodMs: 0 });
          const run = (now: number) => store.client.eval(script.lua, 1, key, String(now), ...argv);
          expect(pair[1]).to.equal(BERLIN_SPRING_DAY + 23 * HOUR);
          // The store's clock 5 ms before the change: the period that is ending.
          expect(await run(pair[1] - 5)).to.deep.equal([1, 2, 0, 5]);
          // The store's clock past it, with the same pair: the next period, whole again.
          expect(await run(pair[1] + 10)).to.deep.equal([1, 2, 0, 24 * HOUR - 10]);
          // A clock outside both periods: an error, never a guess.
          let error: unknown;
          await run(pair[2] + 1).catch((e: unknown) => (error = e));
          expect(String(error)).to.match(/outside the calendar periods passed/);
        } finally {
          await store.close();
        }
      });
    }
  });
});
