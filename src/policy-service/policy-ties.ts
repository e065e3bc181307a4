import { Matcher, type CompiledPolicy } from '../matching/matcher.js';
import { canonicalMethod } from '../model/http-method.js';
import { SCOPE_FIELDS } from '../model/request-context.js';
import type { Policy } from '../policy/types.js';
import type { PolicyWarning } from '../schema/explain.js';

/**
 * Ties warned (docs/matching.md "Ties"): two policies of one layer with the same specificity and the same
 * priority, both of which could cover one request, are told apart by policy_id alone, which is rarely
 * what their author meant. A write that makes such a pair is still accepted; its answer names the other
 * policy and which one wins. Specificity and the winner order are the matcher's own (a Matcher is built
 * over the few policies in question), so the warning can never disagree with a decision.
 */

export type { PolicyWarning };

/** The warnings of `policy` against every policy of `others` it ties (itself, by id, left out). */
export function tieWarnings(policy: Policy, others: readonly Policy[], nowMs: number): PolicyWarning[] {
  if (!policy.enabled) return [];
  // The cheap filters first: at 100,000 policies, compiling every policy of the same priority (one Matcher
  // over them) cost a write hundreds of milliseconds of event loop; few share a request with this one.
  const overlaps = overlapTest(policy);
  const layer = layerOf(policy);
  const rivals: Policy[] = [];
  for (const other of others) {
    if (other.priority !== policy.priority || !other.enabled || other.enforcement_mode !== policy.enforcement_mode) continue;
    if (layerOf(other) === layer && other.policy_id !== policy.policy_id && overlaps(other)) rivals.push(other);
  }
  if (rivals.length === 0) return [];
  const matcher = Matcher.build([policy, ...rivals]);
  const mine = matcher.get(policy.policy_id);
  if (mine === undefined) return [];
  const warnings: PolicyWarning[] = [];
  for (const rival of rivals) {
    const theirs = matcher.get(rival.policy_id);
    if (theirs !== undefined && tie(mine, theirs, nowMs)) warnings.push({ policy_id: rival.policy_id, message: tieMessage(mine, theirs) });
  }
  return warnings;
}

/** A tie inside one set of policies (`rl validate`), reported once, under the policy that loses it. */
export interface SetTie {
  policy_id: string;
  warning: PolicyWarning;
}

/** Every tie among `policies`, in policy_id order of the losing policy. */
export function tiesAmong(policies: readonly Policy[], nowMs: number): SetTie[] {
  const matcher = Matcher.build(policies);
  const groups = new Map<string, CompiledPolicy[]>();
  for (const policy of policies) {
    const c = matcher.get(policy.policy_id);
    if (c === undefined) continue;
    const key = JSON.stringify([layerOf(policy), c.family, c.enforce, c.specificity, policy.priority]);
    const group = groups.get(key);
    if (group) group.push(c);
    else groups.set(key, [c]);
  }
  const ties: SetTie[] = [];
  for (const group of groups.values()) {
    for (let i = 0; i < group.length; i++) {
      for (let k = i + 1; k < group.length; k++) {
        const [winner, loser] = byRank(group[i], group[k]);
        if (tie(winner, loser, nowMs)) ties.push({ policy_id: loser.policy.policy_id, warning: { policy_id: winner.policy.policy_id, message: tieMessage(loser, winner) } });
      }
    }
  }
  return ties.sort((a, b) => compareIds(a.policy_id, b.policy_id) || compareIds(a.warning.policy_id, b.warning.policy_id));
}

/** The message `mine`'s answer carries about `theirs`. */
function tieMessage(mine: CompiledPolicy, theirs: CompiledPolicy): string {
  const [winner] = byRank(mine, theirs);
  const a = mine.policy;
  const b = theirs.policy;
  return (
    `"${a.policy_id}" ties "${b.policy_id}" in layer "${layerOf(a)}" (specificity ${mine.specificity}, priority ${a.priority}) ` +
    `and both can cover one request: "${winner.policy.policy_id}" wins there, on the smaller policy_id. ` +
    `Give the one that should win a higher priority: priority settles a tie`
  );
}

/** Both compete for one request: same family and rank key, and some request (at some time) is covered by both. */
function tie(a: CompiledPolicy, b: CompiledPolicy, nowMs: number): boolean {
  return (
    a.family === b.family &&
    a.enforce === b.enforce &&
    a.specificity === b.specificity &&
    a.policy.priority === b.policy.priority &&
    layerOf(a.policy) === layerOf(b.policy) &&
    a.rolloutPercent > 0 &&
    b.rolloutPercent > 0 &&
    validTogether(a, b, nowMs) &&
    scopesOverlap(a.policy, b.policy)
  );
}

/** Their validity windows share a moment that is not over yet (0 = unbounded). */
function validTogether(a: CompiledPolicy, b: CompiledPolicy, nowMs: number): boolean {
  const from = Math.max(a.validFromMs, b.validFromMs, nowMs);
  const to = Math.min(a.validToMs || Infinity, b.validToMs || Infinity);
  return from < to;
}

/**
 * Whether some request satisfies both `a`'s scope and another's: no field or tag holds two different
 * exact values (`*` takes any present value, an absent field any value at all). A `match_expr` is taken
 * to let some such request through: whether two expressions can both hold is not decided here. Only
 * `a`'s exact values can clash, so they are read once and each other policy costs a few lookups.
 */
function overlapTest(a: Policy): (b: Policy) => boolean {
  const scope = a.scope ?? {};
  const fields = SCOPE_FIELDS.filter((field) => exact(scope[field]));
  const values = fields.map((field) => (field === 'method' ? canonical(scope[field]) : scope[field]));
  const tags = Object.entries(scope.tags ?? {}).filter(([, value]) => exact(value));
  const methodAt = fields.indexOf('method');
  return (b) => {
    const other = b.scope;
    if (other === undefined) return true;
    for (let i = 0; i < fields.length; i++) {
      const value = other[fields[i]];
      if (exact(value) && (i === methodAt ? canonical(value) : value) !== values[i]) return false;
    }
    for (const [key, value] of tags) {
      const theirs = other.tags?.[key];
      if (exact(theirs) && theirs !== value) return false;
    }
    return true;
  };
}

function scopesOverlap(a: Policy, b: Policy): boolean {
  return overlapTest(a)(b);
}

function exact(value: string | undefined): value is string {
  return value !== undefined && value !== '' && value !== '*';
}

function canonical(method: string | undefined): string | undefined {
  return method === undefined || method === '*' ? method : canonicalMethod(method);
}

/** [winner, loser] by the matcher's own winner order (both compiled by one Matcher; of a tie, the smaller policy_id). */
function byRank(a: CompiledPolicy, b: CompiledPolicy): [CompiledPolicy, CompiledPolicy] {
  return a.rank < b.rank ? [a, b] : [b, a];
}

function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function layerOf(policy: Pick<Policy, 'policy_id'> & { layer?: string }): string {
  return policy.layer ?? 'default';
}
