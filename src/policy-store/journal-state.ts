import type { AuditEntry } from './policy-store.js';
import type { Policy } from '../policy/types.js';

/** One change as the journal holds it: the policy's new head version, the policy (null: deleted) and its audit entry. */
export interface JournalChange {
  policy_id: string;
  head: number;
  policy: Policy | null;
  audit: AuditEntry;
}

/** One journal line: a revision and its changes (seeding writes every file policy in one). */
export interface JournalRecord {
  rev: number;
  changes: JournalChange[];
}

/**
 * What a FilePolicyStore holds: one record per policy id ever written (deleted ones too: their head
 * survives). The current policy is in memory; the versions and audit entries up to the snapshot are
 * left in the snapshot file (a byte range, read on demand: start-up parses only the current policies),
 * those since (journal replay, commits) are in memory until the next compaction writes them out.
 */
export interface PolicyRecord {
  /** Highest version ever written for this id. */
  head: number;
  /** The current policy; undefined once deleted. */
  current: Policy | undefined;
  /** Where this id's history line lies in the snapshot (journal-snapshot.ts); length 0: nothing there. */
  coldAt: number;
  coldLength: number;
  /** The current policy when that snapshot was written: the history line refers to it rather than repeat it. */
  coldCurrent: Policy | undefined;
  /** Versions and audit entries after the snapshot, oldest first; undefined: none. */
  versions: Policy[] | undefined;
  audit: AuditEntry[] | undefined;
}

/** Everything a FilePolicyStore holds, at revision `rev`. */
export interface StoreState {
  rev: number;
  records: Map<string, PolicyRecord>;
}

export function emptyState(): StoreState {
  return { rev: 0, records: new Map() };
}

/** A record whose history is all in the snapshot, at [coldAt, coldAt + coldLength) (all fields set: one shape for every record). */
export function policyRecord(head: number, current: Policy | undefined, coldAt = 0, coldLength = 0): PolicyRecord {
  return { head, current, coldAt, coldLength, coldCurrent: current, versions: undefined, audit: undefined };
}

/** Whether the record has versions or audit entries that are not in the snapshot. */
export function hasRecent(record: PolicyRecord): boolean {
  return record.versions !== undefined || record.audit !== undefined;
}

/** One journal record's changes applied to `state` (the store's own at run time, the compaction worker's copy). */
export function applyRecord(state: StoreState, record: JournalRecord): void {
  state.rev = record.rev;
  for (const c of record.changes) {
    let held = state.records.get(c.policy_id);
    if (held === undefined) state.records.set(c.policy_id, (held = policyRecord(0, undefined)));
    held.head = c.head;
    held.current = c.policy ?? undefined;
    if (c.policy) (held.versions ??= []).push(c.policy);
    (held.audit ??= []).push(c.audit);
  }
}
