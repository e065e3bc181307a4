import type { CompiledLease, CounterSpec } from '../counters/counter-spec.js';
import { counterSpecOf, policySpecOf } from './counter-spec-of.js';
import { compileLease } from '../policy/lease-terms.js';
import { lengthPrefixed } from '../counters/keys.js';
import { SCOPE_FIELDS, type RequestContext, type ScopeField } from '../model/request-context.js';
import { clientNetwork, type ClientNetwork } from './client-network.js';
import { canonicalMethod } from '../model/http-method.js';
import { compileMatchExpr, type CompileResult, type MatchExprEvaluator } from '../policy/match-expr.js';
import { RegexBudget } from '../policy/match-regex.js';
import { RankOrder } from './rank-order.js';
import type { AlgorithmConfig, Policy } from '../policy/types.js';
import { stableHash32 } from '../util/hash.js';
import { DEFAULT_LAYER, LayerSet as LayerSetOf, type FamilyIndex as FamilyIndexOf, type LayerIndex as LayerIndexOf, type PolicyFamily } from './layer-index.js';

type FamilyIndex = FamilyIndexOf<CompiledPolicy>;
type LayerIndex = LayerIndexOf<CompiledPolicy>;
type LayerSet = LayerSetOf<CompiledPolicy>;

export { DEFAULT_LAYER } from './layer-index.js';

/**
 * The policy matcher (docs/matching.md; README "What a decision means").
 *
 * Built from a policy snapshot at start-up (or a full reload), then changed one policy at a time by
 * `apply`, never on the hot path: counter specs and CEL expressions are compiled once per policy
 * version. A CompiledPolicy object stands for one version of one policy: a change makes a new one, so
 * its identity is what per-policy caches (counter keys, deny cache) key their entries by.
 *
 * Matching does not scan all policies: each policy is indexed under ONE of its exact-valued scope
 * fields (the one whose value the fewest policies share), so a request
 * only visits the buckets of its own field values plus a fallback list of policies with no exact field.
 * Every bucket is pre-sorted by the winner order, so the scan of a bucket stops as soon as nothing in
 * it can beat what has been found.
 *
 * Layers: each policy belongs to one layer (`layer`, default "default"), and each layer is an index of
 * its own that chooses its own winners; policies of different layers never compete. A one-layer set
 * is one index, matched as before.
 */

/** `check` considers every algorithm but concurrency; `acquire`/`release` only concurrency. */
export type { PolicyFamily } from './layer-index.js';

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
  /** The policy's layer ("default" when it names none). */
  layer: string;
  /**
   * Orders the winner order (smaller = better): specificity desc, priority desc, policy_id asc. Not a
   * position: ranks are spaced out so a later policy gets one between its neighbours, and may all be
   * renumbered by a later change (the one field that is not fixed once indexed; only matching reads it).
   */
  rank: number;
  enforce: boolean;
  rolloutPercent: number;
  /** Unix milliseconds; 0 = unbounded. */
  validFromMs: number;
  validToMs: number;
  /** `*` parts in identity order (sorted by identity name). */
  wildcards: readonly Wildcard[];
  matchExpr?: MatchExprEvaluator;
  /** The process level's capacity lease (the policy's own `lease`), compiled once; undefined without one. */
  lease?: CompiledLease;
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
  /** Exact-valued scope fields (not tags) in SCOPE_FIELDS order, flat: [field, value, field, value, ...]. */
  exactFields: string[];
  /** Exact-valued tags, flat: [key, value, ...]. */
  exactTags: string[];
}

export interface Wildcard {
  /** The identity name: the field name, or `tags.<key>`. */
  name: string;
  field?: ScopeField;
  tag?: string;
  /** `source_ip` only: counts client networks, not address strings (the policy's source_ip_prefix). */
  network?: ClientNetwork;
}

export interface PolicyMatch {
  compiled: CompiledPolicy;
  /** For each `*` scope field in sorted field order, [fieldName, requestValue] flattened. */
  identity: string[];
}

/** One layer's winners for a request: its best enforce-mode and best shadow-mode candidate. */
export interface LayerMatch {
  layer: string;
  enforce?: PolicyMatch;
  shadow?: PolicyMatch;
}

