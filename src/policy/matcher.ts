import { counterSpecOf, type CounterSpec } from '../counters/counter-spec.js';
import { lengthPrefixed } from '../counters/keys.js';
import { SCOPE_FIELDS, type RequestContext, type ScopeField } from '../model/request-context.js';
import { compileMatchExpr, type CompileResult, type MatchExprEvaluator } from './match-expr.js';
import { RegexBudget } from './match-regex.js';
import type { Policy } from './types.js';
import { stableHash32 } from '../util/hash.js';

/**
 * The policy matcher (CONTRACT.md, "Scope and matching", "Rollout", "Enforcement and shadow").
 *
 * Built from a policy snapshot whenever policies change, never on the hot path: counter specs and CEL
 * expressions are compiled once here. Matching does not scan all policies: each policy is indexed under
 * ONE of its exact-valued scope fields (the one whose value the fewest policies share), so a request
 * only visits the buckets of its own field values plus a fallback list of policies with no exact field.
 * Every bucket is pre-sorted by the winner order, so the scan of a bucket stops as soon as nothing in
 * it can beat what has been found.
 */

/** `check` considers every algorithm but concurrency; `acquire`/`release` only concurrency. */
export type PolicyFamily = 'rate' | 'concurrency';

/**
 * What a decision needs of one policy, and nothing else: a snapshot holds one per policy (100,000 and
 * more), so every list here has its exact length and lists, specs and wildcards that several policies
 * have in common are one shared (frozen in spirit: never mutate) object. What only building the index
 * needs (the exact-valued fields and tags) lives in the build's `Draft` and is dropped with it.
 */
export interface CompiledPolicy {
  policy: Policy;
  /** Shared by every policy of this snapshot whose algorithm has the same parameters. */
  spec: CounterSpec;
  /** Exact field 2 points, `*` 1 point, each tag as a field, match_expr 1 point. */
  specificity: number;
  family: PolicyFamily;
  /** Position in the global winner order (0 = best): specificity desc, priority desc, policy_id asc. */
  rank: number;
  enforce: boolean;
  rolloutPercent: number;
  /** Unix milliseconds; 0 = unbounded. */
  validFromMs: number;
  validToMs: number;
  /** `*` parts in identity order (sorted by identity name). */
  wildcards: readonly Wildcard[];
  matchExpr?: MatchExprEvaluator;
  /**
   * Hot-path copies, flat to keep pointer chasing down: exact fields and tags still to compare as
   * [name, value, name, value, ...] (the pair the policy is indexed under is left out: its bucket
   * already guarantees it), and the names of the `*` fields and tags that must be present.
   */
  checkFields: string[];
  checkTags: string[];
  wildFields: ScopeField[];
  wildTags: string[];
}

/** A policy being indexed: its compiled form plus what only the build reads. */
interface Draft {
  compiled: CompiledPolicy;
  /** Exact-valued scope fields (not tags), as [field, value] pairs. */
  exactFields: [ScopeField, string][];
  /** Exact-valued tags, as [key, value] pairs. */
  exactTags: [string, string][];
}

interface Wildcard {
  /** The identity name: the field name, or `tags.<key>`. */
  name: string;
  field?: ScopeField;
  tag?: string;
}

export interface PolicyMatch {
  compiled: CompiledPolicy;
  /** For each `*` scope field in sorted field order, [fieldName, requestValue] flattened. */
  identity: string[];
}

export interface MatchResult {
  enforce?: PolicyMatch;
  shadow?: PolicyMatch;
}

/** A policy the matcher could not compile (validation should have refused it); it never matches. */
export interface SkippedPolicy {
  policy_id: string;
  reason: string;
}

/** One family's index. */
class FamilyIndex {
  /** field → value → bucket sorted by rank. */
  readonly byField = new Map<ScopeField, Map<string, CompiledPolicy[]>>();
  /** Fields that appear in `byField`, in SCOPE_FIELDS order, and their value maps (parallel arrays). */
  fields: ScopeField[] = [];
  fieldMaps: Map<string, CompiledPolicy[]>[] = [];
  /** tag key → value → bucket sorted by rank. */
  readonly byTag = new Map<string, Map<string, CompiledPolicy[]>>();
  /** Policies with no exact-valued scope field or tag, sorted by rank. */
  readonly fallback: CompiledPolicy[] = [];
}

