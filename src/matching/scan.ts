import { lengthPrefixed } from '../counters/keys.js';
import type { RequestContext, ScopeField } from '../model/request-context.js';
import { scopeFieldOf } from '../model/scope-field-of.js';
import { RegexBudget } from '../policy/match-regex.js';
import { stableHash32 } from '../util/hash.js';
import type { CompiledPolicy, MatchResult, Wildcard } from './compiled-policy.js';
import type { FamilyIndex as FamilyIndexOf, LayerIndex as LayerIndexOf, PolicyFamily } from './layer-index.js';

/** Matching a request: the scan of its buckets and the checks one policy runs (validity, scope, match_expr, rollout). */

type FamilyIndex = FamilyIndexOf<CompiledPolicy>;
type LayerIndex = LayerIndexOf<CompiledPolicy>;

/** One layer's winners (undefined when it has none), scanned into `state`. */
export function matchLayer(layer: LayerIndex, family: PolicyFamily, ctx: RequestContext, nowMs: number, state: ScanState): MatchResult | undefined {
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
export function scanTags(index: FamilyIndex, ctx: RequestContext, tags: Record<string, string>, nowMs: number, state: ScanState): void {
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

export interface ScanState {
  enforce: CompiledPolicy | undefined;
  shadow: CompiledPolicy | undefined;
  enforceRank: number;
  shadowRank: number;
  enforceIdentity: string[] | undefined;
  shadowIdentity: string[] | undefined;
  regexBudget: RegexBudget;
}

/** A matcher's scratch for its scans (one per matcher: matching is synchronous and never re-entered). */
export function scanState(): ScanState {
  return {
    enforce: undefined,
    shadow: undefined,
    enforceRank: Infinity,
    shadowRank: Infinity,
    enforceIdentity: undefined,
    shadowIdentity: undefined,
    regexBudget: new RegexBudget(),
  };
}

export function scan(bucket: readonly CompiledPolicy[], ctx: RequestContext, nowMs: number, state: ScanState): void {
  for (let i = 0; i < bucket.length; i++) {
    const c = bucket[i];
    // Sorted by rank: once this one cannot beat either best, nothing after it can.
    if (c.rank >= state.enforceRank && c.rank >= state.shadowRank) return;
    if (c.enforce ? c.rank >= state.enforceRank : c.rank >= state.shadowRank) continue;
    if (scopeMiss(c, ctx, nowMs, state.regexBudget) !== COVERS) continue;
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
 * Validity window, scope and match_expr (everything but rollout): COVERS, or what refused the request as
 * a number (a miss kind, and for a field or tag its index: `kind + MISS_KINDS * index`), which explain
 * puts in words (missWhy). A number, not words: this runs for every candidate of every decision, and
 * small enough for V8 to inline it into the scan. The pair a policy is indexed under is not checked
 * here: the bucket it was found in guarantees it.
 */
export function scopeMiss(c: CompiledPolicy, ctx: RequestContext, nowMs: number, regexBudget: RegexBudget): number {
  if (c.validFromMs !== 0 && nowMs < c.validFromMs) return NOT_VALID_NOW;
  if (c.validToMs !== 0 && nowMs >= c.validToMs) return NOT_VALID_NOW;
  const fields = c.checkFields;
  for (let i = 0; i < fields.length; i += 2) if (scopeFieldOf(ctx, fields[i] as ScopeField) !== fields[i + 1]) return FIELD + MISS_KINDS * i;
  const wildFields = c.wildFields;
  for (let i = 0; i < wildFields.length; i++) {
    const value = scopeFieldOf(ctx, wildFields[i]);
    if (typeof value !== 'string' || value === '') return WILD_FIELD + MISS_KINDS * i;
  }
  const checkTags = c.checkTags;
  const wildTags = c.wildTags;
  if (checkTags.length > 0 || wildTags.length > 0) {
    const tags = ctx.tags;
    if (!tags) return NO_TAGS;
    for (let i = 0; i < checkTags.length; i += 2) {
      if (!Object.prototype.hasOwnProperty.call(tags, checkTags[i]) || tags[checkTags[i]] !== checkTags[i + 1]) return TAG + MISS_KINDS * i;
    }
    for (let i = 0; i < wildTags.length; i++) {
      const value = tagValue(tags, wildTags[i]);
      if (value === undefined || value === '') return WILD_TAG + MISS_KINDS * i;
    }
  }
  if (c.matchExpr !== undefined && !c.matchExpr(ctx, regexBudget)) return MATCH_EXPR;
  return COVERS;
}

/** scopeMiss's answer when the policy covers the request. */
export const COVERS = -1;
// scopeMiss's kinds of miss.
const NOT_VALID_NOW = 0;
const FIELD = 1;
const WILD_FIELD = 2;
const NO_TAGS = 3;
const TAG = 4;
const WILD_TAG = 5;
const MATCH_EXPR = 6;
const MISS_KINDS = 7;

/** A miss of scopeMiss in explain's words: `not_valid_now`, `scope:<field>`, `scope:tags.<key>` or `match_expr`. */
export function missWhy(c: CompiledPolicy, miss: number): string {
  const kind = miss % MISS_KINDS;
  const index = (miss - kind) / MISS_KINDS;
  switch (kind) {
    case NOT_VALID_NOW:
      return 'not_valid_now';
    case FIELD:
      return `scope:${c.checkFields[index]}`;
    case WILD_FIELD:
      return `scope:${c.wildFields[index]}`;
    case NO_TAGS:
      return `scope:tags.${c.checkTags.length > 0 ? c.checkTags[0] : c.wildTags[0]}`;
    case TAG:
      return `scope:tags.${c.checkTags[index]}`;
    case WILD_TAG:
      return `scope:tags.${c.wildTags[index]}`;
    default:
      return 'match_expr';
  }
}

/** Outside the policy's rollout share for this counter identity (a rollout of 0 takes none). */
export function outsideRollout(c: CompiledPolicy, identity: readonly string[]): boolean {
  return c.rolloutPercent <= 0 || rolloutBucket(c.policy.policy_id, identity) >= c.rolloutPercent;
}

export function tagValue(tags: Record<string, string> | undefined, key: string): string | undefined {
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

/**
 * The rollout bucket (0..99) of a counter identity under a policy: the stable hash of
 * `lengthPrefixed([policyId, ...identity])` mod 100. A request is inside the rollout when
 * `rolloutBucket(...) < rollout_percent`, the same on every node and across releases.
 */
export function rolloutBucket(policyId: string, identity: readonly string[]): number {
  return stableHash32(lengthPrefixed([policyId, ...identity])) % 100;
}
