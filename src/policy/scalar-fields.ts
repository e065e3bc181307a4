import { describe } from '../model/request-context.js';
import { isIntegerIn } from './bound-wording.js';
import { own, type ErrFn, type Obj } from './field-reading.js';
import { POLICY_FIELDS } from './policy-field-schemas.js';
import { PLAIN_STRING, stringProblem, type StringWording } from './string-problems.js';

/** A policy's single-valued fields with a default: policy_id, enabled, priority, rollout_percent. */

/** `policy_id` ('' when absent or refused); required unless `requireId` is false (POST /policies/validate). */
export function policyIdField(raw: Obj, requireId: boolean, err: ErrFn): string {
  const rawId = own(raw, 'policy_id');
  if (rawId === undefined) {
    if (requireId) err('policy_id', 'is required');
    return '';
  }
  const problem = stringProblem(POLICY_FIELDS.policyId, rawId, POLICY_ID_WORDING);
  if (problem === undefined) return rawId as string;
  err('policy_id', problem);
  return '';
}

/** A policy id's length and pattern are one rule to its writer: one message says both. */
function notAPolicyId(value: string): string {
  const { minLength, maxLength } = POLICY_FIELDS.policyId;
  return `must be ${minLength}–${maxLength} characters of A–Z a–z 0–9 . _ : - starting with a letter or digit, got ${describe(value)}`;
}
const POLICY_ID_WORDING: StringWording = { notString: PLAIN_STRING.notString, tooShort: notAPolicyId, tooLong: notAPolicyId, notPattern: notAPolicyId };

/** `enabled`, default true. */
export function enabledField(raw: Obj, err: ErrFn): boolean {
  const v = own(raw, 'enabled');
  if (v === undefined) return true;
  if (typeof v === 'boolean') return v;
  err('enabled', `must be true or false, got ${describe(v)}`);
  return true;
}

/** `priority`, default 0. */
export function priorityField(raw: Obj, err: ErrFn): number {
  const v = own(raw, 'priority');
  if (v === undefined) return 0;
  const range = POLICY_FIELDS.priority;
  if (isIntegerIn(v, range)) return v;
  err('priority', `must be an integer between ${range.minimum} and ${range.maximum}, got ${describe(v)}`);
  return 0;
}

/** `rollout_percent`, default its maximum (every identity). */
export function rolloutPercentField(raw: Obj, err: ErrFn): number {
  const v = own(raw, 'rollout_percent');
  const range = POLICY_FIELDS.rolloutPercent;
  if (v === undefined) return range.maximum;
  if (isIntegerIn(v, range)) return v;
  err('rollout_percent', `must be an integer from ${range.minimum} to ${range.maximum}, got ${describe(v)}`);
  return range.maximum;
}
