import type { JournalRecord, PolicyRecord } from './journal-state.js';
import type { CommitResult, PolicyChange } from './policy-store.js';

/**
 * Group commit: the changes that arrived while the journal was busy are checked in arrival order and
 * written together, one record each, in one durable write. Under a slow disk a change then waits for at
 * most the write in progress and its own, instead of for every change queued ahead of it (each its own
 * O_DSYNC write: the queue grows whenever changes arrive faster than one write takes).
 */

/** One accepted change of a batch: its record (revisions follow each other) and whether the policy existed. */
export interface BatchedRecord {
  record: JournalRecord;
  policyId: string;
  policy: PolicyChange['policy'];
  existed: boolean;
}

export interface CheckedBatch {
  /** The accepted changes' records, in order, to be written together. */
  records: BatchedRecord[];
  /**
   * Each change's answer, in the order given: a conflict, or the revision its record will have (an
   * `ok` answer is given only once the write succeeded).
   */
  answers: CommitResult[];
}

/**
 * Checks each change against the store's records as the changes before it in the batch leave them (a
 * change to a policy an earlier change of the batch just wrote sees that write's head), exactly as if
 * each were committed alone, one after the other.
 */
export function checkBatch(changes: readonly PolicyChange[], rev: number, stored: (policyId: string) => PolicyRecord | undefined): CheckedBatch {
  const pending = new Map<string, { head: number; exists: boolean }>();
  const records: BatchedRecord[] = [];
  const answers: CommitResult[] = [];
  for (const change of changes) {
    const held = stored(change.policy_id);
    const { head, exists } = pending.get(change.policy_id) ?? { head: held?.head ?? 0, exists: held?.current !== undefined };
    if (head !== change.expectedHead || exists !== change.mustExist) {
      answers.push({ ok: false, reason: 'conflict', head, exists });
      continue;
    }
    const newHead = change.policy ? change.policy.version : head;
    rev++;
    records.push({
      record: { rev, changes: [{ policy_id: change.policy_id, head: newHead, policy: change.policy, audit: change.audit }] },
      policyId: change.policy_id,
      policy: change.policy,
      existed: exists,
    });
    pending.set(change.policy_id, { head: newHead, exists: change.policy !== null });
    answers.push({ ok: true, revision: rev });
  }
  return { records, answers };
}
