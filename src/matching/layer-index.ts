import { SCOPE_FIELDS, type ScopeField } from '../model/request-context.js';

/** Rate policies (check, peek, refund) and concurrency policies (acquire, release) never compete. */
export type PolicyFamily = 'rate' | 'concurrency';

/** The layer of a policy that names none. */
export const DEFAULT_LAYER = 'default';

/** One family's index within one layer. */
/** `P`: the compiled policy (matcher.ts), kept generic so this index needs nothing from the matcher. */
export class FamilyIndex<P> {
  /** field → value → bucket sorted by rank. */
  readonly byField = new Map<ScopeField, Map<string, P[]>>();
  /** Fields that appear in `byField`, in SCOPE_FIELDS order, and their value maps (parallel arrays). */
  fields: ScopeField[] = [];
  fieldMaps: Map<string, P[]>[] = [];
  /** tag key → value → bucket sorted by rank. */
  readonly byTag = new Map<string, Map<string, P[]>>();
  /** Policies with no exact-valued scope field or tag, sorted by rank. */
  readonly fallback: P[] = [];

  refreshFields(): void {
    this.fields = SCOPE_FIELDS.filter((f) => this.byField.has(f));
    this.fieldMaps = this.fields.map((f) => this.byField.get(f)!);
  }
}

/**
 * The policies of one layer, both families. Policies of different layers never compete: each layer
 * has its own index and chooses its own winners.
 */
export class LayerIndex<P> {
  readonly families: Record<PolicyFamily, FamilyIndex<P>> = { rate: new FamilyIndex<P>(), concurrency: new FamilyIndex<P>() };
  /** Policies indexed in this layer (an empty layer is dropped). */
  size = 0;

  constructor(readonly name: string) {}
}

/**
 * The layers of a matcher, in byte order of their names (the order answers list them in). A set with
 * one layer is a list of one: matching loops once, as it did before layers.
 */
export class LayerSet<P> {
  /** In name order; read on every match. */
  list: LayerIndex<P>[] = [];
  private readonly byName = new Map<string, LayerIndex<P>>();

  /** The layer of this name, made (and put in order) when new. */
  obtain(name: string): LayerIndex<P> {
    let layer = this.byName.get(name);
    if (layer === undefined) {
      layer = new LayerIndex<P>(name);
      this.byName.set(name, layer);
      this.list = [...this.byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    }
    return layer;
  }

  get(name: string): LayerIndex<P> | undefined {
    return this.byName.get(name);
  }

  /** One policy fewer in `layer`: the layer goes when it is empty. */
  shrink(layer: LayerIndex<P>): void {
    if (--layer.size > 0) return;
    this.byName.delete(layer.name);
    this.list = this.list.filter((l) => l !== layer);
  }
}
