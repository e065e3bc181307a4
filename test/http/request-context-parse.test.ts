import { expect } from 'chai';
import fc from 'fast-check';
import { RlError, invalidField } from '../../src/errors.js';
import { MAX_FIELD_LENGTH } from '../../src/schema/limits.js';
import { CONTEXT_STRING_FIELDS, SIGNAL_TYPES, parseRequestContext } from '../../src/model/request-context.js';

/**
 * parseRequestContext finds the fields a body has in one pass over its own property names; the
 * reference below tests each field by name (`hasOwnProperty`), the plainest reading of the rules.
 * Both must give the same context (same keys in the same order) or throw the same error, for bodies
 * in any key order, with wrong values in several fields at once, non-enumerable own properties and
 * inherited ones.
 */
function referenceParse(body: unknown): unknown {
  if (body === undefined || body === null) body = {};
  if (typeof body !== 'object' || Array.isArray(body)) throw invalidField('body', 'must be a JSON object (a RequestContext)');
  const input = body as Record<string, unknown>;
  const own = (name: string) => Object.prototype.hasOwnProperty.call(input, name);
  const ctx: Record<string, unknown> = { quantity: 1, tags: {} };
  for (const field of CONTEXT_STRING_FIELDS) {
    if (!own(field)) continue;
    const value = input[field];
    if (value === undefined || value === null) continue;
    // Only the outcome's kind matters here; the exact messages are compared by calling the real parser on one field.
    if (typeof value !== 'string' || value.length > MAX_FIELD_LENGTH) return { error: field };
    ctx[field] = value;
  }
  if (ctx.signal_type !== undefined && !(SIGNAL_TYPES as readonly string[]).includes(ctx.signal_type as string)) return { error: 'signal_type' };
  if (own('quantity') && input.quantity != null) {
    const q = input.quantity;
    const n = typeof q === 'string' && /^\d+$/.test(q) ? Number(q) : q;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > Number.MAX_SAFE_INTEGER) return { error: 'quantity' };
    ctx.quantity = n;
  }
  if (own('tags') && input.tags != null) {
    const tags = input.tags as Record<string, unknown>;
    if (typeof tags !== 'object' || Array.isArray(tags)) return { error: 'tags' };
    for (const key in tags) if (typeof tags[key] !== 'string') return { error: `tags.${key}` };
    ctx.tags = { ...tags };
  }
  return { ctx: Object.entries(ctx) };
}

function outcome(body: unknown): unknown {
  try {
    const ctx = parseRequestContext(body) as unknown as Record<string, unknown>;
    return { ctx: Object.entries(ctx).map(([k, v]) => (k === 'tags' ? [k, { ...(v as object) }] : [k, v])) };
  } catch (error) {
    if (!(error instanceof RlError)) throw error;
    return { error: error.field };
  }
}

const NAMES = [...CONTEXT_STRING_FIELDS, 'quantity', 'tags', 'unknown_field', 'constructor', 'toString'];
const valueArb = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.constantFrom(...SIGNAL_TYPES, 'x'.repeat(MAX_FIELD_LENGTH + 1), null, 7, '12', true),
  fc.constant(undefined),
  fc.dictionary(fc.constantFrom('env', 'tier'), fc.oneof(fc.string({ maxLength: 4 }), fc.constant(3))),
);

describe('parseRequestContext against a field-by-field reference', () => {
  it('gives the same context, or names the same field, for bodies in any key order', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(fc.constantFrom(...NAMES), valueArb), { selector: ([name]) => name, maxLength: 12 }), (entries) => {
        const body = Object.fromEntries(entries);
        expect(outcome(body)).to.deep.equal(referenceParse(body));
      }),
      { numRuns: 3000 },
    );
  });

  it('names the first bad field in CONTEXT_STRING_FIELDS order, not the body order', () => {
    expect(() => parseRequestContext({ user_id: 5, tenant_id: 6 })).to.throw(RlError, 'tenant_id: must be a string, got number 6');
  });

  it('reads non-enumerable own properties and ignores inherited ones, as an own-property test does', () => {
    const body = Object.create({ org_id: 'inherited' }) as Record<string, unknown>;
    Object.defineProperty(body, 'tenant_id', { value: 't1', enumerable: false });
    Object.defineProperty(body, 'quantity', { value: 3, enumerable: false });
    expect(parseRequestContext(body)).to.deep.equal({ quantity: 3, tags: {}, tenant_id: 't1' });
  });
});