/**
 * What `match` answers. The top-level fields are the winners of the first layer (in byte order of layer
 * names) that has any; `layer` is "default" when no layer has one. `layers` is set only when two or
 * more layers have a winner: every such layer, in layer-name order (the first is the top-level one).
 * A request matched in one layer thus costs one object, as before layers.
 */
export interface MatchResult extends LayerMatch {
  layers?: readonly LayerMatch[];
}

/** A policy the matcher could not compile (validation should have refused it); it never matches. */
export interface SkippedPolicy {
  policy_id: string;
  reason: string;
}

/**
 * Ranks are whole numbers in [0, RANK_LIMIT): small integers stay unboxed in V8 (a fractional or larger
 * rank would turn every policy's rank field into a boxed double and slow the scan down). A build
 * spreads them out evenly, so a policy added later fits between two neighbours; when no whole number is
 * left between them, all are spread out again (see Matcher.rankAmong).
 */
const RANK_LIMIT = 2 ** 30;

function rankGap(count: number): number {
  // Room for count ranks plus a gap before the first and after the last.
  return Math.max(1, Math.floor(RANK_LIMIT / (count + 2)));
}

/** What building and changing a matcher has cost, counted (tests bound work by these, not by time). */
export interface MatcherStats {
  /** Policies compiled since this matcher was built, the build included. */
  compiled: number;
  /** Times every rank was renumbered because a new policy found no room between its neighbours. */
  renumbered: number;
}

/**
 * Mutable: `apply` changes one policy in place, touching only that policy's bucket and the global order
 * (no rebuild). That is safe without copying because matching is synchronous — it never runs while
 * `apply` does — and because a CompiledPolicy never changes once indexed except for its `rank` (only
 * read by matching): a changed policy gets a new CompiledPolicy, so whatever a decision in flight holds
 * (the compiled policy, its spec, counter keys and deny-cache entries owned by it) stays as it matched.
 */
export class Matcher {
  private readonly layers: LayerSet;
  private readonly byId: Map<string, CompiledPolicy>;
  /** Every indexed policy, both families, in winner order: ranks strictly increase along it. */
  private readonly order: RankOrder<CompiledPolicy>;
  private readonly skippedById: Map<string, SkippedPolicy>;
  /** Specs and wildcard lists many policies share, kept so that later changes share them too. */
  private readonly common: Sharing;
  readonly stats: MatcherStats;

  private constructor(
    layers: LayerSet,
    byId: Map<string, CompiledPolicy>,
    order: CompiledPolicy[],
    skipped: Map<string, SkippedPolicy>,
    common: Sharing,
  ) {
    this.layers = layers;
    this.byId = byId;
    this.order = new RankOrder(order);
    this.skippedById = skipped;
    this.common = common;
    this.stats = { compiled: order.length + skipped.size, renumbered: 0 };
  }

