import { RlError } from '../errors.js';
import { describe } from '../model/request-context.js';
import { keyCountUpTo } from '../schema/limits.js';
import { POLICY_KEYS, QUOTA_CONFIG_KEYS, QUOTA_POLICY_KEYS, SCOPE_KEYS } from '../schema/policy.js';
import { isObject } from '../util/json-shape.js';
import { mergePatch } from '../util/merge-patch.js';
import { integerWording, isIntegerIn } from './bound-wording.js';
import { QUOTA_CONFIG_FIELDS } from './policy-field-schemas.js';
import type { FieldError } from './types.js';
import { unknownFieldErrors } from './unknown-fields.js';

/**
 * The quota-shaped alias of a policy (README "Managing policies"): `{id, resource, algorithm: "quota", config: {quota,
 * window_seconds}, action_deny, metadata}`, translated here and only here into the Policy shape, both
 * as a whole body (POST, PUT, policy files: validate.ts validates the result) and as a merge patch
 * (PATCH `{"config": {"quota": 500}}`: policy-service.ts merges the result).
 */

type Obj = Record<string, unknown>;

const hasOwn = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

/** The value of an own key, with `null` treated as absent (JSON merge patch and hand-written files). */
function own(o: Obj, k: string): unknown {
  return hasOwn(o, k) ? (o[k] === null ? undefined : o[k]) : undefined;
}

/** The keys only the alias has. */
const ALIAS_KEYS = ['config', 'action_deny', 'resource', 'id', 'algorithm'];

/** Policy field → the field the user wrote in the alias, for error messages. */
const ALIAS_FIELD_NAMES: Record<string, string> = {
  policy_id: 'id',
  'scope.resource': 'resource',
  'algorithm.type': 'algorithm',
  'algorithm.limit': 'config.quota',
  'algorithm.quota_period': 'config.window_seconds',
};

/** `config.window_seconds` as the quota_period it stands for, when it is a positive whole number of seconds. */
function periodOf(seconds: unknown): string | undefined {
  return isIntegerIn(seconds, QUOTA_CONFIG_FIELDS.windowSeconds) ? `${seconds}s` : undefined;
}

/** What is wrong with a window_seconds that is not one: a whole number too large for its milliseconds to count exactly is told its bound. */
function windowSecondsProblem(seconds: unknown): string {
  const { maximum } = QUOTA_CONFIG_FIELDS.windowSeconds;
  return Number.isInteger(seconds) && (seconds as number) > maximum ? `must be at most ${maximum} seconds` : 'must be a positive whole number of seconds';
}

/** `action_deny`: true enforces with deny (unless the body names its own action or mode), false is shadow. */
function applyActionDeny(deny: boolean, out: Obj, given: (key: string) => boolean): void {
  if (deny) {
    if (!given('action')) out.action = 'deny';
    if (!given('enforcement_mode')) out.enforcement_mode = 'enforce';
  } else {
    out.enforcement_mode = 'shadow';
  }
}

/** Quota-shaped when `algorithm` is a string, or when it is absent and `config`/`action_deny` are present. */
export function isQuotaShaped(raw: unknown): boolean {
  if (!isObject(raw)) return false;
  if (typeof raw.algorithm === 'string' && hasOwn(raw, 'algorithm')) return true;
  return !hasOwn(raw, 'algorithm') && !hasOwn(raw, 'policy_id') && (hasOwn(raw, 'config') || hasOwn(raw, 'action_deny'));
}

/** Fields of the quota shape the alias translates itself (the id, the algorithm, the scope) or leaves to the caller (version). */
const TRANSLATED_KEYS: readonly string[] = ['policy_id', 'algorithm', 'scope', 'version'];
/** Policy fields that may ride along with the quota shape, passed through unchanged: read from the two schemas. */
export const QUOTA_PASS_THROUGH: readonly string[] = QUOTA_POLICY_KEYS.filter((k) => POLICY_KEYS.includes(k) && !TRANSLATED_KEYS.includes(k));

