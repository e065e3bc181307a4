import { describe } from '../model/request-context.js';
import { POLICY_KEYS, SEVERITY_LEVELS } from '../schema/policy.js';
import { isObject } from '../util/json-shape.js';
import { validateAlgorithm } from './algorithm-fields.js';
import { validateBudgetShares } from './budget-shares.js';
import { enumField, optionalString, own, unixField, validateLayer, type Obj } from './field-reading.js';
import { validateLease } from './lease-field.js';
import { validateMetadata } from './metadata-field.js';
import { POLICY_FIELDS } from './policy-field-schemas.js';
import { isQuotaShaped, quotaBodyErrors, quotaBodyToPolicy } from './quota-alias.js';
import { enabledField, policyIdField, priorityField, rolloutPercentField } from './scalar-fields.js';
import { validateScope } from './scope-field.js';
import { validateSourceIpPrefix } from './source-ip-prefix-field.js';
import { unknownFieldErrors } from './unknown-fields.js';
import type { Budget, EnforcementMode, FailureMode, FieldError, LimitAction, Policy } from './types.js';

/**
 * Policy validation: an untrusted decoded JSON value in, a normalised policy (every default applied)
 * or EVERY problem as `{field, message}` out. Never throws on any input.
 *
 * The shapes are defined once in schema/policy.ts (types, OpenAPI document, bounds); this module
 * enforces them with messages that name the field, each bound read from the schema objects
 * (policy-field-schemas.ts), plus what a schema cannot say (durations that parse,
 * a sub_window_count dividing the window, a match_expr that compiles). Collections are counted before
 * any per-item work (schema/limits.ts), so a huge scope or metadata costs no more than a small one.
 *
 * The result is built from known keys only, into fresh objects (maps are prototype-less), so keys such
 * as `__proto__` in the input cannot reach anything.
 */

/** A policy before the server stamps `version`, `created_at` and `updated_at`. */
export type PolicyInput = Omit<Policy, 'version' | 'created_at' | 'updated_at'>;

export type ValidationResult = { ok: true; policy: PolicyInput } | { ok: false; errors: FieldError[] };

export interface ValidateOptions {
  /** When false (POST /policies/validate), a missing `policy_id` is not an error. Default true. */
  requireId?: boolean;
}

export { SEVERITY_LEVELS };

export function validatePolicy(raw: unknown, options: ValidateOptions = {}): ValidationResult {
  try {
    if (isQuotaShaped(raw)) return validateQuotaShaped(raw as Obj, options);
    return validateCore(raw, options);
  } catch (err) {
    // Defensive: validation must never throw on input. Anything here is a bug, reported as a field error.
    return { ok: false, errors: [{ field: 'body', message: `could not be validated: ${String(err)}` }] };
  }
}

export { oversizedCollections } from './oversized-collections.js';

// ---------------------------------------------------------------------------------------------------
// The Policy shape

function validateCore(raw: unknown, options: ValidateOptions): ValidationResult {
  const errors: FieldError[] = [];
  const err = (field: string, message: string): void => {
    errors.push({ field, message });
  };
  if (!isObject(raw)) {
    return { ok: false, errors: [{ field: 'body', message: `must be a JSON object (a policy), got ${describe(raw)}` }] };
  }
  const requireId = options.requireId ?? true;
  errors.push(...unknownFieldErrors(raw, POLICY_KEYS, '', 'policy'));

  const policyId = policyIdField(raw, requireId, err);

  const name = optionalString(raw, 'name', POLICY_FIELDS.name, err) ?? policyId;
  const description = optionalString(raw, 'description', POLICY_FIELDS.description, err) ?? '';

  const enabled = enabledField(raw, err);
  const priority = priorityField(raw, err);

  const action = enumField<LimitAction>(raw, 'action', POLICY_FIELDS.action, 'deny', err);
  const failureMode = enumField<FailureMode>(raw, 'failure_mode', POLICY_FIELDS.failureMode, 'fail_open', err);
  const enforcementMode = enumField<EnforcementMode>(raw, 'enforcement_mode', POLICY_FIELDS.enforcementMode, 'enforce', err);
  // Kept only when given, so a policy without it reads back exactly as before regions existed.
  const budget = own(raw, 'budget') === undefined ? undefined : enumField<Budget>(raw, 'budget', POLICY_FIELDS.budget, 'regional', err);
  const layer = validateLayer(own(raw, 'layer'), err);

  const rolloutPercent = rolloutPercentField(raw, err);

  const validFrom = unixField(raw, 'valid_from_unix', POLICY_FIELDS.validFromUnix, err);
  const validTo = unixField(raw, 'valid_to_unix', POLICY_FIELDS.validToUnix, err);
  if (validFrom !== undefined && validTo !== undefined && validFrom !== 0 && validTo !== 0 && validFrom >= validTo) {
    err('valid_to_unix', `must be later than valid_from_unix (${validFrom}), got ${validTo}`);
  }

  const scope = validateScope(own(raw, 'scope'), err);
  const algorithm = validateAlgorithm(own(raw, 'algorithm'), action, err);
  const metadata = validateMetadata(own(raw, 'metadata'), err);
  const sourceIpPrefix = validateSourceIpPrefix(own(raw, 'source_ip_prefix'), err);
  const lease = validateLease(own(raw, 'lease'), algorithm?.type, err);
  const budgetShares = validateBudgetShares(own(raw, 'budget_shares'), budget, algorithm?.type, err);

  if (errors.length > 0) return { ok: false, errors };
  const policy: PolicyInput = {
    policy_id: policyId,
    name,
    description,
    enabled,
    priority,
    scope: scope!,
    algorithm: algorithm!,
    action: action!,
    failure_mode: failureMode!,
    enforcement_mode: enforcementMode!,
    rollout_percent: rolloutPercent,
    metadata: metadata!,
    valid_from_unix: validFrom ?? 0,
    valid_to_unix: validTo ?? 0,
    ...(budget !== undefined && { budget }),
    ...(layer !== undefined && { layer }),
  };
  if (sourceIpPrefix !== undefined) policy.source_ip_prefix = sourceIpPrefix;
  if (lease !== undefined) policy.lease = lease;
  if (budgetShares !== undefined) policy.budget_shares = budgetShares;
  return { ok: true, policy };
}

// ---------------------------------------------------------------------------------------------------
// The quota-shaped body (quota-alias.ts translates it)

function validateQuotaShaped(raw: Obj, options: ValidateOptions): ValidationResult {
  const alias = quotaBodyToPolicy(raw);
  const core = validateCore(alias.policy, options);
  if (core.ok && alias.errors.length === 0) return core;
  return { ok: false, errors: quotaBodyErrors(alias.names, alias.errors, core.ok ? [] : core.errors) };
}