  /** Policies are already validated; specs and CEL are compiled once, here. Disabled policies are left out. */
  static build(policies: readonly Policy[]): Matcher {
    const skipped = new Map<string, SkippedPolicy>();
    const drafts: Draft[] = [];
    const byId = new Map<string, CompiledPolicy>();
    const common = sharing(SHARING_MAX);
    for (const policy of policies) {
      if (!policy.enabled) continue;
      const d = compile(policy, common);
      if ('reason' in d) {
        skipped.set(policy.policy_id, { policy_id: policy.policy_id, reason: d.reason });
      } else {
        drafts.push(d);
        byId.set(policy.policy_id, d.compiled);
      }
    }
    inWinnerOrder(drafts);
    const gap = rankGap(drafts.length);
    drafts.forEach((d, i) => (d.compiled.rank = (i + 1) * gap));

    // How many policies share each exact (field, value) and (tag, value): each policy is indexed under its rarest one.
    const fieldsShared = new Map<string, Map<string, number>>();
    const tagsShared = new Map<string, Map<string, number>>();
    for (const { exactFields: fields, exactTags: tags } of drafts) {
      for (let i = 0; i < fields.length; i += 2) countPair(fieldsShared, fields[i], fields[i + 1]);
      for (let i = 0; i < tags.length; i += 2) countPair(tagsShared, tags[i], tags[i + 1]);
    }

    const layers = new LayerSetOf<CompiledPolicy>();
    // Check lists are mostly distinct (they hold the policy's own values): shared within the build only.
    const local = sharing();
    for (const d of drafts) {
      const { exactFields: fields, exactTags: tags } = d;
      // With one exact pair there is nothing to choose.
      let slot = fields.length + tags.length === 2 ? 0 : -1;
      if (slot < 0) {
        let fewest = Infinity;
        for (let i = 0; i < fields.length; i += 2) {
          const count = fieldsShared.get(fields[i])!.get(fields[i + 1])!;
          if (count < fewest) [fewest, slot] = [count, i / 2];
        }
        for (let i = 0; i < tags.length; i += 2) {
          const count = tagsShared.get(tags[i])!.get(tags[i + 1])!;
          if (count < fewest) [fewest, slot] = [count, (fields.length + i) / 2];
        }
      }
      // In rank order, so each policy goes at the end of its bucket.
      const layer = layers.obtain(d.compiled.layer);
      layer.size++;
      place(layer.families[d.compiled.family], d, slot, local);
    }
    for (const index of layers.list.flatMap((layer) => Object.values(layer.families))) {
      index.refreshFields();
      // A bucket that grew by inserts has room for more than it holds.
      for (const byValue of [...index.byField.values(), ...index.byTag.values()]) {
        for (const [value, bucket] of byValue) if (bucket.length > 1) byValue.set(value, bucket.slice());
      }
    }
    return new Matcher(layers, byId, drafts.map((d) => d.compiled), skipped, common);
  }

  /** Number of policies that can match (enabled and compiled), both families. */
  get size(): number {
    return this.byId.size;
  }

  /** Policies left out because they could not be compiled. */
  get skipped(): readonly SkippedPolicy[] {
    return [...this.skippedById.values()];
  }

  /** The compiled policy with this id, when it is enabled and compiled. */
  get(policyId: string): CompiledPolicy | undefined {
    return this.byId.get(policyId);
  }

  /**
   * Brings one policy up to date in place: `policy` is its current state, undefined once deleted. Costs
   * one compile, a binary search and an array splice in the global order and in one bucket — never a
   * rebuild. Returns why the policy cannot be compiled, when it cannot (it then never matches).
   */
  apply(policyId: string, policy: Policy | undefined): SkippedPolicy | undefined {
    const before = this.byId.get(policyId);
    if (before !== undefined && before.policy === policy) return undefined;
    if (before !== undefined) this.remove(before);
    this.skippedById.delete(policyId);
    if (policy === undefined || !policy.enabled) return undefined;
    this.stats.compiled++;
    const d = compile(policy, this.common);
    if ('reason' in d) {
      const skipped = { policy_id: policyId, reason: d.reason };
      this.skippedById.set(policyId, skipped);
      return skipped;
    }
    this.insert(d);
    return undefined;
  }

  /**
   * Brings the matcher to exactly `policies` (a whole set, such as a store's reload) by applying only the
   * policies whose object differs from the one it holds, plus the deletions; stores keep the object of a
   * policy that did not change, so a reload that changed little stays incremental. Returns false, having
   * changed nothing, when more than `maxChanges` policies differ: a build is then cheaper.
   */
  applyAll(policies: readonly Policy[], maxChanges: number, onSkipped?: (skipped: SkippedPolicy) => void): boolean {
    const changes: Policy[] = [];
    const present = new Set<string>();
    for (const policy of policies) {
      present.add(policy.policy_id);
      const held = this.byId.get(policy.policy_id);
      if (held !== undefined ? held.policy === policy : !policy.enabled && !this.skippedById.has(policy.policy_id)) continue;
      if (changes.length >= maxChanges) return false;
      changes.push(policy);
    }
    const gone: string[] = [];
    for (const id of this.byId.keys()) if (!present.has(id)) gone.push(id);
    for (const id of this.skippedById.keys()) if (!present.has(id)) gone.push(id);
    if (changes.length + gone.length > maxChanges) return false;
    for (const id of gone) this.apply(id, undefined);
    for (const policy of changes) {
      const skipped = this.apply(policy.policy_id, policy);
      if (skipped) onSkipped?.(skipped);
    }
    return true;
  }

