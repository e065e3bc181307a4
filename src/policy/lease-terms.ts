import type { CompiledLease, LeaseShape } from '../counters/counter-spec.js';
import { LEASE_MAX_HOLD_MS, LEASE_MAX_UNITS } from '../schema/policy.js';
import { parseDuration } from '../util/duration.js';
import type { AlgorithmType, Policy } from './types.js';

/**
 * The one list of algorithms a capacity lease supports, with the shape of their units (docs/reference.md "Slots, leases and pools": not
 * sliding_window_log, not concurrency): a window's units lapse with their window, a bucket's max_hold
 * after they left it. Validation, the matcher's compiled lease and every lease level read it.
 */
const LEASE_SHAPES: Partial<Record<AlgorithmType, LeaseShape>> = {
  fixed_window: 'window',
  sliding_window_counter: 'window',
  token_bucket: 'bucket',
  leaky_bucket: 'bucket',
  quota: 'window',
};

/** The shape of a leasable algorithm's units; undefined for the algorithms no lease supports. */
export function leaseShapeOf(type: string): LeaseShape | undefined {
  return LEASE_SHAPES[type as AlgorithmType];
}

/** The leasable algorithms, for messages. */
export const LEASABLE_ALGORITHMS: readonly string[] = Object.keys(LEASE_SHAPES);

/**
 * A policy's lease in numbers, defaults applied (validated: max_units 1–1,000,000, max_hold 100ms–60s),
 * parsed once when the matcher compiles the policy. `level`: `process` (the policy's own `lease`; none
 * without one) or `region` (a global budget's region holder: the policy's lease.max_hold, 1s
 * by default, and no max_units cap). Undefined when the algorithm takes no lease.
 */
export function compileLease(policy: Pick<Policy, 'lease' | 'algorithm'>, level: 'process' | 'region'): CompiledLease | undefined {
  const shape = leaseShapeOf(policy.algorithm.type);
  const lease = policy.lease;
  if (shape === undefined || (level === 'process' && lease === undefined)) return undefined;
  const hold = lease?.max_hold === undefined ? undefined : parseDuration(lease.max_hold);
  return {
    shape,
    maxUnits: level === 'region' ? Infinity : (lease?.max_units ?? LEASE_MAX_UNITS.default),
    maxHoldMs: hold !== undefined && 'ms' in hold ? hold.ms : LEASE_MAX_HOLD_MS.default,
  };
}
