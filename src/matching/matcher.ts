import { canonicalMethod } from '../model/http-method.js';
import type { RequestContext } from '../model/request-context.js';
import type { Policy } from '../policy/types.js';
import { DEFAULT_LAYER, type PolicyFamily } from './layer-index.js';
import type { CompiledPolicy, LayerMatch, MatchResult, SkippedPolicy } from './compiled-policy.js';
import { compile, type Draft } from './compile.js';
import { sharing, SHARING_MAX, type Sharing } from './sharing.js';
import { WinnerOrder } from './winner-order.js';
import { PolicyIndex } from './policy-index.js';
import { matchLayer, scanState } from './scan.js';

export { DEFAULT_LAYER } from './layer-index.js';
export type { CompiledPolicy, LayerMatch, MatchResult, PolicyFamily, PolicyMatch, SkippedPolicy, Wildcard } from './compiled-policy.js';
export { identityOf, outsideRollout, rolloutBucket, wildcardValue } from './scan.js';

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
 *
 * This file ties the jobs together: compile.ts (a policy into its compiled form), sharing.ts (shared
 * objects and caches), policy-index.ts (buckets), winner-order.ts (ranks), scan.ts (matching a request).
 */

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
  private readonly index: PolicyIndex;
  private readonly byId: Map<string, CompiledPolicy>;
  private readonly order: WinnerOrder;
  private readonly skippedById: Map<string, SkippedPolicy>;
  /** Specs and wildcard lists many policies share, kept so that later changes share them too. */
  private readonly common: Sharing;
  readonly stats: MatcherStats;
  private readonly scratch = scanState();

  private constructor(
    index: PolicyIndex,
    byId: Map<string, CompiledPolicy>,
    order: WinnerOrder,
    skipped: Map<string, SkippedPolicy>,
    common: Sharing,
  ) {
    this.index = index;
    this.byId = byId;
    this.order = order;
    this.skippedById = skipped;
    this.common = common;
    this.stats = { compiled: order.size + skipped.size, renumbered: 0 };
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
    const order = new WinnerOrder(drafts);
    return new Matcher(PolicyIndex.of(drafts), byId, order, skipped, common);
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
    if (this.order.insert(c)) this.stats.renumbered++;
    this.byId.set(c.policy.policy_id, c);
    this.index.insert(d);
  }

  private remove(c: CompiledPolicy): void {
    this.byId.delete(c.policy.policy_id);
    this.order.remove(c);
    this.index.remove(c);
  }

  /** The names of the layers that hold a policy, in byte order. */
  get layerNames(): string[] {
    return this.index.layers.list.map((layer) => layer.name);
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
    // This matcher's scratch, reset per layer: matching is synchronous and never re-entered.
    const state = this.scratch;
    state.regexBudget.reset(); // one regex budget for all match_expr evaluations of this decision
    const layers = this.index.layers.list;
    // One layer, the common set: its winners are the answer, with no loop (BENCHMARKS, "Fifth round").
    if (layers.length === 1) return matchLayer(layers[0], family, ctx, nowMs, state) ?? { layer: DEFAULT_LAYER };
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
