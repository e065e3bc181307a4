import { invalidField } from '../errors.js';
import type { Decision } from './decision.js';
import { MAX_FIELD_LENGTH, MAX_TAGS, MAX_TAG_KEY_LENGTH, MAX_TAG_VALUE_LENGTH, keyCountUpTo } from '../schema/limits.js';
import { CONTEXT_STRING_FIELDS, IGNORED_FIELDS, SIGNAL_TYPES, type ContextStringField, type RequestContext } from '../schema/request-context.js';

export { CONTEXT_STRING_FIELDS, IGNORED_FIELDS, SIGNAL_TYPES, type ContextStringField, type IgnoredFields, type RequestContext, type SignalType } from '../schema/request-context.js';

/** Fields a policy scope may constrain (README "The request": every string field except request_id, plus tags). */
export const SCOPE_FIELDS = CONTEXT_STRING_FIELDS.filter((f) => f !== 'request_id') as Exclude<
  ContextStringField,
  'request_id'
>[];
export type ScopeField = (typeof SCOPE_FIELDS)[number];

const MAX_QUANTITY = Number.MAX_SAFE_INTEGER; // 2^53 - 1

/**
 * Validates an untrusted decoded body into a RequestContext (schema/request-context.ts describes it).
 * Unknown fields are ignored (README "The request") but noted under IGNORED_FIELDS (see ignoredFieldsOf); wrong types, bad values and sizes over the bounds of
 * schema/limits.ts throw a 400 naming the field.
 *
 * Hand-written rather than a compiled schema check: it is on every decision, and its messages are part
 * of the API (bench/validate-micro.ts measures it). The result is a fresh object built from
 * known keys only, so `__proto__` and friends in the input cannot reach anything.
 */
export function parseRequestContext(body: unknown): RequestContext {
  if (body === undefined || body === null) body = {};
  if (typeof body !== 'object' || Array.isArray(body)) {
    throw invalidField('body', 'must be a JSON object (a RequestContext)');
  }
  const input = body as Record<string, unknown>;
  const ctx: RequestContext = { quantity: 1, tags: {} };
  // Keys of the input this parse knows: more keys than that means some were ignored.
  let known = 0;
  for (const field of CONTEXT_STRING_FIELDS) {
    if (!Object.prototype.hasOwnProperty.call(input, field)) continue;
    known++;
    const value = input[field];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string') throw invalidField(field, `must be a string, got ${describe(value)}`);
    if (value.length > MAX_FIELD_LENGTH) throw invalidField(field, `must be at most ${MAX_FIELD_LENGTH} characters, got ${value.length}`);
    ctx[field] = value;
  }
  if (ctx.signal_type !== undefined && !(SIGNAL_TYPES as readonly string[]).includes(ctx.signal_type)) {
    throw invalidField('signal_type', `must be one of ${SIGNAL_TYPES.join(', ')}; got "${ctx.signal_type}"`);
  }
  if (Object.prototype.hasOwnProperty.call(input, 'quantity')) {
    known++;
    if (input.quantity !== null && input.quantity !== undefined) ctx.quantity = parseQuantity(input.quantity);
  }
  if (Object.prototype.hasOwnProperty.call(input, 'tags')) {
    known++;
    if (input.tags !== null && input.tags !== undefined) ctx.tags = parseTags(input.tags);
  }
  // The common body has no unknown key: one count of its keys, stopping past `known`, and nothing else.
  if (keyCountUpTo(input, known) > known) noteIgnoredFields(ctx, input);
  return ctx;
}

/** README "The request": at most 8 names, each cut at 64 characters. */
export const MAX_IGNORED_NAMES = 8;
export const MAX_IGNORED_NAME_LENGTH = 64;

const KNOWN_KEYS: ReadonlySet<string> = new Set<string>([...CONTEXT_STRING_FIELDS, 'quantity', 'tags']);

function noteIgnoredFields(ctx: RequestContext, input: Record<string, unknown>): void {
  let count = 0;
  const names: string[] = [];
  for (const key of Object.keys(input)) {
    if (KNOWN_KEYS.has(key)) continue;
    count++;
    if (names.length < MAX_IGNORED_NAMES) names.push(key.length > MAX_IGNORED_NAME_LENGTH ? key.slice(0, MAX_IGNORED_NAME_LENGTH) : key);
  }
  if (count > 0) ctx[IGNORED_FIELDS] = { count, names: names.join(',') };
}

/**
 * Names the ignored fields of `ctx` in `decision.metadata.ignored_fields` (README "The request"): every answer to a
 * request that had some says so, whoever made the decision (the DecisionService, or a sidecar that
 * forwarded the request). Returns the decision.
 */
export function withIgnoredFields(decision: Decision, ctx: RequestContext): Decision {
  const ignored = ctx[IGNORED_FIELDS];
  if (ignored !== undefined) decision.metadata.ignored_fields = ignored.names;
  return decision;
}

function parseQuantity(value: unknown): number {
  // gRPC int64 and some JSON encoders send integers as strings; accept a plain decimal string too.
  const n = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n)) {
    throw invalidField('quantity', `must be a whole number, got ${describe(value)}`);
  }
  // 0 is a peek (check only; DecisionService refuses it elsewhere).
  if (n < 0 || n > MAX_QUANTITY) throw invalidField('quantity', `must be between 0 and ${MAX_QUANTITY}, got ${n}`);
  return n;
}

function parseTags(value: unknown): Record<string, string> {
  if (typeof value !== 'object' || Array.isArray(value) || value === null) {
    throw invalidField('tags', `must be an object of string values, got ${describe(value)}`);
  }
  // The count first: a body with 100,000 tags is refused before any per-tag work.
  if (keyCountUpTo(value, MAX_TAGS) > MAX_TAGS) throw invalidField('tags', `must hold at most ${MAX_TAGS} tags, got more`);
  const tags: Record<string, string> = Object.create(null);
  const input = value as Record<string, unknown>;
  for (const key in input) {
    const tagValue = input[key];
    if (key.length > MAX_TAG_KEY_LENGTH) {
      throw invalidField('tags', `tag names must be at most ${MAX_TAG_KEY_LENGTH} characters, got ${key.length} (${describe(key)})`);
    }
    if (typeof tagValue !== 'string') throw invalidField(`tags.${key}`, `must be a string, got ${describe(tagValue)}`);
    if (tagValue.length > MAX_TAG_VALUE_LENGTH) {
      throw invalidField(`tags.${key}`, `must be at most ${MAX_TAG_VALUE_LENGTH} characters, got ${tagValue.length}`);
    }
    tags[key] = tagValue;
  }
  return tags;
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `the string ${JSON.stringify(value.length > 40 ? value.slice(0, 40) + '…' : value)}`;
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

/**
 * The RequestContext of one decision operation: a refund must say how much goes back (README
 * "Calling it"), where check, acquire and release default `quantity` to 1.
 */
export function parseOperationContext(operation: 'check' | 'acquire' | 'release' | 'refund', input: unknown): RequestContext {
  const ctx = parseRequestContext(input);
  if (operation === 'refund' && (input as { quantity?: unknown } | undefined)?.quantity == null) {
    throw invalidField('quantity', 'is required for a refund (the units to give back, at least 1)');
  }
  return ctx;
}
