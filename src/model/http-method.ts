/**
 * README "What a decision means": `method` values that are HTTP method names compare
 * case-insensitively, in scopes and in requests; any other value stays exact. Both sides are brought
 * to the upper-case name once (a scope when it is compiled, a match_expr's literals compared with
 * `method` when it is compiled, a request before it is matched), so matching itself still compares
 * strings exactly.
 */

const HTTP_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH']);
/** The longest name above: anything longer is no method name and is left as it is without a look. */
const LONGEST = 7;

/** `value` as compared: an HTTP method name in any case as its upper-case name, anything else unchanged. */
export function canonicalMethod(value: string): string {
  // The common case, a name already in upper case, costs one set lookup.
  if (value.length > LONGEST || HTTP_METHODS.has(value)) return value;
  const upper = value.toUpperCase();
  return HTTP_METHODS.has(upper) ? upper : value;
}
