import { randomUUID } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { revivedPolicy, type StringPool } from '../policy/stored-policy.js';
import type { Policy } from '../policy/types.js';
import type { FilePolicyStoreOptions } from './file-policy-options.js';
import { openJournal } from './journal-file.js';
import { SNAPSHOT_FILE, SNAPSHOT_TEMP_FILE } from './journal-snapshot.js';
import { SnapshotReader } from './journal-snapshot-reader.js';
import { emptyState, type JournalChange, type JournalRecord, type StoreState } from './journal-state.js';
import { revivedAuditEntry, seedAuditEntry } from './policy-store.js';

/** What a FilePolicyStore starts from: the data directory's snapshot and the journal after it, or a seed. */
export interface LoadedFiles {
  /** The journal's path and open handle. */
  path: string;
  file: fsp.FileHandle;
  /** The snapshot the records' older history lies in (none before the first compaction). */
  snapshot: SnapshotReader | undefined;
  /** The snapshot's state (empty without one). */
  state: StoreState;
  /** The journal's records after the snapshot, as parsed (not yet revived). */
  records: JournalRecord[];
  size: number;
  snapshotBytes: number;
}

/** Loads the snapshot and the journal after it, a torn last record dropped. */
export async function loadFiles(dir: string, options: FilePolicyStoreOptions): Promise<LoadedFiles> {
  // A temporary snapshot is what a compaction interrupted before its rename left: never complete.
  await fsp.rm(join(dir, SNAPSHOT_TEMP_FILE), { force: true });
  const snapshot = await SnapshotReader.load(join(dir, SNAPSHOT_FILE));
  try {
    const state = snapshot?.state ?? emptyState();
    const { path, file, records, size } = await openJournal(dir, state.rev, options.onTornTail);
    return { path, file, snapshot: snapshot?.reader, state, records, size, snapshotBytes: snapshot?.bytes ?? 0 };
  } catch (error) {
    await snapshot?.reader.close();
    throw error;
  }
}

/**
 * A replayed record in stored form (stored-policy.ts): its policies revived, and each audit value the
 * very object the store holds for that version (a policy's versions never repeat a number), not a
 * second parsed copy. `currentOf`: the store's current policy of an id, before this record.
 */
export function revivedRecord(record: JournalRecord, strings: StringPool, currentOf: (policyId: string) => Policy | undefined): JournalRecord {
  const changes = record.changes.map((c): JournalChange => {
    const policy = c.policy === null ? null : revivedPolicy(c.policy, strings);
    const previous = currentOf(c.policy_id) ?? null;
    const held = (value: Policy | null): Policy | null => {
      if (value === null || value === undefined) return null;
      if (policy !== null && value.version === policy.version) return policy;
      if (previous !== null && value.version === previous.version) return previous;
      return revivedPolicy(value, strings);
    };
    const audit = revivedAuditEntry(c.audit, held(c.audit.old_value), held(c.audit.new_value), strings);
    return { policy_id: c.policy_id, head: c.head, policy, audit };
  });
  return { rev: record.rev, changes };
}

/** The first record of an empty store: every seed policy at its version, each with its seed audit entry. */
export function seedRecord(policies: readonly Policy[]): JournalRecord {
  return {
    rev: 1,
    changes: policies.map((policy) => ({ policy_id: policy.policy_id, head: policy.version, policy, audit: seedAuditEntry(policy, randomUUID()) })),
  };
}
