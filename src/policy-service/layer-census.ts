import { DEFAULT_LAYER } from '../matching/layer-index.js';
import { MAX_LAYERS } from '../schema/policy.js';
import type { FieldError, Policy } from '../policy/types.js';
import type { PolicyChangeEvent, PolicyStore } from '../policy-store/policy-store.js';

/**
 * Which layers a policy set holds, kept up to date with the store's changes so that a write's check
 * (at most MAX_LAYERS layers) costs no walk over 100,000 policies. Only policies outside the default
 * layer are remembered one by one; whether the default layer is occupied is read from the store, and
 * only when the named layers alone come within one of the limit.
 */
export class LayerCensus {
  /** policy_id → layer, for policies outside the default layer. */
  private readonly named = new Map<string, string>();
  /** layer → how many policies it holds, the default layer left out. */
  private readonly counts = new Map<string, number>();

  /** After a full reload: counted again when next asked (a reload already reads the whole set once). */
  private stale = false;

  /** `policies`: the store's current set (the caller's own list, so start-up reads it once). */
  constructor(
    private readonly store: PolicyStore,
    policies: readonly Policy[],
  ) {
    this.recount(policies);
  }

  /** Follows one store change (the store's snapshot already holds it). */
  changed(event: PolicyChangeEvent): void {
    if (event.change === 'reloaded') {
      this.stale = true;
      return;
    }
    if (this.stale) return;
    this.forget(event.policy_id);
    const policy = event.change === 'deleted' ? undefined : this.store.get(event.policy_id);
    if (policy !== undefined) this.remember(policy);
  }

  /** A problem naming `layer` when writing `policyId` in `layer` would make the set hold more than MAX_LAYERS layers. */
  problem(policyId: string, layer: string | undefined): FieldError | undefined {
    if (this.stale) this.recount(this.store.list());
    const wanted = layer ?? DEFAULT_LAYER;
    const own = this.named.get(policyId);
    const others = new Set<string>();
    for (const [name, count] of this.counts) if (count > (name === own ? 1 : 0)) others.add(name);
    // With the default layer and the wanted one added there is room: the common case, no walk.
    if (others.has(wanted) || others.size + 2 <= MAX_LAYERS) return undefined;
    if (this.store.list().some((p) => p.policy_id !== policyId && (p.layer ?? DEFAULT_LAYER) === DEFAULT_LAYER)) others.add(DEFAULT_LAYER);
    if (others.has(wanted) || others.size < MAX_LAYERS) return undefined;
    return {
      field: 'layer',
      message: `would be layer number ${others.size + 1}: a policy set holds at most ${MAX_LAYERS} layers (${[...others].sort().join(', ')}); use one of them`,
    };
  }

  private recount(all: readonly Policy[]): void {
    this.stale = false;
    this.named.clear();
    this.counts.clear();
    for (const policy of all) this.remember(policy);
  }

  private remember(policy: Policy): void {
    const layer = policy.layer;
    if (layer === undefined || layer === DEFAULT_LAYER) return;
    this.named.set(policy.policy_id, layer);
    this.counts.set(layer, (this.counts.get(layer) ?? 0) + 1);
  }

  private forget(policyId: string): void {
    const layer = this.named.get(policyId);
    if (layer === undefined) return;
    this.named.delete(policyId);
    const left = this.counts.get(layer)! - 1;
    if (left === 0) this.counts.delete(layer);
    else this.counts.set(layer, left);
  }
}