export class Matcher {
  private readonly families: Record<PolicyFamily, FamilyIndex>;
  private readonly byId: Map<string, CompiledPolicy>;
  /** Policies left out because they could not be compiled. */
  readonly skipped: readonly SkippedPolicy[];

  private constructor(families: Record<PolicyFamily, FamilyIndex>, byId: Map<string, CompiledPolicy>, skipped: SkippedPolicy[]) {
    this.families = families;
    this.byId = byId;
    this.skipped = skipped;
  }

  /** Policies are already validated; specs and CEL are compiled once, here. Disabled policies are left out. */
  static build(policies: readonly Policy[]): Matcher {
    const skipped: SkippedPolicy[] = [];
    const drafts: Draft[] = [];
    const shared = sharing();
    for (const policy of policies) {
      if (!policy.enabled) continue;
      const d = compile(policy, shared);
      if ('reason' in d) skipped.push({ policy_id: policy.policy_id, reason: d.reason });
      else drafts.push(d);
    }
    drafts.sort((a, b) => compareRank(a.compiled, b.compiled));
    drafts.forEach((d, i) => (d.compiled.rank = i));

    // How many policies share each exact (field, value): each policy is indexed under its rarest one.
    const keysOf = drafts.map(indexKeys);
    const sharedBy = new Map<string, number>();
    for (const keys of keysOf) for (const k of keys) sharedBy.set(k, (sharedBy.get(k) ?? 0) + 1);

    const families: Record<PolicyFamily, FamilyIndex> = { rate: new FamilyIndex(), concurrency: new FamilyIndex() };
    const byId = new Map<string, CompiledPolicy>();
    drafts.forEach(({ compiled: c, exactFields, exactTags }, i) => {
      // In rank order, so every bucket ends up sorted by rank.
      byId.set(c.policy.policy_id, c);
      const index = families[c.family];
      const keys = keysOf[i];
      let slot = -1;
      let fewest = Infinity;
      for (let k = 0; k < keys.length; k++) {
        const count = sharedBy.get(keys[k])!;
        if (count < fewest) {
          fewest = count;
          slot = k;
        }
      }
      const nFields = exactFields.length;
      c.checkFields = shared.strings(exactFields.filter((_, k) => k !== slot).flat());
      c.checkTags = shared.strings(exactTags.filter((_, k) => k + nFields !== slot).flat());
      if (slot < 0) {
        index.fallback.push(c);
      } else if (slot < nFields) {
        const [field, value] = exactFields[slot];
        bucketOf(index.byField, field, value).push(c);
      } else {
        const [tag, value] = exactTags[slot - nFields];
        bucketOf(index.byTag, tag, value).push(c);
      }
    });
    for (const index of Object.values(families)) {
      index.fields = SCOPE_FIELDS.filter((f) => index.byField.has(f));
      index.fieldMaps = index.fields.map((f) => index.byField.get(f)!);
      // Most buckets hold one policy; push() left each with room for 16 more.
      for (const byValue of [...index.byField.values(), ...index.byTag.values()]) {
        for (const [value, bucket] of byValue) byValue.set(value, bucket.slice());
      }
    }
    return new Matcher(families, byId, skipped);
  }

  /** Number of policies that can match (enabled and compiled), both families. */
  get size(): number {
    return this.byId.size;
  }

  /** The compiled policy with this id, when it is enabled and compiled. */
  get(policyId: string): CompiledPolicy | undefined {
    return this.byId.get(policyId);
  }