/**
 * A whole quota-shaped body as the Policy shape to validate, with the problems only the alias can see, and
 * the name each Policy field goes by in this body's errors (`policy_id` and `scope.resource` as written when
 * the body gave them and not the alias fields they give way to, `id` and `resource`).
 */
export function quotaBodyToPolicy(raw: Obj): { policy: Obj; errors: FieldError[]; names: Record<string, string> } {
  const names = { ...ALIAS_FIELD_NAMES };
  const errors: FieldError[] = [...unknownFieldErrors(raw, QUOTA_POLICY_KEYS, '', 'quota-shaped policy')];
  const normalised: Obj = Object.create(null);
  for (const k of QUOTA_PASS_THROUGH) {
    if (hasOwn(raw, k)) normalised[k] = raw[k];
  }
  const id = hasOwn(raw, 'id') ? raw.id : hasOwn(raw, 'policy_id') ? raw.policy_id : undefined;
  if (!hasOwn(raw, 'id') && hasOwn(raw, 'policy_id')) delete names.policy_id;
  if (id !== undefined && id !== null) normalised.policy_id = id;

  const scope: Obj = Object.create(null);
  const rawScope = own(raw, 'scope');
  // An oversized scope goes to the core unread, which refuses it by its size alone.
  if (isObject(rawScope) && keyCountUpTo(rawScope, SCOPE_KEYS.length) > SCOPE_KEYS.length) normalised.scope = rawScope;
  else if (isObject(rawScope)) for (const k of Object.keys(rawScope)) scope[k] = rawScope[k];
  else if (rawScope !== undefined) normalised.scope = rawScope; // let the core report it
  const resource = own(raw, 'resource');
  if (resource !== undefined) scope.resource = resource;
  else if (isObject(rawScope) && hasOwn(rawScope, 'resource')) delete names['scope.resource'];
  if (normalised.scope === undefined) normalised.scope = scope;

  const algorithm: Obj = { type: 'quota' };
  const rawAlg = own(raw, 'algorithm');
  if (rawAlg !== undefined && rawAlg !== 'quota') {
    errors.push({ field: 'algorithm', message: `must be "quota" in the quota-shaped body, got ${describe(rawAlg)}` });
  }
  const config = own(raw, 'config');
  if (config === undefined) {
    errors.push({ field: 'config', message: 'is required (an object with quota and window_seconds)' });
  } else if (!isObject(config)) {
    errors.push({ field: 'config', message: `must be an object with quota and window_seconds, got ${describe(config)}` });
  } else {
    errors.push(...unknownFieldErrors(config, QUOTA_CONFIG_KEYS, 'config', 'config'));
    const quota = own(config, 'quota');
    const quotaWording = integerWording(QUOTA_CONFIG_FIELDS.quota);
    if (quota === undefined) errors.push({ field: 'config.quota', message: `is required (${quotaWording}: the budget per window)` });
    else if (!isIntegerIn(quota, QUOTA_CONFIG_FIELDS.quota)) {
      errors.push({ field: 'config.quota', message: `must be ${quotaWording}, got ${describe(quota)}` });
    } else algorithm.limit = quota;
    const seconds = own(config, 'window_seconds');
    const period = periodOf(seconds);
    if (seconds === undefined) errors.push({ field: 'config.window_seconds', message: 'is required (a positive whole number of seconds)' });
    else if (period === undefined) errors.push({ field: 'config.window_seconds', message: `${windowSecondsProblem(seconds)}, got ${describe(seconds)}` });
    else algorithm.quota_period = period;
    const cost = own(config, 'cost_per_request');
    if (cost !== undefined) algorithm.cost_per_request = cost;
    const sampleRate = own(config, 'sample_rate');
    if (sampleRate !== undefined) algorithm.sample_rate = sampleRate;
  }
  normalised.algorithm = algorithm;

  const actionDeny = own(raw, 'action_deny');
  if (actionDeny !== undefined) {
    if (typeof actionDeny !== 'boolean') {
      errors.push({ field: 'action_deny', message: `must be true or false, got ${describe(actionDeny)}` });
    } else {
      applyActionDeny(actionDeny, normalised, (k) => hasOwn(normalised, k));
    }
  }
  return { policy: normalised, errors, names };
}

