import { describe, SCOPE_FIELDS, SIGNAL_TYPES, type ScopeField } from '../model/request-context.js';
import {
  MAX_FIELD_LENGTH,
  MAX_METADATA_ENTRIES,
  MAX_METADATA_KEY_LENGTH,
  MAX_METADATA_VALUE_LENGTH,
  MAX_TAGS,
  MAX_TAG_KEY_LENGTH,
  MAX_TAG_VALUE_LENGTH,
  keyCountUpTo,
} from '../schema/limits.js';
import {
  MAX_DESCRIPTION_LENGTH,
  MAX_NAME_LENGTH,
  LEASE_MAX_HOLD_MS,
  LEASE_MAX_UNITS,
  MAX_SUB_WINDOWS,
  POLICY_ID_PATTERN,
  LAYER_PATTERN,
  ROLLOUT_PERCENT,
  SCOPE_KEYS,
  SEVERITY_LEVELS,
  ALGORITHM_KEYS,
  ANY_ALGORITHM_KEYS,
  LEASE_KEYS,
  POLICY_KEYS,
  SOURCE_IP_PREFIX_KEYS,
} from '../schema/policy.js';
import { parseDuration } from '../util/duration.js';
import { isObject } from '../util/json-shape.js';
import { validateBudgetShares } from './budget-shares.js';
import { LEASABLE_ALGORITHMS, leaseShapeOf } from './lease-terms.js';
import { validateCalendarFields } from './calendar-fields.js';
import { compileMatchExpr } from './match-expr.js';
import { isQuotaShaped, quotaBodyErrors, quotaBodyToPolicy } from './quota-alias.js';
import { unknownFieldErrors } from './unknown-fields.js';
import { nearestKey } from '../util/nearest-key.js';
import { DEFAULT_SOURCE_IP_PREFIX, SOURCE_IP_PREFIX_BOUNDS, type SourceIpPrefix } from '../schema/policy.js';
import {
  ALGORITHM_TYPES,
  BUDGETS,
  ENFORCEMENT_MODES,
  FAILURE_MODES,
  LIMIT_ACTIONS,
  type AlgorithmConfig,
  type AlgorithmType,
  type Budget,
  type EnforcementMode,
  type FailureMode,
  type FieldError,
  type LeaseConfig,
  type LimitAction,
  type Policy,
  type PolicyScope,
} from './types.js';

/**
 * Policy validation: an untrusted decoded JSON value in, a normalised policy (every default applied)
 * or EVERY problem as `{field, message}` out. Never throws on any input.
 *
 * The shapes are defined once in schema/policy.ts (types, OpenAPI document, bounds); this module
 * enforces them with messages that name the field, plus what a schema cannot say (durations that parse,
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

export { MAX_DESCRIPTION_LENGTH, MAX_NAME_LENGTH, MAX_SUB_WINDOWS, POLICY_ID_PATTERN, SEVERITY_LEVELS };

type Obj = Record<string, unknown>;

const hasOwn = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

/** The value of an own key, with `null` treated as absent (JSON merge patch and hand-written files). */
function own(o: Obj, k: string): unknown {
  return hasOwn(o, k) ? (o[k] === null ? undefined : o[k]) : undefined;
}

function oneOf<T extends string>(values: readonly T[]): string {
  return values.join(', ');
}

export function validatePolicy(raw: unknown, options: ValidateOptions = {}): ValidationResult {
  try {
    if (isQuotaShaped(raw)) return validateQuotaShaped(raw as Obj, options);
    return validateCore(raw, options);
  } catch (err) {
    // Defensive: validation must never throw on input. Anything here is a bug, reported as a field error.
    return { ok: false, errors: [{ field: 'body', message: `could not be validated: ${String(err)}` }] };
  }
}

/**
 * The size bounds of a policy body's collections (scope, scope.tags, metadata), checked alone and
 * without reading any item: for callers that would otherwise walk the body before validating it (a
 * JSON merge patch is merged into the stored policy first). validatePolicy reports the same problems.
 */
