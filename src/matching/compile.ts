import type { CounterSpec } from '../counters/counter-spec.js';
import { policySpecOf } from './counter-spec-of.js';
import { compileLease } from '../policy/lease-terms.js';
import { SCOPE_FIELDS, type ScopeField } from '../model/request-context.js';
import { clientNetwork } from './client-network.js';
import { canonicalMethod } from '../model/http-method.js';
import type { MatchExprEvaluator } from '../policy/match-expr.js';
import type { Policy } from '../policy/types.js';
import { DEFAULT_LAYER } from './layer-index.js';
import type { CompiledPolicy, Wildcard } from './compiled-policy.js';
import { compileCached, EMPTY, specOf, type Sharing, type WildParts } from './sharing.js';

/** A policy into its compiled form (compiled-policy.ts), once per policy version. */

/** A policy being indexed: its compiled form plus what only the build reads. */
export interface Draft {
  compiled: CompiledPolicy;
  /** Exact-valued scope fields (not tags) in SCOPE_FIELDS order, flat: [field, value, field, value, ...]. */
  exactFields: string[];
  /** Exact-valued tags, flat: [key, value, ...]. */
  exactTags: string[];
}

/** Each scope field's position in SCOPE_FIELDS (a bit in a 32-bit mask: there are fewer than 32). */
const FIELD_POSITION = new Map<string, number>(SCOPE_FIELDS.map((field, at) => [field, at]));
const SOURCE_IP = 1 << FIELD_POSITION.get('source_ip')!;
const METHOD = FIELD_POSITION.get('method')!;

/**
 * The scope's own fields, in SCOPE_FIELDS order (the order checks and index slots follow): the exact
 * ones as [field, value, ...] (method in its canonical form), the `*` ones as a mask of positions, and
 * their specificity points. Walks the scope's keys rather than asking it for each of the twenty names.
 */
function fieldsOf(scope: NonNullable<Policy['scope']>): { exactFields: string[]; wildMask: number; points: number } {
  let present = 0;
  for (const key in scope) {
    const at = FIELD_POSITION.get(key);
    if (at === undefined) continue;
    const value = scope[key as ScopeField];
    if (value === undefined || value === '') continue;
    present |= 1 << at;
  }
  const exactFields: string[] = [];
  let wildMask = 0;
  let points = 0;
  for (let bits = present; bits !== 0; bits &= bits - 1) {
    const at = 31 - Math.clz32(bits & -bits);
    const field = SCOPE_FIELDS[at];
    const value = at === METHOD ? canonicalMethod(scope[field]!) : scope[field]!;
    if (value === '*') {
      wildMask |= 1 << at;
      points += 1;
    } else {
      exactFields.push(field, value);
      points += 2;
    }
  }
  return { exactFields, wildMask, points };
}

/** The wildcards of the `*` fields in `mask` and the `*` tags `tagKeys`, sorted by identity name. */
function wildcardsOf(mask: number, tagKeys: readonly string[] | undefined, sourceIpPrefix: Policy['source_ip_prefix']): Wildcard[] {
  const wildcards: Wildcard[] = [];
  for (let bits = mask; bits !== 0; bits &= bits - 1) {
    const field = SCOPE_FIELDS[31 - Math.clz32(bits & -bits)];
    wildcards.push(field === 'source_ip' ? { name: field, field, network: clientNetwork(sourceIpPrefix) } : { name: field, field });
  }
  for (const tag of tagKeys ?? []) wildcards.push({ name: `tags.${tag}`, tag });
  return wildcards.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

function wildParts(wildcards: Wildcard[], shared: Sharing): WildParts {
  return {
    wildcards: shared.wildcards(wildcards),
    fields: shared.strings(wildcards.filter((w) => w.field !== undefined).map((w) => w.field!)) as ScopeField[],
    tags: shared.strings(wildcards.filter((w) => w.tag !== undefined).map((w) => w.tag!)),
  };
}

export function compile(policy: Policy, shared: Sharing): Draft | { reason: string } {
  let spec: CounterSpec;
  try {
    // A global budget's spec names its policy, so it is not shared by algorithm.
    spec = policy.budget === 'global' ? shared.spec(policySpecOf(policy)) : specOf(policy.algorithm, shared);
  } catch (err) {
    return { reason: `algorithm: ${err instanceof Error ? err.message : String(err)}` };
  }
  let matchExpr: MatchExprEvaluator | undefined;
  const expr = policy.metadata?.match_expr;
  if (expr !== undefined) {
    const compiled = compileCached(expr);
    if (!compiled.ok) return { reason: `metadata.match_expr: ${compiled.message}` };
    matchExpr = compiled.evaluate;
  }
  const scope = policy.scope ?? {};
  const { exactFields, wildMask, points } = fieldsOf(scope);
  let specificity = (matchExpr ? 1 : 0) + points;
  const exactTags: string[] = [];
  let wildTagKeys: string[] | undefined;
  const tags = scope.tags;
  if (tags) {
    for (const key of Object.keys(tags)) {
      const value = tags[key];
      if (typeof value !== 'string' || value === '') continue;
      if (value === '*') {
        (wildTagKeys ??= []).push(key);
        specificity += 1;
      } else {
        exactTags.push(key, value);
        specificity += 2;
      }
    }
  }
  // Wildcards of plain fields depend on which fields only: worked out once per combination.
  const wild =
    wildTagKeys === undefined && (wildMask & SOURCE_IP) === 0
      ? shared.fieldWildcards(wildMask, () => wildParts(wildcardsOf(wildMask, undefined, undefined), shared))
      : wildParts(wildcardsOf(wildMask, wildTagKeys, policy.source_ip_prefix), shared);
  // Hot fields first: V8 lays out in-object properties in this order, so a scan touches one cache line.
  const compiled: CompiledPolicy = {
    rank: 0,
    enforce: policy.enforcement_mode !== 'shadow',
    rolloutPercent: policy.rollout_percent ?? 100,
    validFromMs: (policy.valid_from_unix ?? 0) * 1000,
    validToMs: (policy.valid_to_unix ?? 0) * 1000,
    checkFields: EMPTY,
    wildFields: wild.fields,
    checkTags: EMPTY,
    wildTags: wild.tags,
    matchExpr,
    policy,
    spec,
    specificity,
    family: spec.type === 'concurrency' ? 'concurrency' : 'rate',
    layer: policy.layer ?? DEFAULT_LAYER,
    wildcards: wild.wildcards,
    lease: compileLease(policy, 'process'),
    home: undefined,
    homeValue: '',
  };
  return { compiled, exactFields, exactTags };
}
