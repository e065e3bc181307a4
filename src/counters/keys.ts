import { createHash } from 'node:crypto';
import type { CounterSpec } from './counter-spec.js';

/**
 * The only place counter keys are built.
 *
 * A counter is identified by its policy, its algorithm and the values of the policy's `*` scope
 * fields (its identity). Those parts come from users, so they are length-prefixed: `a:b`+`c` and
 * `a`+`b:c` encode differently. Every key of one counter shares the `{…}` hash tag, so a script's keys
 * always live in one Redis Cluster slot, and the tag's content can never contain `}` (escaped below),
 * so nothing a user sends can end the tag early and choose the slot.
 *
 * Short identities are encoded as they are (readable in `redis-cli`, and no hashing on the hot path);
 * long ones are digested so a key never grows with the size of the request.
 *
 * The algorithm is part of the key so that changing a policy's algorithm starts a fresh counter of
 * the right Redis type instead of failing with WRONGTYPE; its limit and window are not, so a live quota
 * change keeps the counter.
 */
export function counterKeys(
  prefix: string,
  policyId: string,
  spec: CounterSpec,
  identity: readonly string[],
): string[] {
  const base = `${prefix}{${counterTag(policyId, identity)}}:${spec.type}`;
  // The sliding log keeps its entries in a sorted set and its running sum beside it.
  return spec.type === 'sliding_window_log' ? [base, `${base}:sum`] : [base];
}

/** Longest tag kept readable; longer ones become a 128-bit digest (marked `#`, which encoding never yields first). */
const MAX_READABLE_TAG = 160;

export function counterTag(policyId: string, identity: readonly string[]): string {
  const encoded = lengthPrefixed([policyId, ...identity]);
  if (encoded.length <= MAX_READABLE_TAG) return escapeTag(encoded);
  return `#${createHash('sha256').update(encoded).digest('base64url').slice(0, 22)}`;
}

/** `%` → `%25` and `}` → `%7D`: reversible, so distinct encodings stay distinct, and `}`-free. */
function escapeTag(text: string): string {
  return /[%}]/.test(text) ? text.replace(/%/g, '%25').replace(/\}/g, '%7D') : text;
}

/** `<utf8 byte length>:<value>` for each part: an injective encoding of a list of strings. */
export function lengthPrefixed(parts: readonly string[]): string {
  let out = '';
  for (const part of parts) out += `${Buffer.byteLength(part)}:${part}`;
  return out;
}
