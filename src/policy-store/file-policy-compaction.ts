import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import type { CompactionStep } from './file-policy-options.js';
import type { CompactionWorker } from './journal-compaction.js';
import { SNAPSHOT_FILE, SNAPSHOT_TEMP_FILE, type SnapshotIndex } from './journal-snapshot.js';
import type { PolicyRecord } from './journal-state.js';

/** The file steps of a FilePolicyStore compaction (see its file comment) and the records' move to the new snapshot. */

/**
 * Steps 1 and 2: the snapshot written to the temporary file by the worker, then renamed over the old
 * one. On failure the temporary file is removed and the journal keeps every change.
 */
export async function writeSnapshot(
  compactor: CompactionWorker,
  job: { dir: string; journalBytes: number; rev: number },
  step: (step: CompactionStep) => void,
): Promise<{ bytes: number; index: SnapshotIndex }> {
  const temp = join(job.dir, SNAPSHOT_TEMP_FILE);
  try {
    // Serialised in a worker thread from the files themselves (the snapshot and the journal hold exactly
    // the state in memory: nothing is appended while this runs), so decisions never wait for it.
    const written = await compactor.run(job, () => step('snapshot-started'));
    step('snapshot-written');
    await fsp.rename(temp, join(job.dir, SNAPSHOT_FILE));
    return written;
  } catch (error) {
    await fsp.rm(temp, { force: true }).catch(() => undefined);
    throw error;
  }
}

/**
 * Points every record's history at its range in the new snapshot (`index`) and drops what memory held;
 * false, changing nothing, when the snapshot does not list the records' ids in their order.
 */
export function moveHistoryToSnapshot(records: Map<string, PolicyRecord>, index: SnapshotIndex): boolean {
  // The worker rebuilt the records from the same files, so it wrote them in this map's order.
  if (!inOrder(records, index.ids)) return false;
  let k = 0;
  for (const record of records.values()) {
    record.coldAt = index.ranges[2 * k];
    record.coldLength = index.ranges[2 * k + 1];
    record.coldCurrent = record.current;
    record.versions = record.audit = undefined;
    k++;
  }
  return true;
}

/** Whether `map`'s keys are `ids`, in that order. */
function inOrder(map: Map<string, unknown>, ids: readonly string[]): boolean {
  if (map.size !== ids.length) return false;
  let k = 0;
  for (const id of map.keys()) if (id !== ids[k++]) return false;
  return true;
}