export function oversizedCollections(raw: unknown): FieldError[] {
  if (!isObject(raw)) return [];
  const errors: FieldError[] = [];
  const scope = own(raw, 'scope');
  if (isObject(scope)) {
    if (keyCountUpTo(scope, SCOPE_KEYS.length) > SCOPE_KEYS.length) {
      errors.push({ field: 'scope', message: `must hold at most ${SCOPE_KEYS.length} fields (the scope fields and tags), got more` });
    } else {
      const tags = own(scope, 'tags');
      if (isObject(tags) && keyCountUpTo(tags, MAX_TAGS) > MAX_TAGS) errors.push({ field: 'scope.tags', message: `must hold at most ${MAX_TAGS} tags, got more` });
    }
  }
  const metadata = own(raw, 'metadata');
  if (isObject(metadata) && keyCountUpTo(metadata, MAX_METADATA_ENTRIES) > MAX_METADATA_ENTRIES) {
    errors.push({ field: 'metadata', message: `must hold at most ${MAX_METADATA_ENTRIES} entries, got more` });
  }
  return errors;
}

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

  // policy_id
  let policyId = '';
  const rawId = own(raw, 'policy_id');
  if (rawId === undefined) {
    if (requireId) err('policy_id', 'is required');
  } else if (typeof rawId !== 'string') {
    err('policy_id', `must be a string, got ${describe(rawId)}`);
  } else if (!POLICY_ID_PATTERN.test(rawId)) {
    err(
      'policy_id',
      `must be 1–128 characters of A–Z a–z 0–9 . _ : - starting with a letter or digit, got ${describe(rawId)}`,
    );
  } else {
    policyId = rawId;
  }

  const name = optionalString(raw, 'name', MAX_NAME_LENGTH, err) ?? policyId;
  const description = optionalString(raw, 'description', MAX_DESCRIPTION_LENGTH, err) ?? '';

  let enabled = true;
  const rawEnabled = own(raw, 'enabled');
  if (rawEnabled !== undefined) {
    if (typeof rawEnabled === 'boolean') enabled = rawEnabled;
    else err('enabled', `must be true or false, got ${describe(rawEnabled)}`);
  }

  let priority = 0;
  const rawPriority = own(raw, 'priority');
  if (rawPriority !== undefined) {
    if (typeof rawPriority === 'number' && Number.isSafeInteger(rawPriority)) priority = rawPriority;
    else err('priority', `must be an integer between ${Number.MIN_SAFE_INTEGER} and ${Number.MAX_SAFE_INTEGER}, got ${describe(rawPriority)}`);
  }

  const action = enumField(raw, 'action', LIMIT_ACTIONS, 'deny', err);
  const failureMode = enumField<FailureMode>(raw, 'failure_mode', FAILURE_MODES, 'fail_open', err);
  const enforcementMode = enumField<EnforcementMode>(raw, 'enforcement_mode', ENFORCEMENT_MODES, 'enforce', err);
  // Kept only when given, so a policy without it reads back exactly as before regions existed.
  const budget = own(raw, 'budget') === undefined ? undefined : enumField<Budget>(raw, 'budget', BUDGETS, 'regional', err);
  const layer = validateLayer(own(raw, 'layer'), err);

  let rolloutPercent = 100;
  const rawRollout = own(raw, 'rollout_percent');
  if (rawRollout !== undefined) {
    if (typeof rawRollout === 'number' && Number.isInteger(rawRollout) && rawRollout >= ROLLOUT_PERCENT.minimum && rawRollout <= ROLLOUT_PERCENT.maximum) {
      rolloutPercent = rawRollout;
    } else {
      err('rollout_percent', `must be an integer from ${ROLLOUT_PERCENT.minimum} to ${ROLLOUT_PERCENT.maximum}, got ${describe(rawRollout)}`);
    }
  }

  const validFrom = unixField(raw, 'valid_from_unix', err);
  const validTo = unixField(raw, 'valid_to_unix', err);
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

type ErrFn = (field: string, message: string) => void;

/** `layer`: kept only when given, so a policy without it reads back exactly as before layers existed. */
function validateLayer(v: unknown, err: ErrFn): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v === 'string' && LAYER_PATTERN.test(v)) return v;
  err('layer', `must be 1–32 characters of a–z 0–9 _ - starting with a letter (such as "platform"), got ${describe(v)}`);
  return undefined;
}

function optionalString(raw: Obj, key: string, maxLength: number, err: ErrFn): string | undefined {
  const v = own(raw, key);
  if (v === undefined) return undefined;
  if (typeof v !== 'string') {
    err(key, `must be a string, got ${describe(v)}`);
    return undefined;
  }
  if (v.length > maxLength) {
    err(key, `must be at most ${maxLength} characters, got ${v.length}`);
    return undefined;
  }
  return v;
}

