import { createHash } from 'node:crypto';
import type { CounterSpec } from './counter-spec.js';

/**
 * The only place counter keys are built.
 *
 * A counter is identified by its policy, its algorithm and the values of the policy's `*` scope
 * fields (its identity). Those parts come from users, so they are length-prefixed before being
 * digested: `a:b`+`c` and `a`+`b:c` encode differently, and nothing a user sends can contain the
 * braces of the hash tag. Every key of one counter shares the `{digest}` hash tag, so a script's keys
 * always live in one Redis Cluster slot.
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

export function counterTag(policyId: string, identity: readonly string[]): string {
  return createHash('sha256').update(lengthPrefixed([policyId, ...identity])).digest('base64url').slice(0, 22);
}

/** `<utf8 byte length>:<value>` for each part: an injective encoding of a list of strings. */
export function lengthPrefixed(parts: readonly string[]): string {
  let out = '';
  for (const part of parts) out += `${Buffer.byteLength(part)}:${part}`;
  return out;
}