  /** The best enforce-mode and the best shadow-mode candidate for this request. */
  match(ctx: RequestContext, family: PolicyFamily, nowMs: number): MatchResult {
    const index = this.families[family];
    // One scratch state, reset per call: matching is synchronous and never re-entered.
    const state = scratch;
    state.enforce = state.shadow = state.enforceIdentity = state.shadowIdentity = undefined;
    state.enforceRank = state.shadowRank = Infinity;
    state.regexBudget.reset(); // one regex budget for all match_expr evaluations of this decision

    const fields = index.fields;
    const fieldMaps = index.fieldMaps;
    for (let i = 0; i < fields.length; i++) {
      const value = ctx[fields[i]];
      if (value === undefined || value === '') continue;
      const bucket = fieldMaps[i].get(value);
      if (bucket !== undefined) scan(bucket, ctx, nowMs, state);
    }
    if (index.byTag.size > 0) {
      const tags = ctx.tags;
      if (tags) {
        // Visit whichever side is smaller: the request's tags or the indexed tag keys.
        const tagKeys = Object.keys(tags);
        if (tagKeys.length <= index.byTag.size) {
          for (const key of tagKeys) {
            const byValue = index.byTag.get(key);
            if (byValue === undefined) continue;
            const value = tags[key];
            if (typeof value !== 'string') continue;
            const bucket = byValue.get(value);
            if (bucket !== undefined) scan(bucket, ctx, nowMs, state);
          }
        } else {
          for (const [key, byValue] of index.byTag) {
            if (!Object.prototype.hasOwnProperty.call(tags, key)) continue;
            const value = tags[key];
            if (typeof value !== 'string') continue;
            const bucket = byValue.get(value);
            if (bucket !== undefined) scan(bucket, ctx, nowMs, state);
          }
        }
      }
    }
    if (index.fallback.length > 0) scan(index.fallback, ctx, nowMs, state);

    const result: MatchResult = {};
    if (state.enforce) result.enforce = { compiled: state.enforce, identity: state.enforceIdentity ?? identityOf(state.enforce, ctx) };
    if (state.shadow) result.shadow = { compiled: state.shadow, identity: state.shadowIdentity ?? identityOf(state.shadow, ctx) };
    state.enforce = state.shadow = state.enforceIdentity = state.shadowIdentity = undefined; // hold no references
    return result;
  }
}

interface ScanState {
  enforce: CompiledPolicy | undefined;
  shadow: CompiledPolicy | undefined;
  enforceRank: number;
  shadowRank: number;
  enforceIdentity: string[] | undefined;
  shadowIdentity: string[] | undefined;
  regexBudget: RegexBudget;
}

const scratch: ScanState = {
  enforce: undefined,
  shadow: undefined,
  enforceRank: Infinity,
  shadowRank: Infinity,
  enforceIdentity: undefined,
  shadowIdentity: undefined,
  regexBudget: new RegexBudget(),
};

function scan(bucket: readonly CompiledPolicy[], ctx: RequestContext, nowMs: number, state: ScanState): void {
  for (let i = 0; i < bucket.length; i++) {
    const c = bucket[i];
    // Sorted by rank: once this one cannot beat either best, nothing after it can.
    if (c.rank >= state.enforceRank && c.rank >= state.shadowRank) return;
    if (c.enforce ? c.rank >= state.enforceRank : c.rank >= state.shadowRank) continue;
    if (!scopeMatches(c, ctx, nowMs, state.regexBudget)) continue;
    let identity: string[] | undefined;
    const percent = c.rolloutPercent;
    if (percent < 100) {
      if (percent <= 0) continue;
      identity = identityOf(c, ctx);
      if (rolloutBucket(c.policy.policy_id, identity) >= percent) continue;
    }
    if (c.enforce) {
      state.enforce = c;
      state.enforceRank = c.rank;
      state.enforceIdentity = identity;
    } else {
      state.shadow = c;
      state.shadowRank = c.rank;
      state.shadowIdentity = identity;
    }
  }
}

