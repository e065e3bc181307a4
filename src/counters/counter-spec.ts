import type { CalendarPeriods, PeriodPair } from '../util/calendar-period.js';

/**
 * The numeric parameters one algorithm needs, derived once from a validated policy when policies
 * change (matching/counter-spec-of.ts; never on the hot path). Both counter stores take exactly these
 * numbers, and the Redis store passes them to the Lua scripts as ARGV in the order each script declares
 * (redis/counter-script-protocols.ts).
 *
 * Rates are kept as a fraction `units / periodMs` instead of a float per millisecond, so the default
 * rate (limit per window) refills exactly `limit` after one window: `window * limit / window` is exact
 * in floating point, whereas `window * (limit / window)` often is not.
 */
export type RateSpec = (
  | { type: 'fixed_window'; limit: number; windowMs: number; calendar?: CalendarPeriods }
  | { type: 'sliding_window_log'; limit: number; windowMs: number }
  | { type: 'sliding_window_counter'; limit: number; windowMs: number; subWindows: number }
  | { type: 'token_bucket'; capacity: number; rateUnits: number; ratePeriodMs: number }
  | { type: 'leaky_bucket'; capacity: number; rateUnits: number; ratePeriodMs: number }
  | { type: 'quota'; limit: number; periodMs: number; calendar?: CalendarPeriods }
) & { global?: GlobalBudget };

/**
 * A fixed window or quota counted in calendar periods (`algorithm.calendar`): its windowMs / periodMs is
 * 0 and its periods come from `calendar`, handed to the script as a pair (lua/includes/calendar.lua).
 */
export type CalendarSpec = Extract<RateSpec, { type: 'fixed_window' | 'quota' }> & { calendar: CalendarPeriods };

/** Whether the spec counts in calendar periods. */
export function isCalendarSpec(spec: CounterSpec): spec is CalendarSpec {
  return (spec.type === 'fixed_window' || spec.type === 'quota') && spec.calendar !== undefined;
}

/**
 * A `budget: "global"` policy's counter (docs/distribution.md): counted in the global store, served in
 * each region from the units it leased. Part of the spec, so specs stay shared only between policies
 * that count alike.
 */
export interface GlobalBudget {
  policyId: string;
  /** The region holder's lease (src/policy/lease-terms.ts); undefined for an algorithm no lease supports. */
  lease?: CompiledLease;
  /** `budget_shares` (src/policy/budget-shares.ts), for the global counter's takes; absent: none. */
  shares?: CompiledShares;
}

/** A policy's shares, compiled once with the policy: every named region's guarantee, and the common share. */
export interface CompiledShares {
  guaranteed: Readonly<Record<string, number>>;
  common: number;
}

/** What the global counter's script is told of one region's share (lua/includes/shares.lua). */
export interface RegionShare {
  guaranteed: number;
  common: number;
}

/** How a leased algorithm's units lapse: with their window, or max_hold after they left a bucket. */
export type LeaseShape = 'window' | 'bucket';

/** A policy's capacity lease as every level reads it, compiled once with the policy (src/policy/lease-terms.ts). */
export interface CompiledLease {
  shape: LeaseShape;
  /** Most units one take asks for; Infinity at the region level (docs/distribution.md "How it works": no max_units cap there). */
  maxUnits: number;
  /** How long units wait unspent before they go back; a bucket's spend-by after they left it. */
  maxHoldMs: number;
}

export interface ConcurrencySpec {
  type: 'concurrency';
  maxConcurrency: number;
  leaseTtlMs: number;
  global?: GlobalBudget;
}

export type CounterSpec = RateSpec | ConcurrencySpec;

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
 * The period the limit applies to, in whole ms (Decision `window`, docs/algorithms.md): the window, the quota
 * period, the time a bucket takes to refill (or drain) from empty to full, 0 for leases; a calendar
 * period's length is that of the period holding `now`.
 */
export function windowMsOf(spec: CounterSpec, now?: number): number {
  switch (spec.type) {
    case 'fixed_window':
      return spec.calendar === undefined ? spec.windowMs : spec.calendar.lengthAt(now ?? Date.now());
    case 'token_bucket':
    case 'leaky_bucket':
      return Math.ceil((spec.capacity * spec.ratePeriodMs) / spec.rateUnits);
    case 'quota':
      return spec.calendar === undefined ? spec.periodMs : spec.calendar.lengthAt(now ?? Date.now());
    case 'concurrency':
      return 0;
    default:
      return spec.windowMs;
  }
}

/** A calendar spec's period pair as the script reads it after the spec's parameters (lua/includes/calendar.lua). */
export function calendarParams(pair: PeriodPair): string[] {
  return [String(pair[0]), String(pair[1]), String(pair[2])];
}
