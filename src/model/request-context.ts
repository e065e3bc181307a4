import { invalidField } from '../errors.js';

export const SIGNAL_TYPES = ['http', 'grpc', 'log', 'trace', 'event', 'auth', 'job', 'custom'] as const;
export type SignalType = (typeof SIGNAL_TYPES)[number];

/** Every string field of a RequestContext, in the spec's order. Scope fields are these minus request_id. */
export const CONTEXT_STRING_FIELDS = [
  'request_id', 'org_id', 'tenant_id', 'application', 'service', 'environment', 'signal_type',
  'operation', 'endpoint', 'method', 'user_id', 'api_key', 'client_id', 'source_ip', 'region',
  'resource', 'severity', 'span_name', 'topic', 'consumer_group', 'job_type',
] as const;
export type ContextStringField = (typeof CONTEXT_STRING_FIELDS)[number];

/** Fields a policy scope may constrain (CONTRACT.md: every string field except request_id, plus tags). */
export const SCOPE_FIELDS = CONTEXT_STRING_FIELDS.filter((f) => f !== 'request_id') as Exclude<
  ContextStringField,
  'request_id'
>[];
export type ScopeField = (typeof SCOPE_FIELDS)[number];

export type RequestContext = { [K in ContextStringField]?: string } & {
  quantity: number;
  tags: Record<string, string>;
};

const MAX_QUANTITY = Number.MAX_SAFE_INTEGER; // 2^53 - 1

/**
 * Validates an untrusted decoded body into a RequestContext. Unknown fields are ignored (CONTRACT.md);
 * wrong types and bad values throw a 400 naming the field. The result is a fresh object built from
 * known keys only, so `__proto__` and friends in the input cannot reach anything.
 */
export function parseRequestContext(body: unknown): RequestContext {
  if (body === undefined || body === null) body = {};
  if (typeof body !== 'object' || Array.isArray(body)) {
    throw invalidField('body', 'must be a JSON object (a RequestContext)');
  }
  const input = body as Record<string, unknown>;
  const ctx: RequestContext = { quantity: 1, tags: {} };
  for (const field of CONTEXT_STRING_FIELDS) {
    if (!Object.prototype.hasOwnProperty.call(input, field)) continue;
    const value = input[field];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string') throw invalidField(field, `must be a string, got ${describe(value)}`);
    ctx[field] = value;
  }
  if (ctx.signal_type !== undefined && !(SIGNAL_TYPES as readonly string[]).includes(ctx.signal_type)) {
    throw invalidField('signal_type', `must be one of ${SIGNAL_TYPES.join(', ')}; got "${ctx.signal_type}"`);
  }
  if (Object.prototype.hasOwnProperty.call(input, 'quantity') && input.quantity !== null && input.quantity !== undefined) {
    ctx.quantity = parseQuantity(input.quantity);
  }
  if (Object.prototype.hasOwnProperty.call(input, 'tags') && input.tags !== null && input.tags !== undefined) {
    ctx.tags = parseTags(input.tags);
  }
  return ctx;
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
  const tags: Record<string, string> = Object.create(null);
  for (const [key, tagValue] of Object.entries(value)) {
    if (typeof tagValue !== 'string') throw invalidField(`tags.${key}`, `must be a string, got ${describe(tagValue)}`);
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
 * The RequestContext of one decision operation: a refund must say how much goes back (CONTRACT:
 * Refund), where check, acquire and release default `quantity` to 1.
 */
export function parseOperationContext(operation: 'check' | 'acquire' | 'release' | 'refund', input: unknown): RequestContext {
  const ctx = parseRequestContext(input);
  if (operation === 'refund' && (input as { quantity?: unknown } | undefined)?.quantity == null) {
    throw invalidField('quantity', 'is required for a refund (the units to give back, at least 1)');
  }
  return ctx;
}
