import type { StringPool } from '../policy/stored-policy.js';
import type { Policy } from '../policy/types.js';
import type { AUDIT_ACTIONS } from '../schema/audit.js';

/**
 * Policy storage: the current policies, every version and the audit trail, changed together.
 *
 * Two implementations with one contract:
 * - FilePolicyStore (single node): an fsync'd append-only journal in RL_DATA_DIR.
 * - RedisPolicyStore (multi node): Redis hashes under one hash tag, one Lua script per change,
 *   change messages over pub/sub plus a periodic revision check.
 *
 * Every store keeps the current policies in memory (`list`/`get` are synchronous and never touch the
 * backend: decisions are built from them). `fetch`, `versions` and `audit` may ask the backend.
 *
 * A change is committed with `commit`: the store checks, atomically with the write, that nothing
 * changed the policy since the caller read it (`expectedHead`, `mustExist`), then writes the new
 * current value, its version record and its audit entry together, bumps the revision and notifies.
 * A reader never sees one without the others.
 */

export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export interface AuditEntry {
  audit_id: string;
  policy_id: string;
  action_type: AuditAction;
  /** The caller's subject; `anonymous` when authentication is off, `policy-file` for seeding. */
  changed_by: string;
  changed_at: string;
  changed_at_unix: number;
  /** The version this change produced (for delete: the version that was deleted). */
  version: number;
  old_value: Policy | null;
  new_value: Policy | null;
  /** A rollback only: the version whose content it restored. */
  restored_version?: number;
}

export interface PolicyVersion {
  policy_id: string;
  version: number;
  created_at: string;
  created_at_unix: number;
  snapshot: Policy;
}

/** The authoritative state of one policy id. */
export interface PolicyHead {
  /** The current policy; undefined when it never existed or was deleted. */
  policy: Policy | undefined;
  /** Highest version ever written for this id (0 = never existed). Survives deletion. */
  head: number;
}

export interface PolicyChange {
  policy_id: string;
  action: AuditAction;
  /** The head the caller read; the commit fails when the stored head differs. */
  expectedHead: number;
  /** Whether the caller saw the policy as existing; the commit fails when that no longer holds. */
  mustExist: boolean;
  /** The new current policy (its `version` is the new head), or null to delete. */
  policy: Policy | null;
  audit: AuditEntry;
}

export type CommitResult =
  | { ok: true; revision: number }
  | { ok: false; reason: 'conflict'; head: number; exists: boolean };

export type ChangeKind = 'created' | 'updated' | 'deleted' | 'reloaded';

/** What listeners are told after the in-memory snapshot changed (local or remote change). */
export interface PolicyChangeEvent {
  /** Empty for `reloaded` (a full resynchronisation that may have changed anything). */
  policy_id: string;
  change: ChangeKind;
  /** The policy's current version (0 when deleted or for `reloaded`). */
  version: number;
  /** The store revision after the change (see `revision()`). */
  revision: number;
  /** True when the change was made through this store instance. */
  local: boolean;
}

export type ChangeListener = (event: PolicyChangeEvent) => void;

export interface PolicyStore {
  /** Current policies from memory, sorted by policy_id. */
  list(): Policy[];
  /** The current policy from memory. */
  get(policyId: string): Policy | undefined;
  /** The authoritative current state of one id (may ask the backend). */
  fetch(policyId: string): Promise<PolicyHead>;
  /** Every version ever written, ascending; empty when the id never existed. */
  versions(policyId: string): Promise<PolicyVersion[]>;
  /** The audit trail, oldest first; empty when the id never existed. */
  audit(policyId: string): Promise<AuditEntry[]>;
  /** Writes one change atomically with its version record and audit entry (see the file comment). */
  commit(change: PolicyChange): Promise<CommitResult>;
  /**
   * Writes the given policies (version 1 each, audited as `create` by `policy-file`) when the store has
   * never held any policy. `load` is called only then, so a populated store never reads the file.
   * Returns whether it seeded.
   */
  seedIfEmpty(load: () => Policy[] | Promise<Policy[]>): Promise<boolean>;
  /**
   * A counter that grows with every change this instance has applied: equal revisions mean equal
   * snapshots (cheap "did anything change" checks, ETags).
   */
  revision(): number;
  /** Called after every change to the in-memory snapshot; returns an unsubscribe function. */
  onChange(listener: ChangeListener): () => void;
  close(): Promise<void>;
}

/** The subject written by seeding from RL_POLICY_FILE. */
export const SEED_SUBJECT = 'policy-file';

/** The version record a stored policy produces. */
export function versionRecordOf(policy: Policy): PolicyVersion {
  return {
    policy_id: policy.policy_id,
    version: policy.version,
    created_at: policy.updated_at,
    created_at_unix: unixSecondsOf(policy.updated_at),
    snapshot: policy,
  };
}

export function unixSecondsOf(iso: string): number {
  const ms = Date.parse(iso);
  return Number.isFinite(ms) ? Math.floor(ms / 1000) : 0;
}

/** The audit entries seeding writes for a set of file policies (each as a version-1 create). */
export function seedAuditEntry(policy: Policy, auditId: string): AuditEntry {
  return {
    audit_id: auditId,
    policy_id: policy.policy_id,
    action_type: 'create',
    changed_by: SEED_SUBJECT,
    changed_at: policy.updated_at,
    changed_at_unix: unixSecondsOf(policy.updated_at),
    version: policy.version,
    old_value: null,
    new_value: policy,
  };
}

/**
 * An audit entry just parsed from JSON the server wrote, completed in place: its values become the
 * policies given (the objects the store already holds for those versions) and its repeated strings
 * are pooled.
 */
export function revivedAuditEntry(parsed: AuditEntry, oldValue: Policy | null, newValue: Policy | null, pool: StringPool): AuditEntry {
  parsed.action_type = pool.of(parsed.action_type);
  parsed.changed_by = pool.of(parsed.changed_by);
  parsed.changed_at = pool.of(parsed.changed_at);
  parsed.old_value = oldValue;
  parsed.new_value = newValue;
  return parsed;
}

export function byPolicyId(a: Policy, b: Policy): number {
  return a.policy_id < b.policy_id ? -1 : a.policy_id > b.policy_id ? 1 : 0;
}

/**
 * Keeps a list sorted by policy_id equal to the current set after one id changed (`policy` undefined:
 * gone): a binary search and one splice, where sorting again cost a write at 100,000 policies more than
 * the write itself.
 */
export function resortOne(sorted: Policy[], policyId: string, policy: Policy | undefined): void {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid].policy_id < policyId) lo = mid + 1;
    else hi = mid;
  }
  const found = lo < sorted.length && sorted[lo].policy_id === policyId;
  if (policy === undefined) {
    if (found) sorted.splice(lo, 1);
  } else if (found) sorted[lo] = policy;
  else sorted.splice(lo, 0, policy);
}

/** A small listener registry shared by the implementations; a throwing listener never breaks a commit. */
export class ChangeListeners {
  private readonly listeners = new Set<ChangeListener>();

  add(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(event: PolicyChangeEvent, onError: (error: unknown) => void): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(event);
      } catch (error) {
        onError(error);
      }
    }
  }
}
