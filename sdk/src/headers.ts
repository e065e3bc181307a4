import type { Decision } from './types.js';

/**
 * The rate-limit response headers and the 429 problem body of README "SDK",
 * rendered from a Decision. The only place that knows their syntax; it depends on nothing
 * but the Decision shape, so gateways (the Envoy adapter) and client middleware render alike.
 *
 * Headers follow the IETF httpapi draft "RateLimit header fields for HTTP" (structured fields):
 * `RateLimit-Policy` names the policy, its quota `q` and window `w`; `RateLimit` the remaining units
 * `r` and the seconds `t` until they are whole again. A decision over several layers of policies lists
 * every layer's policy in `RateLimit-Policy` and its deciding one in `RateLimit`; its problem body's
 * `violated-policies` names every layer that refused.
 */

export type RateLimitHeaderStyle = 'ietf' | 'legacy';

/** The problem type the draft registers for a request refused by a quota policy. */
export const QUOTA_EXCEEDED_TYPE = 'https://iana.org/assignments/http-problem-types#quota-exceeded';
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

export interface QuotaExceededProblem {
  type: string;
  title: string;
  status: 429;
  detail: string;
  'violated-policies': string[];
}

/**
 * The headers for `decision`, as [name, value] pairs in a stable order. None for an answer no enforced
 * policy made: no match, a shadow-only answer, or a failure-mode answer (the counters were not read).
 */
export function renderRateLimitHeaders(decision: Decision, style: RateLimitHeaderStyle = 'ietf'): [string, string][] {
  return renderRateLimitHeaderList([decision], style);
}

/**
 * The headers for several decisions about one request (a gateway's descriptors), the one the client
 * should heed first: in the IETF style `RateLimit-Policy` and `RateLimit` list one item per decision
 * an enforced policy made, in the order given (the draft's lists: `"a";q=100;w=60, "b";q=5;w=1`).
 * The legacy headers and Retry-After have room for one limit: the first's.
 */
export function renderRateLimitHeaderList(decisions: readonly Decision[], style: RateLimitHeaderStyle = 'ietf'): [string, string][] {
  const speaking = decisions.filter(speaksForALimit);
  const first = speaking[0];
  if (first === undefined) return [];
  const headers: [string, string][] =
    style === 'ietf'
      ? [
          ['RateLimit-Policy', speaking.map(policyItems).join(', ')],
          ['RateLimit', speaking.map(remainingItem).join(', ')],
        ]
      : [
          ['X-RateLimit-Limit', String(wholeUnits(first.limit))],
          ['X-RateLimit-Remaining', String(wholeUnits(first.remaining))],
          ['X-RateLimit-Reset', String(seconds(first.reset_after))],
        ];
  if (!first.allowed && first.retry_after > 0) headers.push(['Retry-After', String(seconds(first.retry_after))]);
  return headers;
}

/** The application/problem+json body of a refused request. */
export function problemDetails(decision: Decision): QuotaExceededProblem {
  const policy = decision.matched_policy_id;
  const window = decision.window > 0 ? ` per ${seconds(decision.window)} s` : ' at once';
  const retry = decision.retry_after > 0 ? `; retry in ${seconds(decision.retry_after)} s` : '';
  // A cost larger than the limit is never admitted: say so instead of a retry that would not help.
  const never = decision.reason === 'quantity_exceeds_limit' ? '; this request exceeds the limit and can never be admitted' : '';
  return {
    type: QUOTA_EXCEEDED_TYPE,
    title: 'Quota exceeded',
    status: 429,
    detail: `Policy "${policy}" allows ${wholeUnits(decision.limit)}${window}${retry}${never}.`,
    'violated-policies': decision.layers ? decision.layers.filter((l) => !l.allowed).map((l) => l.policy_id) : policy === '' ? [] : [policy],
  };
}

/**
 * Whether an answer speaks for a limit the client can act on: an enforced policy matched and its
 * counters were read (not a shadow-only, failure-mode or SDK fallback answer). Headers are rendered
 * for these only, and a gateway picks its limiting descriptor among them.
 */
export function speaksForALimit(decision: Decision): boolean {
  return (
    decision.matched_policy_id !== '' &&
    !decision.shadow_mode &&
    decision.reason !== 'counter_store_unavailable' &&
    decision.reason !== 'service_unavailable'
  );
}

/**
 * The `RateLimit-Policy` items of one decision: its policy's, or over several layers every layer's, in
 * layer order (`RateLimit` names the deciding one alone).
 */
function policyItems(decision: Decision): string {
  if (decision.layers === undefined) return policyItem(decision.matched_policy_id, decision.limit, decision.window);
  return decision.layers.map((l) => policyItem(l.policy_id, l.limit, l.window)).join(', ');
}

/** `"<id>";q=<limit>;w=<s>`; a concurrency policy (no window) counts concurrent requests instead. */
function policyItem(policyId: string, limit: number, window: number): string {
  const base = `${sfString(policyId)};q=${wholeUnits(limit)}`;
  return window > 0 ? `${base};w=${seconds(window)}` : `${base};qu="concurrent-requests"`;
}

/** `"<id>";r=<remaining>;t=<s>`: what is left of the policy's quota and when it is whole again. */
function remainingItem(decision: Decision): string {
  return `${sfString(decision.matched_policy_id)};r=${wholeUnits(decision.remaining)};t=${seconds(decision.reset_after)}`;
}

/** Milliseconds as whole seconds, rounded up: a client told 0 would retry too early. */
function seconds(ms: number): number {
  return Number.isFinite(ms) && ms > 0 ? Math.ceil(ms / 1000) : 0;
}

/** Structured-field integers are whole and non-negative here (a sliding estimate can be fractional). */
function wholeUnits(n: number): number {
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : 0;
}

/** An RFC 8941 sf-string: printable ASCII, with `"` and `\` escaped; anything else becomes `?`. */
function sfString(text: string): string {
  let out = '"';
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else out += code >= 0x20 && code <= 0x7e ? ch : '?';
  }
  return `${out}"`;
}
