/**
 * The compaction worker thread (journal-compaction.ts) on its own: a job the files contradict, or whose
 * afterHeader throws, fails with that reason and leaves the worker usable; a running job keeps the
 * process alive and an idle worker does not.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeRecord, JOURNAL_FILE } from '../../src/policy-store/file-policy-store.js';
import { CompactionWorker } from '../../src/policy-store/journal-compaction.js';
import { SNAPSHOT_TEMP_FILE } from '../../src/policy-store/journal-snapshot.js';
import { REPO_ROOT } from '../support/server-process.js';
import { tempDir } from '../support/temp-dir.js';

describe('CompactionWorker', function () {
  this.timeout(60_000);
  let dir: string;
  tempDir('rl-compaction-worker-', { per: 'test', made: (path) => (dir = path) });

  it('a job the files contradict fails with the reason the worker found; the worker then runs the next job', async () => {
    const worker = new CompactionWorker();
    try {
      // No journal at all.
      const missing = await worker.run({ dir, journalBytes: 10, rev: 1 }).then(() => undefined, (error: unknown) => error);
      expect(missing).to.be.instanceOf(Error);
      expect((missing as Error).message).to.include('ENOENT').and.include(JOURNAL_FILE);
      // A journal that ends at another revision than the store's.
      const record = encodeRecord({ rev: 1, changes: [] });
      writeFileSync(join(dir, JOURNAL_FILE), record);
      const behind = await worker.run({ dir, journalBytes: record.length, rev: 2 }).then(() => undefined, (error: unknown) => error);
      // The worker's message as the message (what the store logs), its stack kept.
      expect((behind as Error).message).to.equal('the files end at revision 1, the store is at 2');
      expect((behind as Error).stack).to.include('journal-compaction-worker');
      // The same files, the right revision: the temporary snapshot is written.
      const { bytes } = await worker.run({ dir, journalBytes: record.length, rev: 1 });
      expect(readFileSync(join(dir, SNAPSHOT_TEMP_FILE)).length).to.equal(bytes);
    } finally {
      await worker.close();
    }
  });

  it('an afterHeader that throws fails the job with its error (not an uncaught exception); the worker runs the next job', async () => {
    writeFileSync(join(dir, JOURNAL_FILE), '');
    const worker = new CompactionWorker();
    try {
      const failed = await worker
        .run({ dir, journalBytes: 0, rev: 0 }, () => {
          throw new Error('the hook failed');
        })
        .then(() => undefined, (error: unknown) => error);
      expect((failed as Error).message).to.equal('the hook failed');
      expect((await worker.run({ dir, journalBytes: 0, rev: 0 })).bytes).to.be.above(0);
    } finally {
      await worker.close();
    }
  });

  it('a running job keeps the process alive; an idle worker does not', async () => {
    writeFileSync(join(dir, JOURNAL_FILE), '');
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/compaction-worker-child.ts', dir], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
    let answeredAt = 0;
    child.stdout.once('data', () => (answeredAt = Date.now()));
    const code = await new Promise<number | null>((resolve, reject) => {
      child.on('error', reject);
      child.on('exit', resolve);
    });
    expect(code, err).to.equal(0);
    // The second job's answer was printed: the process waited for the running job.
    expect(out, 'the process ended before the second job answered').to.not.equal('');
    const { bytes } = JSON.parse(out) as { bytes: number };
    expect(readFileSync(join(dir, SNAPSHOT_TEMP_FILE)).length).to.equal(bytes);
    // And it ended without a close(), well before the idle worker's own 30 s exit (a hang guard, not a timing).
    expect(Date.now() - answeredAt).to.be.below(20_000);
  });
});