function enumField<T extends string>(raw: Obj, key: string, values: readonly T[], dflt: T, err: ErrFn): T | undefined {
  const v = own(raw, key);
  if (v === undefined) return dflt;
  if (typeof v === 'string' && (values as readonly string[]).includes(v)) return v as T;
  err(key, `must be one of ${oneOf(values)}, got ${describe(v)}`);
  return undefined;
}

function unixField(raw: Obj, key: string, err: ErrFn): number | undefined {
  const v = own(raw, key);
  if (v === undefined) return 0;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return v;
  err(key, `must be a non-negative integer (unix seconds; 0 = unbounded), got ${describe(v)}`);
  return undefined;
}

/** Absent stays absent (the defaults apply); given, both lengths are stored, defaults filled in. */
function validateSourceIpPrefix(v: unknown, err: ErrFn): SourceIpPrefix | undefined {
  if (v === undefined) return undefined;
  if (!isObject(v)) {
    err('source_ip_prefix', `must be an object {"v4": 8–32, "v6": 16–128}, got ${describe(v)}`);
    return undefined;
  }
  const prefix: SourceIpPrefix = { ...DEFAULT_SOURCE_IP_PREFIX };
  for (const e of unknownFieldErrors(v, SOURCE_IP_PREFIX_KEYS, 'source_ip_prefix', 'source_ip_prefix')) err(e.field, e.message);
  for (const key of ['v4', 'v6'] as const) {
    const length = own(v, key);
    if (length === undefined) continue;
    const { minimum, maximum } = SOURCE_IP_PREFIX_BOUNDS[key];
    if (typeof length === 'number' && Number.isInteger(length) && length >= minimum && length <= maximum) prefix[key] = length;
    else err(`source_ip_prefix.${key}`, `must be an integer prefix length from ${minimum} to ${maximum}, got ${describe(length)}`);
  }
  return prefix;
}

function validateScope(v: unknown, err: ErrFn): PolicyScope | undefined {
  const scope = Object.create(null) as PolicyScope;
  if (v === undefined) return scope;
  if (!isObject(v)) {
    err('scope', `must be an object of scope fields, got ${describe(v)}`);
    return undefined;
  }
  if (keyCountUpTo(v, SCOPE_KEYS.length) > SCOPE_KEYS.length) {
    err('scope', `must hold at most ${SCOPE_KEYS.length} fields (the scope fields and tags), got more`);
    return undefined;
  }
  const unknown = unknownFieldErrors(v, SCOPE_KEYS, 'scope', 'scope');
  for (const e of unknown) err(e.field, e.message);
  let ok = unknown.length === 0;
  for (const key of Object.keys(v)) {
    const value = v[key] === null ? undefined : v[key];
    if (key === 'tags') {
      if (value === undefined) continue;
      const tags = validateTags(value, err);
      if (tags === undefined) ok = false;
      else if (Object.keys(tags).length > 0) scope.tags = tags;
      continue;
    }
    if (!(SCOPE_FIELDS as readonly string[]).includes(key)) continue; // refused above
    if (value === undefined) continue;
    if (typeof value !== 'string' || value === '') {
      err(`scope.${key}`, notAScopeValue(value));
      ok = false;
      continue;
    }
    if (value.length > MAX_FIELD_LENGTH) {
      err(`scope.${key}`, `must be at most ${MAX_FIELD_LENGTH} characters, got ${value.length}`);
      ok = false;
      continue;
    }
    if (key === 'signal_type' && value !== '*' && !(SIGNAL_TYPES as readonly string[]).includes(value)) {
      err('scope.signal_type', `must be "*" or one of ${oneOf(SIGNAL_TYPES)}, got ${describe(value)}`);
      ok = false;
      continue;
    }
    scope[key as ScopeField] = value;
  }
  return ok ? scope : undefined;
}

/** The problem with a scope field or tag value that is not a non-empty string. */
function notAScopeValue(value: unknown): string {
  return `must be a non-empty string (an exact value, or "*" for any present value), got ${describe(value)}`;
}

