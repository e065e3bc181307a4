import { parseDuration } from '../util/duration.js';
import type { AlgorithmConfig, AlgorithmType, Policy } from '../policy/types.js';

/**
 * The numeric parameters one algorithm needs, derived once from a validated AlgorithmConfig when
 * policies change (never on the hot path). Both counter stores take exactly these numbers, and the
 * Redis store passes them to the Lua scripts as ARGV in the order `scriptArgs` gives.
 *
 * Rates are kept as a fraction `units / periodMs` instead of a float per millisecond, so the default
 * rate (limit per window) refills exactly `limit` after one window: `window * limit / window` is exact
 * in floating point, whereas `window * (limit / window)` often is not.
 */
export type RateSpec = (
  | { type: 'fixed_window'; limit: number; windowMs: number }
  | { type: 'sliding_window_log'; limit: number; windowMs: number }
  | { type: 'sliding_window_counter'; limit: number; windowMs: number; subWindows: number }
  | { type: 'token_bucket'; capacity: number; rateUnits: number; ratePeriodMs: number }
  | { type: 'leaky_bucket'; capacity: number; rateUnits: number; ratePeriodMs: number }
  | { type: 'quota'; limit: number; periodMs: number }
) & { global?: GlobalBudget };

/**
 * A `budget: "global"` policy's counter (docs/distribution.md): counted in the global store, served in
 * each region from the units it leased. Part of the spec, so specs stay shared only between policies
 * that count alike.
 */
export interface GlobalBudget {
  policyId: string;
  /** How long a region's units wait unspent before they go back (the policy's lease.max_hold, default 1 s). */
  maxHoldMs: number;
}

export interface LeaseSpec {
  type: 'concurrency';
  maxConcurrency: number;
  leaseTtlMs: number;
  global?: GlobalBudget;
}

export type CounterSpec = RateSpec | LeaseSpec;

const DEFAULT_LEASE_TTL_SECS = 120;
/** CONTRACT.md: a region's holder uses the policy's lease.max_hold, `1s` by default. */
const DEFAULT_MAX_HOLD_MS = 1000;

/** The counter spec of a policy: its algorithm's, marked when the policy's budget is global. */
export function policySpecOf(policy: Pick<Policy, 'policy_id' | 'algorithm' | 'budget'>): CounterSpec {
  const spec = counterSpecOf(policy.algorithm);
  if (policy.budget !== 'global') return spec;
  return { ...spec, global: { policyId: policy.policy_id, maxHoldMs: DEFAULT_MAX_HOLD_MS } };
}

/** What `remaining` counts down from: the matched limit reported in decisions. */
export function capacityOf(spec: CounterSpec): number {
  switch (spec.type) {
    case 'token_bucket':
    case 'leaky_bucket':
      return spec.capacity;
    case 'concurrency':
      return spec.maxConcurrency;
    default:
      return spec.limit;
  }
}

/**
 * The period the limit applies to, in whole ms (CONTRACT: Decision `window`): the window, the quota
 * period, the time a bucket takes to refill (or drain) from empty to full, 0 for leases.
 */
export function windowMsOf(spec: CounterSpec): number {
  switch (spec.type) {
    case 'token_bucket':
    case 'leaky_bucket':
      return Math.ceil((spec.capacity * spec.ratePeriodMs) / spec.rateUnits);
    case 'quota':
      return spec.periodMs;
    case 'concurrency':
      return 0;
    default:
      return spec.windowMs;
  }
}

/** The ARGV parameters after `now` and `cost`/`lease id`, in the order each Lua script reads them. */
export function scriptParams(spec: CounterSpec): number[] {
  switch (spec.type) {
    case 'fixed_window':
    case 'sliding_window_log':
      return [spec.limit, spec.windowMs];
    case 'sliding_window_counter':
      return [spec.limit, spec.windowMs, spec.subWindows];
    case 'token_bucket':
    case 'leaky_bucket':
      return [spec.capacity, spec.rateUnits, spec.ratePeriodMs];
    case 'quota':
      return [spec.limit, spec.periodMs];
    case 'concurrency':
      return [spec.maxConcurrency, spec.leaseTtlMs];
  }
}

/**
 * Derives the spec from an AlgorithmConfig that policy validation has already accepted; throws on
 * anything validation should have caught (a bug, not bad input).
 */
export function counterSpecOf(config: AlgorithmConfig): CounterSpec {
  const type: AlgorithmType = config.type;
  switch (type) {
    case 'fixed_window':
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

/** lease_ttl is a duration string or a whole number of seconds (CONTRACT.md says seconds). */
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
