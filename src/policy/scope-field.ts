import { describe, SCOPE_FIELDS, type ScopeField } from '../model/request-context.js';
import { keyCountUpTo } from '../schema/limits.js';
import { SCOPE_KEYS } from '../schema/policy.js';
import { isObject } from '../util/json-shape.js';
import { oneOf, type ErrFn } from './field-reading.js';
import { SCOPE_FIELDS_SCHEMA } from './policy-field-schemas.js';
import { PLAIN_STRING, stringProblem, type StringWording } from './string-problems.js';
import type { PolicyScope } from './types.js';
import { unknownFieldErrors } from './unknown-fields.js';

const { value: SCOPE_VALUE, signalType: SIGNAL_TYPE_VALUES, maxTags: MAX_TAGS, tagKeyMaxLength: MAX_TAG_KEY_LENGTH, tagValue: TAG_VALUE } = SCOPE_FIELDS_SCHEMA;
/** The signal types a scope names, without `*` (the messages list `*` apart). */
const SIGNAL_TYPES = SIGNAL_TYPE_VALUES.filter((value) => value !== '*');

export function validateScope(v: unknown, err: ErrFn): PolicyScope | undefined {
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
    const problem = stringProblem(SCOPE_VALUE, value, SCOPE_VALUE_WORDING);
    if (problem !== undefined) {
      err(`scope.${key}`, problem);
      ok = false;
      continue;
    }
    if (key === 'signal_type' && !SIGNAL_TYPE_VALUES.includes(value as string)) {
      err('scope.signal_type', `must be "*" or one of ${oneOf(SIGNAL_TYPES)}, got ${describe(value)}`);
      ok = false;
      continue;
    }
    scope[key as ScopeField] = value as string;
  }
  return ok ? scope : undefined;
}

/** The problem with a scope field or tag value that is not a non-empty string. */
export function notAScopeValue(value: unknown): string {
  return `must be a non-empty string (an exact value, or "*" for any present value), got ${describe(value)}`;
}

/** A scope field's or tag's value: not a string and too short are one problem ("a non-empty string"). */
const SCOPE_VALUE_WORDING: StringWording = {
  ...PLAIN_STRING,
  notString: notAScopeValue,
  tooShort: notAScopeValue,
};

export function validateTags(v: unknown, err: ErrFn): Record<string, string> | undefined {
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
    const problem = stringProblem(TAG_VALUE, value, SCOPE_VALUE_WORDING);
    if (problem !== undefined) {
      err(`scope.tags.${key}`, problem);
      ok = false;
      continue;
    }
    tags[key] = value as string;
  }
  return ok ? tags : undefined;
}
