/**
 * A child for the compaction worker test: runs two compaction jobs, one after the other, on DIR (an
 * empty store's files), holds nothing else that keeps the process alive and never closes the worker.
 * The second job's answer printed shows that a running job keeps the process alive (the first left the
 * thread idle); the process ending soon after shows that an idle thread does not.
 * Usage: node --import tsx compaction-worker-child.ts DIR
 */
import { writeSync } from 'node:fs';
import { CompactionWorker } from '../../src/policy-store/journal-compaction.js';

const dir = process.argv[2];
const worker = new CompactionWorker();
const job = { dir, journalBytes: 0, rev: 0 };
// The second job starts on a thread the first left idle (unref'd).
void worker
  .run(job)
  .then(() => worker.run(job))
  .then(({ bytes }) => writeSync(1, `${JSON.stringify({ bytes })}\n`));
