import { LEASE_MAX_HOLD_MS, LEASE_MAX_UNITS } from '../schema/policy.js';
import { parseDuration } from '../util/duration.js';
import type { Policy } from './types.js';

/** A policy's `lease` in numbers (validated: max_units 1–1,000,000, max_hold 100ms–60s). */
export interface LeaseLimits {
  /** Most units one take asks for; Infinity at the region level (CONTRACT: no max_units cap there). */
  maxUnits: number;
  maxHoldMs: number;
}

/**
 * A policy's `lease` in numbers, defaults applied; undefined when it has none. The process holders use
 * both; a global budget's region holder uses `maxHoldMs` (CONTRACT: the policy's lease.max_hold, 1s by default).
 */
export function leaseLimitsOf(policy: Pick<Policy, 'lease'>): LeaseLimits | undefined {
  const lease = policy.lease;
  if (lease === undefined) return undefined;
  const hold = lease.max_hold === undefined ? undefined : parseDuration(lease.max_hold);
  return {
    maxUnits: lease.max_units ?? LEASE_MAX_UNITS.default,
    maxHoldMs: hold !== undefined && 'ms' in hold ? hold.ms : LEASE_MAX_HOLD_MS.default,
  };
}
