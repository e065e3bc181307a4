import type { StoredPolicy } from '@rl/client';
import type { PolicyInput } from '../policy/validate.js';
import { diffFields, withoutServerFields, type FieldChange } from '../policy/policy-changes.js';
import type { DesiredPolicy } from './policy-files.js';

/**
 * The plan of `rl apply` / `rl diff`: what turns the server's policies into the files' policies.
 * Desired and current are compared in the same normalised shape (the validator's output against the
 * stored policy minus its server-set fields), field by field, so a file that merely omits a default
 * is "unchanged", and an update lists exactly the fields that differ.
 *
 * Each update and delete remembers the `version` it was planned against: applying sends it as
 * If-Match, so a change someone made after the plan was read is a 409, never silently overwritten.
 */

export type PlannedAction =
  | { action: 'create'; policy_id: string; source: string; policy: PolicyInput }
  | { action: 'update'; policy_id: string; source: string; version: number; changes: FieldChange[]; policy: PolicyInput }
  | { action: 'unchanged'; policy_id: string; source: string; version: number }
  | { action: 'delete'; policy_id: string; version: number }
  /** On the server, not in the files, and --prune not given: left alone. */
  | { action: 'keep'; policy_id: string; version: number };

export interface Plan {
  /** `rl-plan/v1`: marks a saved plan file. */
  kind: typeof PLAN_KIND;
  url: string;
  prune: boolean;
  actions: PlannedAction[];
  summary: { create: number; update: number; delete: number; unchanged: number; keep: number };
}

export const PLAN_KIND = 'rl-plan/v1';

export function buildPlan(url: string, desired: DesiredPolicy[], current: StoredPolicy[], prune: boolean): Plan {
  const byId = new Map(current.map((p) => [p.policy_id, p]));
  const wanted = new Set<string>();
  const actions: PlannedAction[] = [];
  for (const d of [...desired].sort((a, b) => compareIds(a.policy.policy_id, b.policy.policy_id))) {
    const id = d.policy.policy_id;
    wanted.add(id);
    const existing = byId.get(id);
    if (existing === undefined) {
      actions.push({ action: 'create', policy_id: id, source: d.source, policy: d.policy });
      continue;
    }
    const changes = diffFields(withoutServerFields(existing), d.policy as unknown as Record<string, unknown>);
    actions.push(
      changes.length === 0
        ? { action: 'unchanged', policy_id: id, source: d.source, version: existing.version }
        : { action: 'update', policy_id: id, source: d.source, version: existing.version, changes, policy: d.policy },
    );
  }
  for (const p of [...current].sort((a, b) => compareIds(a.policy_id, b.policy_id))) {
    if (wanted.has(p.policy_id)) continue;
    actions.push({ action: prune ? 'delete' : 'keep', policy_id: p.policy_id, version: p.version });
  }
  const count = (kind: PlannedAction['action']): number => actions.filter((a) => a.action === kind).length;
  return {
    kind: PLAN_KIND,
    url,
    prune,
    actions,
    summary: { create: count('create'), update: count('update'), delete: count('delete'), unchanged: count('unchanged'), keep: count('keep') },
  };
}

/** Changes the plan would make (creates, updates, deletes). */
export function pendingChanges(plan: Plan): number {
  return plan.summary.create + plan.summary.update + plan.summary.delete;
}

/** The server's order (GET /policies sorts by policy_id with plain string comparison). */
function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
