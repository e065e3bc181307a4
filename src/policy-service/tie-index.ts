import { canonicalMethod } from '../model/http-method.js';
import { SCOPE_FIELDS } from '../model/request-context.js';
import type { Policy } from '../policy/types.js';
import type { PolicyChangeEvent, PolicyStore } from '../policy-store/policy-store.js';

/**
 * The policies a write could tie (policy-ties.ts), found without a walk over the whole set: at 100,000
 * policies even reading each one's priority cost a write tens of milliseconds of event loop. Enabled
 * policies are kept by group (layer, priority, enforcement mode), then by scope shape (which fields and
 * tags are exact, which are `*`, whether a `match_expr` is set), then by their exact values. A rival must
 * share the group and the specificity (the shape's points, docs/matching.md "Specificity"), and hold no
 * exact value that differs from the written policy's; the tie check itself stays policy-ties.ts's.
 */

interface Described {
  group: string;
  shape: string;
  /** Exact fields and tags (`tags.<key>`), sorted; their values in the same order (methods canonical). */
  exactKeys: string[];
  values: string[];
  specificity: number;
}

interface Shape {
  exactKeys: string[];
  specificity: number;
  /** JSON of the exact values → those values and the policies holding them, by id. */
  byValues: Map<string, { values: string[]; members: Map<string, Policy> }>;
}

export class TieIndex {
  /** group → shape key → shape. */
  private readonly groups = new Map<string, Map<string, Shape>>();
  /** policy_id → where it is kept. */
  private readonly placed = new Map<string, { group: string; shape: string; values: string }>();

  constructor(
    private readonly store: PolicyStore,
    policies: readonly Policy[],
  ) {
    for (const policy of policies) this.add(policy);
  }

  /** Follows one store change (the store already holds it). */
  changed(event: PolicyChangeEvent): void {
    if (event.change === 'reloaded') {
      this.groups.clear();
      this.placed.clear();
      for (const policy of this.store.list()) this.add(policy);
      return;
    }
    this.remove(event.policy_id);
    const policy = event.change === 'deleted' ? undefined : this.store.get(event.policy_id);
    if (policy !== undefined) this.add(policy);
  }

  /** The enabled policies other than `policy` that could tie it, in policy_id order. */
  rivals(policy: Policy): Policy[] {
    if (!policy.enabled) return [];
    const d = describe(policy);
    const shapes = this.groups.get(d.group);
    if (shapes === undefined) return [];
    const found: Policy[] = [];
    for (const shape of shapes.values()) {
      if (shape.specificity !== d.specificity) continue;
      // Where the shape's exact keys are exact in `policy` too, the values must be equal.
      const at = shape.exactKeys.map((key) => d.exactKeys.indexOf(key));
      if (at.every((i) => i >= 0)) {
        collect(shape.byValues.get(JSON.stringify(at.map((i) => d.values[i]))), policy, found);
        continue;
      }
      for (const entry of shape.byValues.values()) {
        if (at.every((i, k) => i < 0 || entry.values[k] === d.values[i])) collect(entry, policy, found);
      }
    }
    return found.sort((a, b) => (a.policy_id < b.policy_id ? -1 : a.policy_id > b.policy_id ? 1 : 0));
  }

  private add(policy: Policy): void {
    if (!policy.enabled) return;
    const d = describe(policy);
    let shapes = this.groups.get(d.group);
    if (shapes === undefined) this.groups.set(d.group, (shapes = new Map()));
    let shape = shapes.get(d.shape);
    if (shape === undefined) shapes.set(d.shape, (shape = { exactKeys: d.exactKeys, specificity: d.specificity, byValues: new Map() }));
    const values = JSON.stringify(d.values);
    let entry = shape.byValues.get(values);
    if (entry === undefined) shape.byValues.set(values, (entry = { values: d.values, members: new Map() }));
    entry.members.set(policy.policy_id, policy);
    this.placed.set(policy.policy_id, { group: d.group, shape: d.shape, values });
  }

  private remove(policyId: string): void {
    const where = this.placed.get(policyId);
    if (where === undefined) return;
    this.placed.delete(policyId);
    const shapes = this.groups.get(where.group)!;
    const shape = shapes.get(where.shape)!;
    const entry = shape.byValues.get(where.values)!;
    entry.members.delete(policyId);
    if (entry.members.size > 0) return;
    shape.byValues.delete(where.values);
    if (shape.byValues.size > 0) return;
    shapes.delete(where.shape);
    if (shapes.size === 0) this.groups.delete(where.group);
  }
}

function collect(entry: { members: Map<string, Policy> } | undefined, policy: Policy, found: Policy[]): void {
  if (entry === undefined) return;
  for (const member of entry.members.values()) if (member.policy_id !== policy.policy_id) found.push(member);
}

/** Where a policy is kept: its group, its scope's shape and exact values, and the shape's points. */
function describe(policy: Policy): Described {
  const scope = policy.scope ?? {};
  const exact: [string, string][] = [];
  const wild: string[] = [];
  for (const field of SCOPE_FIELDS) {
    const value = scope[field];
    if (value === undefined || value === '') continue;
    if (value === '*') wild.push(field);
    else exact.push([field, field === 'method' ? canonicalMethod(value) : value]);
  }
  for (const [key, value] of Object.entries(scope.tags ?? {})) {
    if (typeof value !== 'string' || value === '') continue;
    if (value === '*') wild.push(`tags.${key}`);
    else exact.push([`tags.${key}`, value]);
  }
  exact.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  wild.sort();
  const expr = policy.metadata?.match_expr !== undefined;
  const exactKeys = exact.map(([key]) => key);
  return {
    group: JSON.stringify([policy.layer ?? 'default', policy.priority, policy.enforcement_mode]),
    shape: JSON.stringify([exactKeys, wild, expr]),
    exactKeys,
    values: exact.map(([, value]) => value),
    specificity: 2 * exact.length + wild.length + (expr ? 1 : 0),
  };
}
