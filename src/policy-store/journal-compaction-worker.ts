import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { parentPort } from 'node:worker_threads';
import { JOURNAL_FILE, parseJournal } from './journal-file.js';
import type { CompactionJob, CompactionMessage, CompactionResult } from './journal-compaction.js';
import { readSnapshot, SNAPSHOT_FILE, SNAPSHOT_TEMP_FILE, writeSnapshot } from './journal-snapshot.js';
import { applyRecord, emptyState, type PolicyRecord } from './journal-state.js';

/** The compaction worker (journal-compaction.ts): the state from the files, written as the temporary snapshot. */
const post = (message: CompactionMessage) => parentPort!.postMessage(message);

parentPort!.on('message', ({ job, resume }: { job: CompactionJob; resume: Int32Array }) => {
  compact(job, resume).then(
    ({ bytes, index }) => post({ type: 'done', bytes, index }),
    (error: unknown) => post(error instanceof Error ? { type: 'failed', message: error.message, stack: error.stack } : { type: 'failed', message: String(error) }),
  );
});

async function compact(job: CompactionJob, resume: Int32Array): Promise<CompactionResult> {
  const snapshotPath = join(job.dir, SNAPSHOT_FILE);
  const snapshot = await readSnapshot(snapshotPath);
  const state = snapshot?.state ?? emptyState();
  const path = join(job.dir, JOURNAL_FILE);
  const journal = (await fsp.readFile(path)).subarray(0, job.journalBytes);
  const { records, goodBytes } = parseJournal(path, journal, state.rev);
  if (goodBytes !== job.journalBytes) throw new Error(`the journal holds ${goodBytes} good bytes, the store wrote ${job.journalBytes}`);
  for (const record of records) applyRecord(state, record);
  if (state.rev !== job.rev) throw new Error(`the files end at revision ${state.rev}, the store is at ${job.rev}`);
  // An id's history line is copied from the old snapshot as it is, unless the journal changed the id.
  const older = { path: snapshotPath, line: (record: PolicyRecord) => snapshot!.data.subarray(record.coldAt, record.coldAt + record.coldLength) };
  return writeSnapshot(join(job.dir, SNAPSHOT_TEMP_FILE), state, older, () => {
    post({ type: 'header-written' });
    Atomics.wait(resume, 0, 0);
  });
}