/** Validity window, scope and match_expr (everything but rollout). */
function scopeMatches(c: CompiledPolicy, ctx: RequestContext, nowMs: number, regexBudget: RegexBudget): boolean {
  if (c.validFromMs !== 0 && nowMs < c.validFromMs) return false;
  if (c.validToMs !== 0 && nowMs >= c.validToMs) return false;
  const fields = c.checkFields;
  for (let i = 0; i < fields.length; i += 2) if (ctx[fields[i] as ScopeField] !== fields[i + 1]) return false;
  const wildFields = c.wildFields;
  for (let i = 0; i < wildFields.length; i++) {
    const value = ctx[wildFields[i]];
    if (typeof value !== 'string' || value === '') return false;
  }
  const checkTags = c.checkTags;
  const wildTags = c.wildTags;
  if (checkTags.length > 0 || wildTags.length > 0) {
    const tags = ctx.tags;
    if (!tags) return false;
    for (let i = 0; i < checkTags.length; i += 2) {
      if (!Object.prototype.hasOwnProperty.call(tags, checkTags[i]) || tags[checkTags[i]] !== checkTags[i + 1]) return false;
    }
    for (let i = 0; i < wildTags.length; i++) {
      const value = tagValue(tags, wildTags[i]);
      if (value === undefined || value === '') return false;
    }
  }
  if (c.matchExpr !== undefined && !c.matchExpr(ctx, regexBudget)) return false;
  return true;
}

function tagValue(tags: Record<string, string> | undefined, key: string): string | undefined {
  if (!tags || !Object.prototype.hasOwnProperty.call(tags, key)) return undefined;
  const v = tags[key];
  return typeof v === 'string' ? v : undefined;
}

function identityOf(c: CompiledPolicy, ctx: RequestContext): string[] {
  const wild = c.wildcards;
  if (wild.length === 0) return [];
  const identity = new Array<string>(wild.length * 2);
  for (let i = 0; i < wild.length; i++) {
    const w = wild[i];
    identity[2 * i] = w.name;
    identity[2 * i + 1] = (w.field !== undefined ? ctx[w.field] : tagValue(ctx.tags, w.tag!)) ?? '';
  }
  return identity;
}