  private insert(d: Draft): void {
    const c = d.compiled;
    this.rankAmong(c);
    this.byId.set(c.policy.policy_id, c);
    const layer = this.layers.obtain(c.layer);
    layer.size++;
    const index = layer.families[c.family];
    // Indexed under the exact pair whose bucket is smallest now (a build picks the rarest pair; both
    // only affect how long a scan is, never what matches).
    const { exactFields: fields, exactTags: tags } = d;
    let slot = -1;
    let fewest = Infinity;
    for (let i = 0; i < fields.length; i += 2) {
      const size = index.byField.get(fields[i] as ScopeField)?.get(fields[i + 1])?.length ?? 0;
      if (size < fewest) [fewest, slot] = [size, i / 2];
    }
    for (let i = 0; i < tags.length; i += 2) {
      const size = index.byTag.get(tags[i])?.get(tags[i + 1])?.length ?? 0;
      if (size < fewest) [fewest, slot] = [size, (fields.length + i) / 2];
    }
    const fieldsBefore = index.byField.size;
    place(index, d, slot, sharing());
    if (index.byField.size !== fieldsBefore) index.refreshFields();
  }

  /** Gives `c` a rank between its neighbours in the winner order, spreading all out when there is no room. */
  private rankAmong(c: CompiledPolicy): void {
    const { previous, next } = this.order.insert(c, precedes);
    const before = previous ? previous.rank : -1;
    const after = next ? next.rank : RANK_LIMIT;
    if (after - before >= 2) {
      // At an end, one gap away from the neighbour (more appends fit after it); inside, halfway.
      const gap = rankGap(this.order.size);
      if (next === undefined) c.rank = Math.min(before + gap, before + Math.floor((after - before) / 2));
      else if (previous === undefined) c.rank = Math.max(after - gap, before + Math.ceil((after - before) / 2));
      else c.rank = before + Math.floor((after - before) / 2);
      return;
    }
    // No whole number left between them: after ~log2(gap) inserts into the same gap; O(n) plain stores.
    const gap = rankGap(this.order.size);
    this.order.forEach((p, i) => (p.rank = (i + 1) * gap));
    this.stats.renumbered++;
  }

  private remove(c: CompiledPolicy): void {
    this.byId.delete(c.policy.policy_id);
    this.order.remove(c, rankOf);
    const layer = this.layers.get(c.layer)!;
    this.layers.shrink(layer);
    const index = layer.families[c.family];
    // It sits in the bucket of one of its exact pairs, or in the fallback list.
    const scope = c.policy.scope ?? {};
    for (const field of SCOPE_FIELDS) {
      const scoped = scope[field];
      if (!isExact(scoped)) continue;
      // The value it was indexed under (compile's form).
      const value = field === 'method' ? canonicalMethod(scoped) : scoped;
      const byValue = index.byField.get(field);
      const bucket = byValue?.get(value);
      if (bucket === undefined || !removeByRank(bucket, c)) continue;
      if (bucket.length === 0) byValue!.delete(value);
      if (byValue!.size === 0) {
        index.byField.delete(field);
        index.refreshFields();
      }
      return;
    }
    const tags = scope.tags;
    if (tags) {
      for (const tag of Object.keys(tags)) {
        const value = tags[tag];
        if (!isExact(value)) continue;
        const byValue = index.byTag.get(tag);
        const bucket = byValue?.get(value);
        if (bucket === undefined || !removeByRank(bucket, c)) continue;
        if (bucket.length === 0) byValue!.delete(value);
        if (byValue!.size === 0) index.byTag.delete(tag);
        return;
      }
    }
    removeByRank(index.fallback, c);
  }

  /** The names of the layers that hold a policy, in byte order. */
  get layerNames(): string[] {
    return this.layers.list.map((layer) => layer.name);
  }