function validateTags(v: unknown, err: ErrFn): Record<string, string> | undefined {
  if (!isObject(v)) {
    err('scope.tags', `must be an object of tag values, got ${describe(v)}`);
    return undefined;
  }
  if (keyCountUpTo(v, MAX_TAGS) > MAX_TAGS) {
    err('scope.tags', `must hold at most ${MAX_TAGS} tags, got more`);
    return undefined;
  }
  const tags = Object.create(null) as Record<string, string>;
  let ok = true;
  for (const key of Object.keys(v)) {
    const value = v[key];
    if (key === '') {
      err('scope.tags', 'tag names must not be empty');
      ok = false;
      continue;
    }
    if (key.length > MAX_TAG_KEY_LENGTH) {
      err('scope.tags', `tag names must be at most ${MAX_TAG_KEY_LENGTH} characters, got ${key.length} (${describe(key)})`);
      ok = false;
      continue;
    }
    if (typeof value !== 'string' || value === '') {
      err(`scope.tags.${key}`, notAScopeValue(value));
      ok = false;
      continue;
    }
    if (value.length > MAX_TAG_VALUE_LENGTH) {
      err(`scope.tags.${key}`, `must be at most ${MAX_TAG_VALUE_LENGTH} characters, got ${value.length}`);
      ok = false;
      continue;
    }
    tags[key] = value;
  }
  return ok ? tags : undefined;
}

/** `lease`: kept as given (durations as strings); only the algorithms a lease supports take one. */
function validateLease(v: unknown, algorithmType: AlgorithmType | undefined, err: ErrFn): LeaseConfig | undefined {
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
    if (typeof units === 'number' && Number.isInteger(units) && units >= LEASE_MAX_UNITS.min && units <= LEASE_MAX_UNITS.max) lease.max_units = units;
    else err('lease.max_units', `must be an integer from ${LEASE_MAX_UNITS.min} to ${LEASE_MAX_UNITS.max}, got ${describe(units)}`);
  }
  const hold = own(v, 'max_hold');
  if (hold !== undefined) {
    const parsed = parseDuration(hold);
    const ms = 'ms' in parsed ? parsed.ms : NaN;
    if (typeof hold === 'string' && ms >= LEASE_MAX_HOLD_MS.min && ms <= LEASE_MAX_HOLD_MS.max) lease.max_hold = hold;
    else err('lease.max_hold', `must be a duration from 100ms to 60s (such as "1s"), got ${describe(hold)}`);
  }
  return lease;
}

function validateMetadata(v: unknown, err: ErrFn): Record<string, string> | undefined {
  const metadata = Object.create(null) as Record<string, string>;
  if (v === undefined) return metadata;
  if (!isObject(v)) {
    err('metadata', `must be an object of string values, got ${describe(v)}`);
    return undefined;
  }
  if (keyCountUpTo(v, MAX_METADATA_ENTRIES) > MAX_METADATA_ENTRIES) {
    err('metadata', `must hold at most ${MAX_METADATA_ENTRIES} entries, got more`);
    return undefined;
  }
  let ok = true;
  for (const key of Object.keys(v)) {
    const value = v[key];
    if (key.length > MAX_METADATA_KEY_LENGTH) {
      err('metadata', `keys must be at most ${MAX_METADATA_KEY_LENGTH} characters, got ${key.length} (${describe(key)})`);
      ok = false;
      continue;
    }
    let text: string;
    if (typeof value === 'string') text = value;
    else if ((typeof value === 'number' && Number.isFinite(value)) || typeof value === 'boolean') text = String(value);
    else {
      err(`metadata.${key}`, `must be a string, got ${describe(value)}`);
      ok = false;
      continue;
    }
    if (key === 'match_expr') {
      const compiled = compileMatchExpr(text);
      if (!compiled.ok) {
        err('metadata.match_expr', compiled.message);
        ok = false;
        continue;
      }
    } else if (text.length > MAX_METADATA_VALUE_LENGTH) {
      // match_expr has its own bound (compileMatchExpr above).
      err(`metadata.${key}`, `must be at most ${MAX_METADATA_VALUE_LENGTH} characters, got ${text.length}`);
      ok = false;
      continue;
    } else if (key === 'min_severity' && !(SEVERITY_LEVELS as readonly string[]).includes(text)) {
      err('metadata.min_severity', `must be one of ${oneOf(SEVERITY_LEVELS)}, got ${describe(value)}`);
      ok = false;
      continue;
    }
    metadata[key] = text;
  }
  return ok ? metadata : undefined;
}

// ---------------------------------------------------------------------------------------------------
// AlgorithmConfig

