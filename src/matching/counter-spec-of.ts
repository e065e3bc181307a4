import type { CounterSpec, GlobalBudget } from '../counters/counter-spec.js';
import { compileShares } from '../policy/budget-shares.js';
import type { AlgorithmConfig, AlgorithmType, Policy } from '../policy/types.js';
import { compileLease } from '../policy/lease-terms.js';
import { calendarPeriods, DEFAULT_TIMEZONE, type CalendarPeriods } from '../util/calendar-period.js';
import { parseDuration } from '../util/duration.js';

const DEFAULT_LEASE_TTL_SECS = 120;

/**
 * The counter spec of a policy: its algorithm's, marked when the policy's budget is global, with the
 * region holder's compiled lease (docs/reference.md "Slots, leases and pools": the policy's lease.max_hold, `1s` by default).
 */
export function policySpecOf(policy: Pick<Policy, 'policy_id' | 'algorithm' | 'budget' | 'budget_shares' | 'lease'>): CounterSpec {
  const spec = counterSpecOf(policy.algorithm);
  if (policy.budget !== 'global') return spec;
  const lease = compileLease(policy, 'region');
  const global: GlobalBudget = lease ? { policyId: policy.policy_id, lease } : { policyId: policy.policy_id };
  // Validation allows shares only on the window algorithms, which have a limit.
  if (policy.budget_shares && 'limit' in spec) global.shares = compileShares(policy.budget_shares, spec.limit);
  return { ...spec, global };
}

/**
 * A policy's algorithm as the counters count it: the CounterSpec derived from an AlgorithmConfig that
 * policy validation has already accepted, when the policy is compiled; throws on
 * anything validation should have caught (a bug, not bad input).
 */
export function counterSpecOf(config: AlgorithmConfig): CounterSpec {
  const type: AlgorithmType = config.type;
  switch (type) {
    case 'fixed_window':
      if (config.calendar !== undefined) return { type, limit: need(config.limit, 'limit'), windowMs: 0, calendar: periodsOf(config) };
      return { type, limit: need(config.limit, 'limit'), windowMs: durationMs(config.window, 'window') };
    case 'sliding_window_log':
      return { type, limit: need(config.limit, 'limit'), windowMs: durationMs(config.window, 'window') };
    case 'sliding_window_counter':
      return {
        type,
        limit: need(config.limit, 'limit'),
        windowMs: durationMs(config.window, 'window'),
        subWindows: config.sub_window_count ?? 1,
      };
    case 'token_bucket':
    case 'leaky_bucket': {
      const limit = need(config.limit, 'limit');
      const explicitRate = type === 'token_bucket' ? config.refill_rate : config.leak_rate;
      const rate =
        explicitRate !== undefined
          ? { rateUnits: explicitRate, ratePeriodMs: 1000 }
          : { rateUnits: limit, ratePeriodMs: durationMs(config.window, 'window') };
      return { type, capacity: config.burst ?? limit, ...rate };
    }
    case 'quota':
      if (config.calendar !== undefined) return { type, limit: need(config.limit, 'limit'), periodMs: 0, calendar: periodsOf(config) };
      return {
        type,
        limit: need(config.limit, 'limit'),
        periodMs: durationMs(config.quota_period ?? config.window, 'quota_period'),
      };
    case 'concurrency':
      return {
        type,
        maxConcurrency: need(config.max_concurrency ?? config.limit, 'max_concurrency'),
        leaseTtlMs: leaseTtlMs(config.lease_ttl),
      };
  }
}

/** The calendar periods of `algorithm.calendar` in `algorithm.timezone` (default UTC), shared per unit and zone. */
function periodsOf(config: AlgorithmConfig): CalendarPeriods {
  return calendarPeriods(config.calendar!, config.timezone ?? DEFAULT_TIMEZONE);
}

/** lease_ttl is a duration string or a whole number of seconds (docs/algorithms.md says seconds). */
function leaseTtlMs(value: string | number | undefined): number {
  if (value === undefined) return DEFAULT_LEASE_TTL_SECS * 1000;
  if (typeof value === 'number') return value * 1000;
  return durationMs(value, 'lease_ttl');
}

function need(value: number | undefined, field: string): number {
  if (value === undefined) throw new Error(`algorithm.${field} missing after validation`);
  return value;
}

function durationMs(value: string | undefined, field: string): number {
  const parsed = parseDuration(value);
  if ('error' in parsed) throw new Error(`algorithm.${field} invalid after validation: ${parsed.error}`);
  return parsed.ms;
}