  /**
   * Per layer, the best enforce-mode and the best shadow-mode candidate for this request (see
   * MatchResult: the first layer's at the top, `layers` only with two or more). Puts `ctx.method` in
   * the form scopes are compiled to (model/http-method.ts) first, so counter identities, match_expr and
   * everything after the match see the one spelling.
   */
  match(ctx: RequestContext, family: PolicyFamily, nowMs: number): MatchResult {
    const method = ctx.method;
    if (method !== undefined) {
      const canonical = canonicalMethod(method);
      if (canonical !== method) ctx.method = canonical;
    }
    // One scratch state, reset per layer: matching is synchronous and never re-entered.
    const state = scratch;
    state.regexBudget.reset(); // one regex budget for all match_expr evaluations of this decision
    const layers = this.layers.list;
    let first: MatchResult | undefined;
    let all: LayerMatch[] | undefined;
    for (let i = 0; i < layers.length; i++) {
      const found = matchLayer(layers[i], family, ctx, nowMs, state);
      if (found === undefined) continue;
      if (first === undefined) first = found;
      else (all ??= [first]).push(found);
    }
    if (first === undefined) return { layer: DEFAULT_LAYER };
    if (all !== undefined) first.layers = all;
    return first;
  }
}

/** One layer's winners (undefined when it has none), scanned into `state`. */
function matchLayer(layer: LayerIndex, family: PolicyFamily, ctx: RequestContext, nowMs: number, state: ScanState): MatchResult | undefined {
  const index = layer.families[family];
  state.enforce = state.shadow = state.enforceIdentity = state.shadowIdentity = undefined;
  state.enforceRank = state.shadowRank = Infinity;
  const fields = index.fields;
  const fieldMaps = index.fieldMaps;
  for (let i = 0; i < fields.length; i++) {
    const value = ctx[fields[i]];
    if (value === undefined || value === '') continue;
    const bucket = fieldMaps[i].get(value);
    if (bucket !== undefined) scan(bucket, ctx, nowMs, state);
  }
  if (index.byTag.size > 0 && ctx.tags) scanTags(index, ctx, ctx.tags, nowMs, state);
  if (index.fallback.length > 0) scan(index.fallback, ctx, nowMs, state);
  if (state.enforce === undefined && state.shadow === undefined) return undefined;
  const result: MatchResult = { layer: layer.name };
  if (state.enforce) result.enforce = { compiled: state.enforce, identity: state.enforceIdentity ?? identityOf(state.enforce, ctx) };
  if (state.shadow) result.shadow = { compiled: state.shadow, identity: state.shadowIdentity ?? identityOf(state.shadow, ctx) };
  state.enforce = state.shadow = state.enforceIdentity = state.shadowIdentity = undefined; // hold no references
  return result;
}

