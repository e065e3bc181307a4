import { AdminApiError, type AdminClient, type PolicyWarning } from '@rl/client';
import type { Plan, PlannedAction } from './plan.js';

/**
 * Carries out a plan, one change at a time, in plan order (creates and updates by policy_id, then
 * deletes). Updates and deletes send `If-Match` with the version the plan was read at. The first
 * failure stops the run: what was applied before it stays applied (each change is atomic on the
 * server), nothing after it is tried, and the result says which is which.
 */

export interface ChangeResult {
  action: 'create' | 'update' | 'delete';
  policy_id: string;
  ok: boolean;
  /** The version the server stored (create, update) or deleted. */
  version?: number;
  /** The server's tie warnings of a create or update (the change was made). */
  warnings?: PolicyWarning[];
  error?: { status?: number; message: string; errors?: { field: string; message: string }[] };
}

export interface ApplyOutcome {
  results: ChangeResult[];
  /** Changes not tried because an earlier one failed. */
  skipped: string[];
  failed?: ChangeResult;
}

export async function applyPlan(client: AdminClient, plan: Plan, onResult: (r: ChangeResult) => void = () => {}): Promise<ApplyOutcome> {
  const results: ChangeResult[] = [];
  const changes = plan.actions.filter(isChange);
  for (let i = 0; i < changes.length; i++) {
    const change = changes[i];
    const result = await applyOne(client, change);
    results.push(result);
    onResult(result);
    if (!result.ok) return { results, skipped: changes.slice(i + 1).map((c) => `${c.action} ${c.policy_id}`), failed: result };
  }
  return { results, skipped: [] };
}

type Change = Extract<PlannedAction, { action: 'create' | 'update' | 'delete' }>;

function isChange(a: PlannedAction): a is Change {
  return a.action === 'create' || a.action === 'update' || a.action === 'delete';
}

async function applyOne(client: AdminClient, change: Change): Promise<ChangeResult> {
  const base = { action: change.action, policy_id: change.policy_id };
  try {
    switch (change.action) {
      case 'create': {
        const stored = await client.createPolicy(change.policy as unknown as Record<string, unknown>);
        return { ...base, ok: true, version: stored.version, ...(stored.warnings && { warnings: stored.warnings }) };
      }
      case 'update': {
        const stored = await client.replacePolicy(change.policy_id, change.policy as unknown as Record<string, unknown>, { ifMatch: change.version });
        return { ...base, ok: true, version: stored.version, ...(stored.warnings && { warnings: stored.warnings }) };
      }
      case 'delete':
        await client.deletePolicy(change.policy_id, { ifMatch: change.version });
        return { ...base, ok: true, version: change.version };
    }
  } catch (error) {
    // Only the server's refusals are a result; an unreachable server ends the run as an error.
    if (!(error instanceof AdminApiError)) throw error;
    const detail: ChangeResult['error'] = { status: error.status, message: error.serverMessage };
    if (error.fieldErrors.length > 0) detail.errors = error.fieldErrors;
    return { ...base, ok: false, error: detail };
  }
}
