import { describe } from '../model/request-context.js';
import { LEASE_KEYS, LEASE_MAX_HOLD_MS, LEASE_MAX_HOLD_TEXT } from '../schema/policy.js';
import { parseDuration } from '../util/duration.js';
import { isObject } from '../util/json-shape.js';
import { isIntegerIn } from './bound-wording.js';
import { own, type ErrFn } from './field-reading.js';
import { LEASE_FIELDS } from './policy-field-schemas.js';
import { LEASABLE_ALGORITHMS, leaseShapeOf } from './lease-terms.js';
import type { AlgorithmType, LeaseConfig } from './types.js';
import { unknownFieldErrors } from './unknown-fields.js';

/** `lease`: kept as given (durations as strings); only the algorithms a lease supports take one. */
export function validateLease(v: unknown, algorithmType: AlgorithmType | undefined, err: ErrFn): LeaseConfig | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) {
    err('lease', `must be an object ({"max_units": ..., "max_hold": ...}), got ${describe(v)}`);
    return undefined;
  }
  for (const e of unknownFieldErrors(v, LEASE_KEYS, 'lease', 'lease')) err(e.field, e.message);
  if (algorithmType !== undefined && leaseShapeOf(algorithmType) === undefined) {
    err('lease', `is not supported for ${algorithmType} (only ${LEASABLE_ALGORITHMS.slice(0, -1).join(', ')} and ${LEASABLE_ALGORITHMS.at(-1)})`);
    return undefined;
  }
  const lease: LeaseConfig = {};
  const units = own(v, 'max_units');
  if (units !== undefined) {
    const { minimum, maximum } = LEASE_FIELDS.maxUnits;
    if (isIntegerIn(units, LEASE_FIELDS.maxUnits)) lease.max_units = units;
    else err('lease.max_units', `must be an integer from ${minimum} to ${maximum}, got ${describe(units)}`);
  }
  const hold = own(v, 'max_hold');
  if (hold !== undefined) {
    const parsed = parseDuration(hold);
    const ms = 'ms' in parsed ? parsed.ms : NaN;
    if (typeof hold === 'string' && ms >= LEASE_MAX_HOLD_MS.min && ms <= LEASE_MAX_HOLD_MS.max) lease.max_hold = hold;
    else err('lease.max_hold', `must be a duration from ${LEASE_MAX_HOLD_TEXT.min} to ${LEASE_MAX_HOLD_TEXT.max} (such as "${LEASE_MAX_HOLD_TEXT.default}"), got ${describe(hold)}`);
  }
  return lease;
}
