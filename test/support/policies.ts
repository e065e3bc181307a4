import { validatePolicy } from '../../src/policy/validate.js';
import type { AuditEntry, PolicyChange } from '../../src/policy-store/policy-store.js';
import type { Policy } from '../../src/policy/types.js';

/**
 * Builds a stored Policy from a raw definition through the real validator, so tests exercise the same
 * defaults and normalisation as the server. Throws with every field error if the definition is invalid.
 */
export function makePolicy(raw: Record<string, unknown>): Policy {
  const result = validatePolicy(raw);
  if (!result.ok) throw new Error(`test policy invalid: ${JSON.stringify(result.errors)}`);
  const now = new Date(0).toISOString();
  return { ...result.policy, version: 1, created_at: now, updated_at: now };
}

/** A fixed-window policy `id` at `version`, for the policy store tests. */
export function versionedPolicy(id: string, version: number, limit = 10): Policy {
  return { ...makePolicy({ policy_id: id, algorithm: { type: 'fixed_window', limit, window: '1m' } }), version };
}

/** The audit entry of a change from `old` to `p` (null: none), by 'tester' at the epoch. */
function auditOf(p: Policy | null, old: Policy | null, action: AuditEntry['action_type']): AuditEntry {
  const id = (p ?? old)!.policy_id;
  return {
    audit_id: `${id}-${Math.random()}`,
    policy_id: id,
    action_type: action,
    changed_by: 'tester',
    changed_at: new Date(0).toISOString(),
    changed_at_unix: 0,
    version: p?.version ?? old!.version,
    old_value: old,
    new_value: p,
  };
}

/** The PolicyChanges PolicyService hands a PolicyStore, built directly for store tests. */
export function createChange(p: Policy, head = 0): PolicyChange {
  return { policy_id: p.policy_id, action: 'create', expectedHead: head, mustExist: false, policy: p, audit: auditOf(p, null, 'create') };
}

export function updateChange(p: Policy, old: Policy): PolicyChange {
  return { policy_id: p.policy_id, action: 'update', expectedHead: old.version, mustExist: true, policy: p, audit: auditOf(p, old, 'update') };
}

export function removeChange(old: Policy): PolicyChange {
  return { policy_id: old.policy_id, action: 'delete', expectedHead: old.version, mustExist: true, policy: null, audit: auditOf(null, old, 'delete') };
}

/** The policy `algorithm` of every rate algorithm, by its type: `limit` an hour (sliding_window_counter with 4 sub-windows). */
export function hourlyAlgorithms(limit: number): Record<string, Record<string, unknown>> {
  const hourly = (type: string, extra: Record<string, unknown> = {}) => ({ type, limit, window: '1h', ...extra });
  return {
    fixed_window: hourly('fixed_window'),
    sliding_window_log: hourly('sliding_window_log'),
    sliding_window_counter: hourly('sliding_window_counter', { sub_window_count: 4 }),
    token_bucket: hourly('token_bucket'),
    leaky_bucket: hourly('leaky_bucket'),
    quota: { type: 'quota', limit, quota_period: '1h' },
  };
}

/** The fields validatePolicy names as wrong in `raw` (none when it is valid). */
export function invalidFields(raw: unknown): string[] {
  const result = validatePolicy(raw);
  return result.ok ? [] : result.errors.map((e) => e.field);
}
