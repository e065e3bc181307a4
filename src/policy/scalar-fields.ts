import { describe } from '../model/request-context.js';
import { POLICY_ID_MAX_LENGTH, POLICY_ID_PATTERN, ROLLOUT_PERCENT } from '../schema/policy.js';
import { own, type ErrFn, type Obj } from './field-reading.js';

/** A policy's single-valued fields with a default: policy_id, enabled, priority, rollout_percent. */

/** `policy_id` ('' when absent or refused); required unless `requireId` is false (POST /policies/validate). */
export function policyIdField(raw: Obj, requireId: boolean, err: ErrFn): string {
  const rawId = own(raw, 'policy_id');
  if (rawId === undefined) {
    if (requireId) err('policy_id', 'is required');
  } else if (typeof rawId !== 'string') {
    err('policy_id', `must be a string, got ${describe(rawId)}`);
  } else if (!POLICY_ID_PATTERN.test(rawId)) {
    err(
      'policy_id',
      `must be 1–${POLICY_ID_MAX_LENGTH} characters of A–Z a–z 0–9 . _ : - starting with a letter or digit, got ${describe(rawId)}`,
    );
  } else {
    return rawId;
  }
  return '';
}

/** `enabled`, default true. */
export function enabledField(raw: Obj, err: ErrFn): boolean {
  const v = own(raw, 'enabled');
  if (v === undefined) return true;
  if (typeof v === 'boolean') return v;
  err('enabled', `must be true or false, got ${describe(v)}`);
  return true;
}

/** `priority`, default 0: any safe integer. */
export function priorityField(raw: Obj, err: ErrFn): number {
  const v = own(raw, 'priority');
  if (v === undefined) return 0;
  if (typeof v === 'number' && Number.isSafeInteger(v)) return v;
  err('priority', `must be an integer between ${Number.MIN_SAFE_INTEGER} and ${Number.MAX_SAFE_INTEGER}, got ${describe(v)}`);
  return 0;
}

/** `rollout_percent`, default 100. */
export function rolloutPercentField(raw: Obj, err: ErrFn): number {
  const v = own(raw, 'rollout_percent');
  if (v === undefined) return ROLLOUT_PERCENT.maximum;
  if (typeof v === 'number' && Number.isInteger(v) && v >= ROLLOUT_PERCENT.minimum && v <= ROLLOUT_PERCENT.maximum) return v;
  err('rollout_percent', `must be an integer from ${ROLLOUT_PERCENT.minimum} to ${ROLLOUT_PERCENT.maximum}, got ${describe(v)}`);
  return ROLLOUT_PERCENT.maximum;
}