/** The tag buckets of the request's tags: visits whichever side is smaller, the request's tags or the indexed tag keys. */
function scanTags(index: FamilyIndex, ctx: RequestContext, tags: Record<string, string>, nowMs: number, state: ScanState): void {
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
    if (c.rolloutPercent < 100) {
      identity = identityOf(c, ctx);
      if (outsideRollout(c, identity)) continue;
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

/**
 * Validity window, scope and match_expr (everything but rollout). `report` is explain's (report mode,
 * matching/explain-report.ts; the decision path never passes one): it is told what refused the request.
 * The pair a policy is indexed under is not checked here: the bucket it was found in guarantees it.
 */
export function scopeMatches(c: CompiledPolicy, ctx: RequestContext, nowMs: number, regexBudget: RegexBudget, report?: MissReport): boolean {
  if (c.validFromMs !== 0 && nowMs < c.validFromMs) return refused(report, 'not_valid_now');
  if (c.validToMs !== 0 && nowMs >= c.validToMs) return refused(report, 'not_valid_now');
  const fields = c.checkFields;
  for (let i = 0; i < fields.length; i += 2) if (ctx[fields[i] as ScopeField] !== fields[i + 1]) return refused(report, 'scope:', fields[i]);
  const wildFields = c.wildFields;
  for (let i = 0; i < wildFields.length; i++) {
    const value = ctx[wildFields[i]];
    if (typeof value !== 'string' || value === '') return refused(report, 'scope:', wildFields[i]);
  }
  const checkTags = c.checkTags;
  const wildTags = c.wildTags;
  if (checkTags.length > 0 || wildTags.length > 0) {
    const tags = ctx.tags;
    if (!tags) return refused(report, 'scope:tags.', checkTags.length > 0 ? checkTags[0] : wildTags[0]);
    for (let i = 0; i < checkTags.length; i += 2) {
      if (!Object.prototype.hasOwnProperty.call(tags, checkTags[i]) || tags[checkTags[i]] !== checkTags[i + 1]) return refused(report, 'scope:tags.', checkTags[i]);
    }
    for (let i = 0; i < wildTags.length; i++) {
      const value = tagValue(tags, wildTags[i]);
      if (value === undefined || value === '') return refused(report, 'scope:tags.', wildTags[i]);
    }
  }
  if (c.matchExpr !== undefined && !c.matchExpr(ctx, regexBudget)) return refused(report, 'match_expr');
  return true;
}

/** What refused a request in report mode: `scope:<field>`, `scope:tags.<key>`, `not_valid_now` or `match_expr`. */
export interface MissReport {
  why: string;
}

function refused(report: MissReport | undefined, why: string, name = ''): false {
  if (report !== undefined) report.why = why + name;
  return false;
}

/** Outside the policy's rollout share for this counter identity (a rollout of 0 takes none). */
export function outsideRollout(c: CompiledPolicy, identity: readonly string[]): boolean {
  return c.rolloutPercent <= 0 || rolloutBucket(c.policy.policy_id, identity) >= c.rolloutPercent;
}

function tagValue(tags: Record<string, string> | undefined, key: string): string | undefined {
  if (!tags || !Object.prototype.hasOwnProperty.call(tags, key)) return undefined;
  const v = tags[key];
  return typeof v === 'string' ? v : undefined;
}

export function identityOf(c: CompiledPolicy, ctx: RequestContext): string[] {
  const wild = c.wildcards;
  if (wild.length === 0) return [];
  const identity = new Array<string>(wild.length * 2);
  for (let i = 0; i < wild.length; i++) {
    const w = wild[i];
    identity[2 * i] = w.name;
    identity[2 * i + 1] = wildcardValue(w, ctx);
  }
  return identity;
}

/**
 * What one `*` part of a policy counts by for this request: the field's or tag's value, or for
 * `source_ip` its client network. The one place a counter identity's values are read, so counter keys,
 * rollout buckets and the deny cache (and every transport) see the same identity.
 */
export function wildcardValue(w: Wildcard, ctx: RequestContext): string {
  const value = (w.field !== undefined ? ctx[w.field] : tagValue(ctx.tags, w.tag!)) ?? '';
  return w.network === undefined ? value : w.network.identityOf(value);
}

/** Each scope field's position in SCOPE_FIELDS (a bit in a 32-bit mask: there are fewer than 32). */
const FIELD_POSITION = new Map<string, number>(SCOPE_FIELDS.map((field, at) => [field, at]));
const SOURCE_IP = 1 << FIELD_POSITION.get('source_ip')!;
const METHOD = FIELD_POSITION.get('method')!;

/** compile's scratch: the scope's value of each field present, by position (compiling is synchronous). */
const fieldValues: string[] = SCOPE_FIELDS.map(() => '');

/** The `*` parts of a policy, in identity order (by name), and the field and tag names among them. */
interface WildParts {
  wildcards: readonly Wildcard[];
  fields: ScopeField[];
  tags: string[];
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

function compile(policy: Policy, shared: Sharing): Draft | { reason: string } {
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
  // The scope's own fields, by position in SCOPE_FIELDS (the order checks and index slots follow),
  // without asking the scope for each of the twenty field names.
  let present = 0;
  for (const key in scope) {
    const at = FIELD_POSITION.get(key);
    if (at === undefined) continue;
    const value = scope[key as ScopeField];
    if (value === undefined || value === '') continue;
    present |= 1 << at;
    fieldValues[at] = at === METHOD ? canonicalMethod(value) : value;
  }
  const exactFields: string[] = [];
  let wildMask = 0;
  let specificity = matchExpr ? 1 : 0;
  for (let bits = present; bits !== 0; bits &= bits - 1) {
    const at = 31 - Math.clz32(bits & -bits);
    if (fieldValues[at] === '*') {
      wildMask |= 1 << at;
      specificity += 1;
    } else {
      exactFields.push(SCOPE_FIELDS[at], fieldValues[at]);
      specificity += 2;
    }
  }
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
  };
  return { compiled, exactFields, exactTags };
}

/**
 * Sorts drafts into winner order in linear time for the usual input: policies come from a store's list,
 * sorted by policy_id, and take few distinct (specificity, priority) values, so grouping by those keeps
 * each group in policy_id order already (a group that is not is sorted). A comparison sort of every
 * draft would chase pointers to two policies per comparison, n log n times.
 */
function inWinnerOrder(drafts: Draft[]): void {
  const groups = new Map<number, Map<number, Draft[]>>(); // specificity → priority → drafts, input order
  for (const d of drafts) {
    let byPriority = groups.get(d.compiled.specificity);
    if (!byPriority) groups.set(d.compiled.specificity, (byPriority = new Map()));
    const group = byPriority.get(d.compiled.policy.priority);
    if (group) group.push(d);
    else byPriority.set(d.compiled.policy.priority, [d]);
  }
  const descending = (a: number, b: number) => b - a;
  let i = 0;
  for (const specificity of [...groups.keys()].sort(descending)) {
    const byPriority = groups.get(specificity)!;
    for (const priority of [...byPriority.keys()].sort(descending)) {
      const group = byPriority.get(priority)!;
      for (let k = 1; k < group.length; k++) {
        if (group[k - 1].compiled.policy.policy_id > group[k].compiled.policy.policy_id) {
          group.sort((a, b) => compareRank(a.compiled, b.compiled));
          break;
        }
      }
      for (const d of group) drafts[i++] = d;
    }
  }
}

/** Winner order: highest specificity, then highest priority, then smallest policy_id (plain compare). */
function compareRank(a: CompiledPolicy, b: CompiledPolicy): number {
  if (a.specificity !== b.specificity) return b.specificity - a.specificity;
  if (a.policy.priority !== b.policy.priority) return b.policy.priority > a.policy.priority ? 1 : -1;
  const x = a.policy.policy_id;
  const y = b.policy.policy_id;
  return x < y ? -1 : x > y ? 1 : 0;
}

/** One more policy with the exact pair (key, value). */
function countPair(counts: Map<string, Map<string, number>>, key: string, value: string): void {
  let byValue = counts.get(key);
  if (!byValue) counts.set(key, (byValue = new Map()));
  byValue.set(value, (byValue.get(value) ?? 0) + 1);
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
  /** The parts of the `*` plain fields in `mask` (no source_ip, no tags), made once by `make`. */
  fieldWildcards(mask: number, make: () => WildParts): WildParts;
}

const SHARING_MAX = 10_000;

/** `max`: most entries of each kind held before they are forgotten (only memory is at stake). */
function sharing(max = Infinity): Sharing {
  const lists = new Map<string, unknown[]>();
  const specs = new Map<string, CounterSpec>();
  const byMask = new Map<number, WildParts>();
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
    // A matcher keeps its common sharing for later changes: bounded.
    if (lists.size >= max) lists.clear();
    lists.set(key, kept);
    return kept;
  };
  return {
    strings: (parts) => list('s', parts, (part) => part),
    // A wildcard's name determines it (`tags.<key>` for a tag, the field name otherwise), but for the
    // prefix lengths of a source_ip one.
    wildcards: (wildcards) => list('w', wildcards, (w) => (w.network ? `${w.name}/${w.network.v4}/${w.network.v6}` : w.name)),
    spec: (spec) => {
      // Specs are flat objects of strings and numbers, built in a fixed key order per type.
      const key = JSON.stringify(spec);
      const known = specs.get(key);
      if (known) return known;
      if (specs.size >= max) specs.clear();
      specs.set(key, spec);
      return spec;
    },
    fieldWildcards: (mask, make) => {
      let parts = byMask.get(mask);
      if (parts === undefined) {
        parts = make();
        if (byMask.size >= max) byMask.clear();
        byMask.set(mask, parts);
      }
      return parts;
    },
  };
}

/**
 * Counter specs of frozen algorithms: stored policies with equal algorithms share one frozen object
 * (policy/stored-policy.ts), so a build derives each distinct algorithm's spec once.
 */
const specsByAlgorithm = new WeakMap<AlgorithmConfig, CounterSpec>();

function specOf(algorithm: AlgorithmConfig, shared: Sharing): CounterSpec {
  const known = specsByAlgorithm.get(algorithm);
  if (known !== undefined) return known;
  const spec = shared.spec(counterSpecOf(algorithm));
  if (Object.isFrozen(algorithm)) specsByAlgorithm.set(algorithm, spec);
  return spec;
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

/**
 * Indexes a policy under its exact pair number `slot` (fields first, then tags; -1 = none): sets its
 * check lists (the other pairs) and puts it in that pair's bucket, or in the fallback list.
 */
function place(index: FamilyIndex, d: Draft, slot: number, checks: Sharing): void {
  const { compiled: c, exactFields, exactTags } = d;
  const nFields = exactFields.length / 2;
  c.checkFields = checks.strings(withoutPair(exactFields, slot));
  c.checkTags = checks.strings(withoutPair(exactTags, slot - nFields));
  if (slot < 0) insertByRank(index.fallback, c);
  else if (slot < nFields) addToBucket(index.byField, exactFields[2 * slot] as ScopeField, exactFields[2 * slot + 1], c);
  else addToBucket(index.byTag, exactTags[2 * (slot - nFields)], exactTags[2 * (slot - nFields) + 1], c);
}

/** A flat [name, value, ...] list without pair `k` (the list itself when it has no such pair). */
function withoutPair(pairs: string[], k: number): string[] {
  if (k < 0 || 2 * k >= pairs.length) return pairs;
  return [...pairs.slice(0, 2 * k), ...pairs.slice(2 * k + 2)];
}

/** Does `c` come before `other` in winner order (or tie with it: never, ids are unique)? */
function precedes(c: CompiledPolicy, other: CompiledPolicy): boolean {
  return compareRank(other, c) >= 0;
}

function rankOf(c: CompiledPolicy): number {
  return c.rank;
}

/** Position of the first policy in `list` (sorted by rank) whose rank is not below `rank`. */
function lowerBound(list: readonly CompiledPolicy[], rank: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid].rank < rank) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function insertByRank(list: CompiledPolicy[], c: CompiledPolicy): void {
  list.splice(lowerBound(list, c.rank), 0, c);
}

/** Removes `c` from `list` (sorted by rank); false when it is not there. */
function removeByRank(list: CompiledPolicy[], c: CompiledPolicy): boolean {
  const at = lowerBound(list, c.rank);
  if (list[at] !== c) return false;
  list.splice(at, 1);
  return true;
}

/** An exact-valued scope entry (not absent, empty or `*`). */
export function isExact(value: unknown): value is string {
  return typeof value === 'string' && value !== '' && value !== '*';
}

/** Puts `c` in the bucket of (key, value) by rank; a new bucket is made holding just it (at its exact size: most hold one). */
function addToBucket<K>(index: Map<K, Map<string, CompiledPolicy[]>>, key: K, value: string, c: CompiledPolicy): void {
  let byValue = index.get(key);
  if (!byValue) index.set(key, (byValue = new Map()));
  const bucket = byValue.get(value);
  if (bucket) insertByRank(bucket, c);
  else byValue.set(value, [c]);
}

/**
 * The rollout bucket (0..99) of a counter identity under a policy: the stable hash of
 * `lengthPrefixed([policyId, ...identity])` mod 100. A request is inside the rollout when
 * `rolloutBucket(...) < rollout_percent`, the same on every node and across releases.
 */
export function rolloutBucket(policyId: string, identity: readonly string[]): number {
  return stableHash32(lengthPrefixed([policyId, ...identity])) % 100;
}