/**
 * The problems of a quota-shaped body: the alias's own, then the Policy validation's renamed to the
 * fields the user wrote, leaving out those the alias already reported (or reported the parent of).
 */
export function quotaBodyErrors(names: Record<string, string>, aliasErrors: FieldError[], policyErrors: FieldError[]): FieldError[] {
  const errors = [...aliasErrors];
  const reported = new Set(aliasErrors.map((e) => e.field));
  const parentReported = (f: string): boolean => reported.has(f) || (f.startsWith('config.') && reported.has('config'));
  for (const e of policyErrors) {
    const field = names[e.field] ?? aliasFieldOf(e.field);
    if (!parentReported(field)) errors.push({ field, message: e.message });
  }
  return errors;
}

function aliasFieldOf(field: string): string {
  if (field.startsWith('scope.')) return field; // a scope object given alongside the quota shape
  if (field.startsWith('algorithm.')) return `config.${field.slice('algorithm.'.length)}`;
  return field;
}

/**
 * A patch written in the quota shape (`config.quota`, `config.window_seconds`, `resource`,
 * `action_deny`, `algorithm: "quota"`, `id`) becomes the equivalent patch of the Policy shape, so a
 * quota can be changed live with `PATCH {"config": {"quota": 500}}`. Other patches pass unchanged.
 */
export function quotaPatchToPolicyPatch(patch: Obj): Obj {
  const has = (k: string) => hasOwn(patch, k);
  const quotaShaped = has('config') || has('action_deny') || has('resource') || has('id') || typeof patch.algorithm === 'string';
  if (!quotaShaped) return patch;
  const out: Obj = Object.create(null);
  for (const key of Object.keys(patch)) {
    if (!ALIAS_KEYS.includes(key)) out[key] = patch[key];
  }
  const algorithm: Obj = Object.create(null);
  if (has('algorithm')) {
    if (typeof patch.algorithm === 'string') algorithm.type = patch.algorithm;
    else out.algorithm = patch.algorithm;
  }
  if (has('config')) {
    const config = patch.config;
    if (isObject(config)) {
      const unknown = unknownFieldErrors(config, QUOTA_CONFIG_KEYS, 'config', 'config');
      if (unknown.length > 0) throw quotaPatchRefused(unknown);
      for (const key of Object.keys(config)) {
        const value = config[key];
        if (key === 'quota') algorithm.limit = value;
        else if (key === 'window_seconds') {
          algorithm.quota_period = periodOf(value) ?? value;
          if (value !== null) algorithm.window = null;
        } else algorithm[key] = value;
      }
    } else {
      // Reported by validation as the algorithm it would have replaced.
      out.algorithm = config;
    }
  }
  if (Object.keys(algorithm).length > 0) {
    out.algorithm = isObject(out.algorithm) ? mergePatch(out.algorithm, algorithm) : algorithm;
  }
  if (has('resource')) out.scope = mergePatch(isObject(out.scope) ? out.scope : Object.create(null), { resource: patch.resource });
  if (has('id') && patch.id !== null) out.policy_id = patch.id;
  if (has('action_deny')) {
    const deny = patch.action_deny;
    if (typeof deny === 'boolean') applyActionDeny(deny, out, has);
    else if (deny !== null) throw quotaPatchRefused([{ field: 'action_deny', message: `must be true or false, got ${describe(deny)}` }]);
  }
  return out;
}

function quotaPatchRefused(errors: readonly FieldError[]): RlError {
  const summary = errors.map((e) => `${e.field}: ${e.message}`).join('; ');
  return new RlError('failed_validation', `invalid policy: ${summary}`, errors[0].field, { errors: [...errors] });
}