function validateAlgorithm(v: unknown, action: LimitAction | undefined, err: ErrFn): AlgorithmConfig | undefined {
  if (v === undefined) {
    err('algorithm', `is required (an object with "type": one of ${oneOf(ALGORITHM_TYPES)})`);
    return undefined;
  }
  if (!isObject(v)) {
    err('algorithm', `must be an object with "type": one of ${oneOf(ALGORITHM_TYPES)}, got ${describe(v)}`);
    return undefined;
  }
  let ok = true;
  const fail = (k: string, message: string): void => {
    err(`algorithm.${k}`, message);
    ok = false;
  };
  const rawType = own(v, 'type');
  let type: AlgorithmType | undefined;
  if (rawType === undefined) fail('type', `is required (one of ${oneOf(ALGORITHM_TYPES)})`);
  else if (typeof rawType !== 'string' || !(ALGORITHM_TYPES as readonly string[]).includes(rawType)) {
    const nearest = typeof rawType === 'string' ? nearestKey(rawType, ALGORITHM_TYPES) : undefined;
    fail('type', `must be one of ${oneOf(ALGORITHM_TYPES)}, got ${describe(rawType)}${nearest === undefined ? '' : `; did you mean \`${nearest}\`?`}`);
  } else type = rawType as AlgorithmType;
  // Without a known type, the fields are still checked (all problems at once), against every algorithm's.
  const applies = type === undefined ? ANY_ALGORITHM_KEYS : ALGORITHM_KEYS[type];
  const doesNotApply = (key: string): string | undefined =>
    type !== undefined && ANY_ALGORITHM_KEYS.includes(key) && nearestKey(key, applies) === undefined
      ? `does not apply to ${type} (${type} fields: ${applies.join(', ')})`
      : undefined;
  for (const e of unknownFieldErrors(v, applies, 'algorithm', type ?? 'algorithm', doesNotApply)) {
    err(e.field, e.message);
    ok = false;
  }
  const field = (k: keyof AlgorithmConfig): unknown => (applies.includes(k) ? own(v, k) : undefined);
  const kind = type ?? 'this algorithm';
  const out: AlgorithmConfig = { type: type! };

  const posInt = (k: keyof AlgorithmConfig, required: boolean, what = 'a positive integer'): number | undefined => {
    const x = field(k);
    if (x === undefined) {
      if (required) fail(k, `is required for ${kind} (${what})`);
      return undefined;
    }
    if (typeof x === 'number' && Number.isSafeInteger(x) && x > 0) return x;
    fail(k, `must be ${what}, got ${describe(x)}`);
    return undefined;
  };
  const posRate = (k: 'refill_rate' | 'leak_rate'): number | undefined => {
    const x = field(k);
    if (x === undefined) return undefined;
    if (typeof x === 'number' && Number.isFinite(x) && x > 0) return x;
    fail(k, `must be a positive number (units per second), got ${describe(x)}`);
    return undefined;
  };
  const duration = (k: 'window' | 'quota_period', required: boolean): { text: string; ms: number } | undefined => {
    const x = field(k);
    if (x === undefined) {
      if (required) fail(k, `is required for ${kind} (a duration string such as "10s", "1m", "1h")`);
      return undefined;
    }
    if (typeof x === 'number') {
      fail(k, `must be a duration string such as "${x}s" or "${x}ms" (a bare number is ambiguous), got ${describe(x)}`);
      return undefined;
    }
    const parsed = parseDuration(x);
    if ('error' in parsed) {
      fail(k, typeof x === 'string' ? parsed.error : `${parsed.error}, got ${describe(x)}`);
      return undefined;
    }
    return { text: x as string, ms: parsed.ms };
  };
  switch (type) {
    case undefined: {
      // Each field a known type would read, checked for its form alone (nothing is required).
      posInt('limit', false);
      subWindowCount(field('sub_window_count'), duration('window', false), fail);
      duration('quota_period', false);
      posInt('burst', false, 'a positive integer (the bucket capacity)');
      posRate('refill_rate');
      posRate('leak_rate');
      posInt('max_concurrency', false);
      leaseTtl(field('lease_ttl'), fail);
      validateCalendarFields(field, fail, []);
      break;
    }
    case 'fixed_window': {
      out.limit = posInt('limit', true);
      const periods = validateCalendarFields(field, fail, ['window']);
      out.window = duration('window', !periods.given)?.text;
      out.calendar = periods.calendar;
      out.timezone = periods.timezone;
      break;
    }
    case 'sliding_window_log': {
      out.limit = posInt('limit', true);
      out.window = duration('window', true)?.text;
      break;
    }
    case 'sliding_window_counter': {
      out.limit = posInt('limit', true);
      const window = duration('window', true);
      out.window = window?.text;
      out.sub_window_count = subWindowCount(field('sub_window_count'), window, fail);
      break;
    }
    case 'token_bucket':
    case 'leaky_bucket': {
      const rateKey = type === 'token_bucket' ? 'refill_rate' : 'leak_rate';
      out.limit = posInt('limit', true);
      const rate = posRate(rateKey);
      // The window only sets the default rate (limit per window); with an explicit rate it is optional.
      const rateGiven = field(rateKey) !== undefined;
      out.window = duration('window', !rateGiven)?.text;
      out.burst = posInt('burst', false, 'a positive integer (the bucket capacity)');
      if (rate !== undefined) out[rateKey] = rate;
      break;
    }
    case 'concurrency': {
      const max = posInt('max_concurrency', false);
      const limit = posInt('limit', false);
      if (field('max_concurrency') === undefined && field('limit') === undefined) {
        fail('max_concurrency', 'is required for concurrency (a positive integer; "limit" is accepted instead)');
      }
      out.max_concurrency = max;
      out.limit = limit;
      out.lease_ttl = leaseTtl(field('lease_ttl'), fail);
      break;
    }
    case 'quota': {
      out.limit = posInt('limit', true, 'a positive integer (the budget per period)');
      const hasPeriod = field('quota_period') !== undefined;
      const hasWindow = field('window') !== undefined;
      const periods = validateCalendarFields(field, fail, ['quota_period', 'window']);
      out.calendar = periods.calendar;
      out.timezone = periods.timezone;
      if (!hasPeriod && !hasWindow && !periods.given) {
        fail('quota_period', 'is required for quota (a duration string such as "1h" or "30d"; "window" is accepted instead)');
      }
      out.quota_period = duration('quota_period', false)?.text;
      out.window = duration('window', false)?.text;
      break;
    }
  }

  out.cost_per_request = posInt('cost_per_request', false, 'a positive integer (units per unit of quantity)');
  const rate = field('sample_rate');
  if (rate !== undefined) {
    if (typeof rate === 'number' && Number.isFinite(rate) && rate >= 0 && rate <= 1) out.sample_rate = rate;
    else fail('sample_rate', `must be a number from 0 to 1, got ${describe(rate)}`);
  } else if (action === 'sample') {
    fail('sample_rate', 'is required when action is sample (the fraction of over-limit requests let through, 0 to 1)');
  }

  if (!ok || type === undefined) return undefined;
  // Drop the keys left undefined so the stored algorithm holds exactly what applies.
  for (const k of Object.keys(out) as (keyof AlgorithmConfig)[]) if (out[k] === undefined) delete out[k];
  return out;
}

/** `sub_window_count` (absent: undefined), which must divide the window evenly. */
function subWindowCount(subs: unknown, window: { ms: number } | undefined, fail: ErrFn): number | undefined {
  if (subs === undefined) return undefined;
  if (typeof subs !== 'number' || !Number.isInteger(subs) || subs < 1 || subs > MAX_SUB_WINDOWS) {
    fail('sub_window_count', `must be an integer from 1 to ${MAX_SUB_WINDOWS}, got ${describe(subs)}`);
  } else if (window && window.ms % subs !== 0) {
    fail('sub_window_count', `must divide the window (${window.ms}ms) evenly, got ${subs}`);
  } else return subs;
  return undefined;
}

/** concurrency's `lease_ttl` (absent: undefined): a duration string or whole seconds, kept as given. */
function leaseTtl(ttl: unknown, fail: ErrFn): string | number | undefined {
  if (ttl === undefined) return undefined;
  if (typeof ttl === 'number') {
    if (Number.isSafeInteger(ttl) && ttl > 0 && Number.isSafeInteger(ttl * 1000)) return ttl;
    fail('lease_ttl', `must be a duration string or a positive whole number of seconds, got ${describe(ttl)}`);
    return undefined;
  }
  const parsed = parseDuration(ttl);
  if (!('error' in parsed)) return ttl as string;
  fail('lease_ttl', typeof ttl === 'string' ? parsed.error : `must be a duration string or a positive whole number of seconds, got ${describe(ttl)}`);
  return undefined;
}

// ---------------------------------------------------------------------------------------------------
// The quota-shaped body (quota-alias.ts translates it)

function validateQuotaShaped(raw: Obj, options: ValidateOptions): ValidationResult {
  const alias = quotaBodyToPolicy(raw);
  const core = validateCore(alias.policy, options);
  if (core.ok && alias.errors.length === 0) return core;
  return { ok: false, errors: quotaBodyErrors(alias.errors, core.ok ? [] : core.errors) };
}
