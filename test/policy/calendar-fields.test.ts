import { expect } from 'chai';
import { calendarPeriodText } from '@rl/client';
import { renderRateLimitHeaders } from '@rl/client/headers';
import { isCalendarSpec } from '../../src/counters/counter-spec.js';
import { counterSpecOf } from '../../src/matching/counter-spec-of.js';
import { validatePolicy } from '../../src/policy/validate.js';
import { postJson } from '../support/http.js';
import { wholeServerSuite } from '../support/whole-server.js';

/** `algorithm.calendar` and `algorithm.timezone`: validation (422s naming the field), the compiled spec, and a whole server's answer. */

const policy = (algorithm: Record<string, unknown>) => ({ policy_id: 'monthly', algorithm });

function errors(algorithm: Record<string, unknown>): { field: string; message: string }[] {
  const r = validatePolicy(policy(algorithm));
  if (r.ok) throw new Error(`expected errors, got ${JSON.stringify(r.policy)}`);
  return r.errors;
}

describe('algorithm.calendar and algorithm.timezone', function () {
  it('accepts a calendar unit in place of window or quota_period, and stores both fields as given', function () {
    for (const type of ['fixed_window', 'quota']) {
      const r = validatePolicy(policy({ type, limit: 10_000, calendar: 'month', timezone: 'Europe/Berlin' }));
      if (!r.ok) throw new Error(JSON.stringify(r.errors));
      expect(r.policy.algorithm).to.deep.equal({ type, limit: 10_000, calendar: 'month', timezone: 'Europe/Berlin' });
      const spec = counterSpecOf(r.policy.algorithm);
      expect(isCalendarSpec(spec) && [spec.calendar.unit, spec.calendar.zone]).to.deep.equal(['month', 'Europe/Berlin']);
    }
    const utc = validatePolicy(policy({ type: 'quota', limit: 5, calendar: 'week' }));
    if (!utc.ok) throw new Error(JSON.stringify(utc.errors));
    const spec = counterSpecOf(utc.policy.algorithm);
    expect(isCalendarSpec(spec) && spec.calendar.zone).to.equal('UTC');
  });

  it('refuses calendar beside window or quota_period, naming algorithm.calendar', function () {
    expect(errors({ type: 'fixed_window', limit: 1, window: '1d', calendar: 'day' }).map((e) => e.field)).to.deep.equal(['algorithm.calendar']);
    expect(errors({ type: 'quota', limit: 1, quota_period: '30d', calendar: 'month' }).map((e) => e.field)).to.deep.equal(['algorithm.calendar']);
    expect(errors({ type: 'quota', limit: 1, window: '30d', calendar: 'month' })[0].message).to.match(/not both/);
  });

  it('refuses an unknown unit naming algorithm.calendar, and an unknown zone naming algorithm.timezone', function () {
    const unit = errors({ type: 'quota', limit: 1, calendar: 'months' });
    expect(unit.map((e) => e.field)).to.deep.equal(['algorithm.calendar']);
    expect(unit[0].message).to.match(/did you mean `month`/);
    expect(errors({ type: 'quota', limit: 1, calendar: 1 }).map((e) => e.field)).to.deep.equal(['algorithm.calendar']);
    for (const zone of ['Mars/Olympus', '+01:00', '', 42]) {
      expect(errors({ type: 'fixed_window', limit: 1, calendar: 'day', timezone: zone }).map((e) => e.field), String(zone)).to.deep.equal(['algorithm.timezone']);
    }
    expect(errors({ type: 'fixed_window', limit: 1, window: '1m', timezone: 'UTC' }).map((e) => e.field)).to.deep.equal(['algorithm.timezone']);
    expect(errors({ type: 'sliding_window_log', limit: 1, window: '1m', calendar: 'day' }).map((e) => e.field)).to.deep.equal(['algorithm.calendar']);
  });

  it('reads as "per calendar month, Europe/Berlin"', function () {
    expect(calendarPeriodText({ calendar: 'month', timezone: 'Europe/Berlin' })).to.equal('per calendar month, Europe/Berlin');
    expect(calendarPeriodText({ calendar: 'day' })).to.equal('per calendar day, UTC');
    expect(calendarPeriodText({})).to.equal(undefined);
  });

  describe('a whole server', function () {
    this.timeout(30_000);
    const whole = wholeServerSuite('rl-calendar-');

    it("answers with the period's length as window, counts to its end, and refuses bad fields with 422", async function () {
      const kolkata = { policy_id: 'daily', scope: { endpoint: '/daily' }, algorithm: { type: 'fixed_window', limit: 2, calendar: 'day', timezone: 'Asia/Kolkata' } };
      const { server, url } = await whole.start([kolkata]);
      try {
        const before = Date.now();
        const first = (await postJson(`${url}/rl/v1/check`, { endpoint: '/daily' })).body as Record<string, number>;
        // The day in Kolkata (no daylight saving) ends at 18:30Z.
        const end = Math.ceil((before - 18.5 * 3_600_000) / 86_400_000) * 86_400_000 + 18.5 * 3_600_000;
        expect(first).to.include({ allowed: true, remaining: 1, limit: 2, window: 86_400_000 });
        expect(first.reset_after).to.be.at.most(end - before).and.at.least(end - Date.now() - 1);
        const headers = Object.fromEntries(renderRateLimitHeaders(first as never));
        expect(headers['RateLimit-Policy']).to.equal('"daily";q=2;w=86400');
        const bad = await postJson(`${url}/rl/v1/policies`, { policy_id: 'bad', algorithm: { type: 'quota', limit: 1, calendar: 'fortnight' } });
        expect(bad.status).to.equal(422);
        expect(JSON.stringify(bad.body)).to.include('algorithm.calendar');
        const zone = await postJson(`${url}/rl/v1/policies`, { policy_id: 'bad', algorithm: { type: 'quota', limit: 1, calendar: 'day', timezone: 'Europe/Atlantis' } });
        expect(zone.status).to.equal(422);
        expect(JSON.stringify(zone.body)).to.include('algorithm.timezone');
      } finally {
        await server.drain();
      }
    });
  });
});
