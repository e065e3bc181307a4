import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { FilePolicyStore, type CompactionStep } from '../../src/policy-store/file-policy-store.js';
import { LOCK_FILE } from '../../src/policy-store/journal-lock.js';
import { SNAPSHOT_FILE, SNAPSHOT_TEMP_FILE } from '../../src/policy-store/journal-snapshot.js';
import { churn, expectAcknowledged, type ChurnAck } from '../support/policy-churn.js';
import { REPO_ROOT } from '../support/server-process.js';
import { tempDir } from '../support/temp-dir.js';

/** Runs the crash child until it kills itself at `step` of compaction `nth`; returns its acks. */
function crashAt(dir: string, step: CompactionStep, nth: number, from: number): Promise<{ acks: ChurnAck[]; signal: string | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/compaction-crash-child.ts', dir, step, String(nth), String(from)], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (signal !== 'SIGKILL') return reject(new Error(`child exited with ${code}/${signal}, not killed at ${step}\n${err}`));
      const acks = out
        .split('\n')
        .filter((line) => line.endsWith('}'))
        .map((line) => JSON.parse(line) as ChurnAck);
      resolve({ acks, signal });
    });
  });
}

/**
 * kill -9 at every step of a compaction (the second one, so an older snapshot and a journal exist
 * too): a restart finds every acknowledged change (current, version, audit), recovers the data
 * directory (lock, temporary snapshot) and keeps working.
 */
describe('FilePolicyStore compaction survives kill -9 at every step', function () {
  this.timeout(120_000);
  const steps: CompactionStep[] = ['snapshot-started', 'snapshot-written', 'snapshot-renamed', 'snapshot-durable', 'journal-truncated'];
  let dir: string;
  tempDir('rl-compaction-crash-', { per: 'test', made: (path) => (dir = path) });

  for (const step of steps) {
    it(`kill -9 at ${step}`, async () => {
      const first = await crashAt(dir, step, 2, 0);
      expect(first.acks.length).to.be.greaterThan(10);
      expect(existsSync(join(dir, LOCK_FILE)), 'the dead process left its lock').to.equal(true);
      if (step === 'snapshot-started' || step === 'snapshot-written') expect(existsSync(join(dir, SNAPSHOT_TEMP_FILE))).to.equal(true);

      const store = await FilePolicyStore.open(dir, { compactMinBytes: 8 * 1024 });
      try {
        expect(existsSync(join(dir, SNAPSHOT_TEMP_FILE))).to.equal(false);
        expect(existsSync(join(dir, SNAPSHOT_FILE))).to.equal(true);
        await expectAcknowledged(store, first.acks);
        // It takes changes again, compacts again, and a second crash at the same step loses nothing either.
        const more = await churn(store, 100, undefined, 4, 10_000);
        await store.settled();
        await store.close();
        const second = await crashAt(dir, step, 1, 20_000);
        const last = await FilePolicyStore.open(dir, { compactMinBytes: 8 * 1024 });
        try {
          await expectAcknowledged(last, [...first.acks, ...more, ...second.acks]);
        } finally {
          await last.close();
        }
      } finally {
        await store.close();
      }
    });
  }
});
