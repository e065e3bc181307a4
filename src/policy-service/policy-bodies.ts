import { RlError, invalidField } from '../errors.js';
import { describe } from '../model/request-context.js';
import type { FieldError, Policy } from '../policy/types.js';
import { validatePolicy, type PolicyInput } from '../policy/validate.js';
import { MAX_JSON_DEPTH, isObject, jsonShapeProblem } from '../util/json-shape.js';

/** What a policy change's body and headers are read as: checked JSON, a valid policy, the stated versions. */

/** Concurrency preconditions of a change. */
export interface WriteOptions {
  /** The raw `If-Match` header: `"3"`, `W/"3"`, `3`, a comma-separated list, or `*`. */
  ifMatch?: string;
}

export type Obj = Record<string, unknown>;
export type Expectation = { source: 'version' | 'If-Match'; matches: (current: Policy) => boolean; text: string };

export function validationFailed(errors: FieldError[]): RlError {
  const summary = errors.map((e) => `${e.field}: ${e.message}`).join('; ');
  return new RlError('failed_validation', `invalid policy: ${summary}`, errors[0]?.field, { errors });
}

/** Policy bodies must be JSON objects (anything else is a 400, before validation). */
export function requireObject(body: unknown): asserts body is Obj {
  if (body === undefined) throw invalidField('body', 'is required (a JSON object)');
  if (!isObject(body)) throw invalidField('body', `must be a JSON object, got ${describe(body)}`);
  if (tooDeep(body)) throw invalidField('body', `is nested more than ${MAX_JSON_DEPTH} levels deep`);
}

export function validOrThrow(raw: unknown, requireId: boolean): PolicyInput {
  const result = validatePolicy(raw, { requireId });
  if (!result.ok) throw validationFailed(result.errors);
  return result.policy;
}

export function requiredInteger(body: unknown, field: string, min: number, max: number, what: string): number {
  if (body === undefined) throw invalidField(field, `is required (${what}); send a JSON object such as {"${field}": ${min === 0 ? 50 : 1}}`);
  if (!isObject(body)) throw invalidField('body', `must be a JSON object with "${field}", got ${describe(body)}`);
  const v = Object.prototype.hasOwnProperty.call(body, field) ? body[field] : undefined;
  if (v === undefined || v === null) throw invalidField(field, `is required (${what})`);
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw invalidField(field, `must be ${what}, got ${describe(v)}`);
  return v;
}

/** `version` of a PUT/PATCH body: absent/null = no expectation, else a positive integer. */
export function bodyVersion(body: Obj): number | undefined {
  if (!Object.prototype.hasOwnProperty.call(body, 'version') || body.version === null) return undefined;
  const v = body.version;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) {
    throw invalidField('version', `must be the positive integer version you are changing, got ${describe(v)}`);
  }
  return v;
}

export function expectationsOf(version: number | undefined, options: WriteOptions): Expectation[] {
  const out: Expectation[] = [];
  if (version !== undefined) out.push({ source: 'version', text: String(version), matches: (p) => p.version === version });
  const header = options.ifMatch?.trim();
  if (header !== undefined && header !== '') {
    if (header === '*') {
      out.push({ source: 'If-Match', text: '*', matches: () => true });
    } else {
      const versions = header
        .split(',')
        .map((tag) => /^\s*(?:W\/)?"?(\d{1,16})"?\s*$/.exec(tag)?.[1])
        .filter((v): v is string => v !== undefined)
        .map(Number);
      out.push({ source: 'If-Match', text: header.length > 64 ? `${header.slice(0, 64)}…` : header, matches: (p) => versions.includes(p.version) });
    }
  }
  return out;
}

export function preconditionFailed(e: Expectation, current: Policy): RlError {
  const field = e.source === 'version' ? 'version' : undefined;
  return new RlError('conflict', `${e.source} ${e.text} does not match: the current version is ${current.version}`, field);
}

/** A stored policy without the server-set fields (already valid; copied so it can be changed). */
export function inputOf(policy: Policy): PolicyInput {
  const { version: _v, created_at: _c, updated_at: _u, ...rest } = toPlain(policy) as Policy;
  return rest;
}

/** A deep copy as plain JSON data (no prototype-less maps, no shared references). */
export function toPlain<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/** Whether a decoded JSON value nests deeper than MAX_JSON_DEPTH. */
export function tooDeep(value: unknown): boolean {
  return jsonShapeProblem(value, false) === 'too_deep';
}
