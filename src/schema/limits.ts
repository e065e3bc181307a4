/**
 * Bounds on every input-controlled size of a request or a policy (issue 14, "Bounded work per request").
 * Each is checked before any per-item work: a RequestContext over a bound is a 400 naming the field, a
 * policy over one is a 422 naming the field. The schemas (request-context.ts, policy.ts) carry them as
 * maxProperties / maxLength, so the OpenAPI document states them too. README "Limits" lists them.
 */

/** Tags of one RequestContext, and tags of one policy's `scope.tags`. */
export const MAX_TAGS = 64;
/** Characters of one tag name (request tags and scope.tags). */
export const MAX_TAG_KEY_LENGTH = 256;
/** Characters of one tag value (request tags and scope.tags). */
export const MAX_TAG_VALUE_LENGTH = 1024;
/** Characters of one RequestContext string field, and of one policy scope value. */
export const MAX_FIELD_LENGTH = 4096;
/** Entries of one policy's `metadata`. */
export const MAX_METADATA_ENTRIES = 64;
/** Characters of one metadata key. */
export const MAX_METADATA_KEY_LENGTH = 256;
/** Characters of one metadata value (`match_expr` has its own bound, MAX_MATCH_EXPR_LENGTH). */
export const MAX_METADATA_VALUE_LENGTH = 4096;
/** Characters of one `match_expr`: expressions run on the hot path, so they stay small. */
export const MAX_MATCH_EXPR_LENGTH = 4096;

/** Descriptors of one Envoy ShouldRateLimit request: each is a whole decision. */
export const MAX_ENVOY_DESCRIPTORS = 64;

/**
 * How many own enumerable keys `o` has, counting no further than `max + 1`: enough to tell "too many"
 * without walking a huge object key by key in JavaScript.
 */
export function keyCountUpTo(o: object, max: number): number {
  let n = 0;
  for (const _ in o) if (++n > max) break;
  return n;
}
