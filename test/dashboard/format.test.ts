/**
 * The page's lease and budget phrases (dashboard/src/format.ts, DOM-free): the lease defaults it fills in
 * are the schema's (the bundle must not import the server, so they are written there again).
 */
import { expect } from 'chai';
import type { StoredPolicy } from '@rl/client/admin-client';
import { calendarPeriodText } from '@rl/client/admin-client';
import { budgetOf, leaseSummary, limitSummary } from '../../dashboard/src/format.js';
import { LEASE_MAX_HOLD_MS, LEASE_MAX_UNITS } from '../../src/schema/policy.js';

const base = { policy_id: 'p', algorithm: { type: 'fixed_window', limit: 10, window: '1m' } } as unknown as StoredPolicy;

describe("dashboard: a policy's lease and budget", () => {
  it("fills in the schema's lease defaults", () => {
    expect(leaseSummary({ ...base, lease: {} })).to.equal(`${LEASE_MAX_UNITS.default} units, held ≤ ${LEASE_MAX_HOLD_MS.default / 1000}s`);
    expect(leaseSummary({ ...base, lease: { max_units: 7, max_hold: '250ms' } })).to.equal('7 units, held ≤ 250ms');
    expect(leaseSummary(base)).to.equal(undefined);
  });

  it('reads a budget when the server sends one; none is regional', () => {
    expect([budgetOf(base), budgetOf({ ...base, budget: 'global' }), budgetOf({ ...base, budget: 'regional' })]).to.deep.equal(['regional', 'global', 'regional']);
  });

  it("shows a calendar policy's period as the SDK words it", () => {
    const monthly = { ...base, algorithm: { type: 'quota', limit: 10000, calendar: 'month', timezone: 'Europe/Berlin' } } as unknown as StoredPolicy;
    expect(limitSummary(monthly)).to.equal(`10000 ${calendarPeriodText(monthly.algorithm)}`);
    expect(limitSummary(monthly)).to.equal('10000 per calendar month, Europe/Berlin');
    const daily = { ...base, algorithm: { type: 'fixed_window', limit: 5, calendar: 'day' } } as unknown as StoredPolicy;
    expect(limitSummary(daily)).to.equal('5 per calendar day, UTC');
  });
});
