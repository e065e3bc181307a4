import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { parentPort } from 'node:worker_threads';
import { applyRecord, JOURNAL_FILE, parseJournal } from './file-policy-store.js';
import type { CompactionJob, CompactionMessage } from './journal-compaction.js';
import { emptyState, readSnapshot, SNAPSHOT_FILE, SNAPSHOT_TEMP_FILE, writeSnapshot } from './journal-snapshot.js';

/** The compaction worker (journal-compaction.ts): the state from the files, written as the temporary snapshot. */
const post = (message: CompactionMessage) => parentPort!.postMessage(message);

parentPort!.on('message', ({ job, resume }: { job: CompactionJob; resume: Int32Array }) => {
  compact(job, resume).then(
    (bytes) => post({ type: 'done', bytes }),
    (error: unknown) => post(error instanceof Error ? { type: 'failed', message: error.message, stack: error.stack } : { type: 'failed', message: String(error) }),
  );
});

async function compact(job: CompactionJob, resume: Int32Array): Promise<number> {
  const state = (await readSnapshot(join(job.dir, SNAPSHOT_FILE)))?.state ?? emptyState();
  const path = join(job.dir, JOURNAL_FILE);
  const journal = (await fsp.readFile(path)).subarray(0, job.journalBytes);
  const { records, goodBytes } = parseJournal(path, journal, state.rev);
  if (goodBytes !== job.journalBytes) throw new Error(`the journal holds ${goodBytes} good bytes, the store wrote ${job.journalBytes}`);
  for (const record of records) applyRecord(state, record);
  if (state.rev !== job.rev) throw new Error(`the files end at revision ${state.rev}, the store is at ${job.rev}`);
  return writeSnapshot(join(job.dir, SNAPSHOT_TEMP_FILE), state, () => {
    post({ type: 'header-written' });
    Atomics.wait(resume, 0, 0);
  });
}