function compile(policy: Policy, shared: Sharing): Draft | { reason: string } {
  let spec: CounterSpec;
  try {
    spec = shared.spec(counterSpecOf(policy.algorithm));
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
  const exactFields: [ScopeField, string][] = [];
  const exactTags: [string, string][] = [];
  const wildcards: Wildcard[] = [];
  let specificity = matchExpr ? 1 : 0;
  const scope = policy.scope ?? {};
  for (const field of SCOPE_FIELDS) {
    const value = scope[field];
    if (value === undefined || value === '') continue;
    if (value === '*') {
      wildcards.push({ name: field, field });
      specificity += 1;
    } else {
      exactFields.push([field, value]);
      specificity += 2;
    }
  }
  const tags = scope.tags;
  if (tags) {
    for (const key of Object.keys(tags)) {
      const value = tags[key];
      if (typeof value !== 'string' || value === '') continue;
      if (value === '*') {
        wildcards.push({ name: `tags.${key}`, tag: key });
        specificity += 1;
      } else {
        exactTags.push([key, value]);
        specificity += 2;
      }
    }
  }
  wildcards.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  // Hot fields first: V8 lays out in-object properties in this order, so a scan touches one cache line.
  const compiled: CompiledPolicy = {
    rank: 0,
    enforce: policy.enforcement_mode !== 'shadow',
    rolloutPercent: policy.rollout_percent ?? 100,
    validFromMs: (policy.valid_from_unix ?? 0) * 1000,
    validToMs: (policy.valid_to_unix ?? 0) * 1000,
    checkFields: EMPTY,
    wildFields: shared.strings(wildcards.filter((w) => w.field !== undefined).map((w) => w.field!)) as ScopeField[],
    checkTags: EMPTY,
    wildTags: shared.strings(wildcards.filter((w) => w.tag !== undefined).map((w) => w.tag!)),
    matchExpr,
    policy,
    spec,
    specificity,
    family: spec.type === 'concurrency' ? 'concurrency' : 'rate',
    wildcards: shared.wildcards(wildcards),
  };
  return { compiled, exactFields, exactTags };
}

/** Winner order: highest specificity, then highest priority, then smallest policy_id (plain compare). */
function compareRank(a: CompiledPolicy, b: CompiledPolicy): number {
  if (a.specificity !== b.specificity) return b.specificity - a.specificity;
  if (a.policy.priority !== b.policy.priority) return b.policy.priority > a.policy.priority ? 1 : -1;
  const x = a.policy.policy_id;
  const y = b.policy.policy_id;
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * Keys of the exact (field, value) pairs a policy could be indexed under, fields first, then tags; only
 * used to count how many policies share a pair (a collision could only make the choice less than ideal).
 */
function indexKeys(d: Draft): string[] {
  const keys: string[] = [];
  for (const [field, value] of d.exactFields) keys.push(`f${field}\u0000${value}`);
  for (const [tag, value] of d.exactTags) keys.push(`t${tag.length}:${tag}\u0000${value}`);
  return keys;
}

/** The empty list, shared by every policy (it stays in cache). */
const EMPTY: string[] = [];

/**
 * One object for equal values within a snapshot: lists of strings, wildcard lists and counter specs
 * that many policies have in common (most per-user policies have the same `["user_id"]` wildcard, a
 * deployment has a handful of distinct algorithms). Fewer objects, warmer caches, and a kept list is a
 * copy of exactly its length (a list built with push() has room for 16 more).
 */
interface Sharing {
  strings(parts: string[]): string[];
  wildcards(list: Wildcard[]): readonly Wildcard[];
  spec(spec: CounterSpec): CounterSpec;
}

function sharing(): Sharing {
  const lists = new Map<string, unknown[]>();
  const specs = new Map<string, CounterSpec>();
  const list = <T>(kind: string, items: T[], keyOf: (item: T) => string): T[] => {
    if (items.length === 0) return EMPTY as T[];
    let key = kind;
    for (const item of items) {
      const part = keyOf(item);
      key += `${part.length}:${part}`; // injective, like lengthPrefixed
    }
    const known = lists.get(key) as T[] | undefined;
    if (known) return known;
    const kept = items.slice();
    lists.set(key, kept);
    return kept;
  };
  return {
    strings: (parts) => list('s', parts, (part) => part),
    // A wildcard's name determines it (`tags.<key>` for a tag, the field name otherwise).
    wildcards: (wildcards) => list('w', wildcards, (w) => w.name),
    spec: (spec) => {
      // Specs are flat objects of strings and numbers, built in a fixed key order per type.
      const key = JSON.stringify(spec);
      const known = specs.get(key);
      if (known) return known;
      specs.set(key, spec);
      return spec;
    },
  };
}

/** Compiled expressions by source text: rebuilding a large snapshot must not re-parse every one. */
const exprCache = new Map<string, CompileResult>();
const EXPR_CACHE_MAX = 10_000;

function compileCached(expr: string): CompileResult {
  let compiled = exprCache.get(expr);
  if (compiled === undefined) {
    compiled = compileMatchExpr(expr);
    if (exprCache.size >= EXPR_CACHE_MAX) exprCache.clear();
    exprCache.set(expr, compiled);
  }
  return compiled;
}

function bucketOf<K>(index: Map<K, Map<string, CompiledPolicy[]>>, key: K, value: string): CompiledPolicy[] {
  let byValue = index.get(key);
  if (!byValue) index.set(key, (byValue = new Map()));
  let bucket = byValue.get(value);
  if (!bucket) byValue.set(value, (bucket = []));
  return bucket;
}

/**
 * The rollout bucket (0..99) of a counter identity under a policy: the stable hash of
 * `lengthPrefixed([policyId, ...identity])` mod 100. A request is inside the rollout when
 * `rolloutBucket(...) < rollout_percent`, the same on every node and across releases.
 */
export function rolloutBucket(policyId: string, identity: readonly string[]): number {
  return stableHash32(lengthPrefixed([policyId, ...identity])) % 100;
}
