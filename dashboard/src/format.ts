import type { StoredPolicy } from '@rl/client/admin-client';

/** "100 / 1m", "burst 20, 5/s", "10 concurrent", …: what a policy allows, in one short phrase. */
export function limitSummary(policy: StoredPolicy): string {
  const a = policy.algorithm;
  // Calendar periods read "10000 per calendar month, Europe/Berlin" (the SDK's calendarPeriodText, which the bundle may not import).
  if (a.calendar !== undefined) return `${a.limit} per calendar ${a.calendar}, ${a.timezone ?? 'UTC'}`;
  switch (a.type) {
    case 'token_bucket':
    case 'leaky_bucket':
      // burst and the refill or leak rate default from limit and window (docs/algorithms.md), so they may be absent.
      return [`${a.limit} / ${a.window}`, a.burst !== undefined ? `burst ${a.burst}` : '', a.refill_rate !== undefined ? `refill ${a.refill_rate}/s` : '', a.leak_rate !== undefined ? `leak ${a.leak_rate}/s` : '']
        .filter(Boolean)
        .join(', ');
    case 'concurrency':
      return `${a.max_concurrency} concurrent`;
    case 'quota':
      return `${a.limit} / ${a.quota_period}`;
    default:
      return `${a.limit} / ${a.window}`;
  }
}

export function rate(value: number): string {
  return value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2);
}

export function time(iso: string): string {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

export function ms(value: number): string {
  return value >= 1000 ? `${(value / 1000).toFixed(value % 1000 === 0 ? 0 : 1)} s` : `${value} ms`;
}

/** docs/reference.md "Two kinds of lease": the defaults of a `lease` given without them. */
const LEASE_DEFAULTS = { max_units: 100, max_hold: '1s' };

/** "50 units, held ≤ 2s": a policy's process lease with its defaults filled in; undefined without one. */
export function leaseSummary(policy: StoredPolicy): string | undefined {
  if (policy.lease === undefined) return undefined;
  const { max_units = LEASE_DEFAULTS.max_units, max_hold = LEASE_DEFAULTS.max_hold } = policy.lease;
  return `${max_units} units, held ≤ ${max_hold}`;
}

/** "regional" (the default: a policy without `budget`) or "global" (docs/reference.md "Regions"). */
export function budgetOf(policy: StoredPolicy): string {
  return policy.budget ?? 'regional';
}
