import type { AlgorithmFields, PolicyFields, PolicyLease } from '@rl/client/admin-client';
import type { ALGORITHM_TYPES, BUDGETS, ENFORCEMENT_MODES, FAILURE_MODES, LIMIT_ACTIONS } from '../schema/policy.js';

// The value lists live with the API's shapes; re-exported for the policy code that reads them.
export { ALGORITHM_TYPES, BUDGETS, ENFORCEMENT_MODES, FAILURE_MODES, LIMIT_ACTIONS } from '../schema/policy.js';

export type AlgorithmType = (typeof ALGORITHM_TYPES)[number];
export type LimitAction = (typeof LIMIT_ACTIONS)[number];
export type FailureMode = (typeof FAILURE_MODES)[number];
export type Budget = (typeof BUDGETS)[number];
export type EnforcementMode = (typeof ENFORCEMENT_MODES)[number];

/**
 * Algorithm configuration as written in policy files (the public format: durations are strings).
 * Which fields apply depends on `type`; see docs/algorithms.md. The fields are the SDK's, which are
 * generated from the schema (scripts/generate-policy-types.ts), so the schema, a client's policies and
 * the server's cannot name them differently.
 */
export interface AlgorithmConfig extends AlgorithmFields {
  type: AlgorithmType;
}

/** A scope value is an exact match or `*` (field must be present; one counter per distinct value). */
export type { PolicyScope } from '@rl/client/admin-client';

/**
 * A stored, normalised policy: every defaulted field is present. The fields are the SDK's Policy shape
 * (generated from schema/policy.ts), narrowed to the values the server knows exactly.
 */
export interface Policy extends PolicyFields {
  algorithm: AlgorithmConfig;
  action: LimitAction;
  failure_mode: FailureMode;
  enforcement_mode: EnforcementMode;
  budget?: Budget;
  /** With `budget: "global"`: region (or `*`, the common share) to weight (src/policy/budget-shares.ts); absent: none. */
  budget_shares?: Record<string, number>;
  /** A capacity lease (docs/reference.md "Slots, leases and pools"), as it was given; absent: none. */
  lease?: LeaseConfig;
}

/** `"lease"` on a policy as written (durations as strings); defaults max_units 100, max_hold 1s. */
export type LeaseConfig = PolicyLease;

/** One field-level validation problem: the API's error shape (schema/errors.ts). */
export type { FieldError } from '../schema/errors.js';
