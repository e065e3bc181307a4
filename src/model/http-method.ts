/**
 * README "What a decision means": `method` values that are HTTP method names compare
 * case-insensitively, in scopes and in requests; any other value stays exact. Both sides are brought
 * to the upper-case name once (a scope when it is compiled, a match_expr's literals compared with
 * `method` when it is compiled, a request before it is matched), so matching itself still compares
 * strings exactly.
 */

/** The longest method name (isMethodName): anything longer is no method name and is left as it is without a look. */
const LONGEST = 7;

/** `value` as compared: an HTTP method name in any case as its upper-case name, anything else unchanged. */
export function canonicalMethod(value: string): string {
  // The common case, a name already in upper case, costs one pass over the names.
  if (value.length > LONGEST || isMethodName(value)) return value;
  const upper = value.toUpperCase();
  return isMethodName(upper) ? upper : value;
}

/**
 * An HTTP method name in upper case. A switch, not a Set: a request's method is a short string V8 has
 * interned, so each case is a pointer comparison, where a Set lookup hashes (BENCHMARKS.md, "Fifth round").
 */
function isMethodName(value: string): boolean {
  switch (value) {
    case 'GET':
    case 'HEAD':
    case 'POST':
    case 'PUT':
    case 'DELETE':
    case 'CONNECT':
    case 'OPTIONS':
    case 'TRACE':
    case 'PATCH':
      return true;
    default:
      return false;
  }
}
