import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FilePolicyStore } from '../../src/policy-store/file-policy-store.js';
import { SNAPSHOT_FILE, SnapshotCorruptError } from '../../src/policy-store/journal-snapshot.js';
import { churn } from '../support/policy-churn.js';
import { tempDir } from '../support/temp-dir.js';

/** The snapshot's bytes with `edit` applied before its trailer and the trailer's digest made to match again. */
function rewritten(snapshot: Buffer, edit: (body: string) => string): Buffer {
  const trailerStart = snapshot.lastIndexOf(0x0a, snapshot.length - 2) + 1;
  const body = Buffer.from(edit(snapshot.toString('utf8', 0, trailerStart)), 'utf8');
  const trailer = JSON.parse(snapshot.toString('utf8', trailerStart)) as Record<string, unknown>;
  trailer.sha256 = createHash('sha256').update(body).digest('hex');
  return Buffer.concat([body, Buffer.from(`${JSON.stringify(trailer)}\n`)]);
}

describe('policy snapshot', function () {
  this.timeout(30_000);
  let dir: string;
  tempDir('rl-snapshot-', { per: 'test', made: (path) => (dir = path) });

  it('start-up parses the current policies only; an id\'s versions and audit trail are read from the snapshot when asked', async () => {
    const store = await FilePolicyStore.open(dir, { compactMinBytes: 16 * 1024 });
    await churn(store, 120, undefined, 3);
    await store.settled();
    expect(store.storageStats().compactions).to.be.greaterThan(0);
    const expected = { list: store.list(), versions: await store.versions('churn-0'), audit: await store.audit('churn-0') };
    // In memory: what the journal holds after the last snapshot, no more.
    const { historyInMemory, journalRecords } = store.storageStats();
    await store.close();

    // churn-1's history line damaged in a way only its parse notices (the digest made to match).
    const path = join(dir, SNAPSHOT_FILE);
    const damaged = rewritten(readFileSync(path), (body) => body.replace(/^(\{"h":"churn-1",)"v":/m, '$1"w":'));
    expect(damaged.equals(rewritten(readFileSync(path), (body) => body))).to.equal(false);
    writeFileSync(path, damaged);

    const again = await FilePolicyStore.open(dir);
    try {
      expect(again.storageStats()).to.deep.include({ journalRecords, historyInMemory });
      expect(again.list()).to.deep.equal(expected.list);
      expect((await again.fetch('churn-1')).head).to.be.greaterThan(0);
      expect(await again.versions('churn-0')).to.deep.equal(expected.versions);
      expect(await again.audit('churn-0')).to.deep.equal(expected.audit);
      const failed = await again.versions('churn-1').then(() => undefined, (error: unknown) => error);
      expect(failed).to.be.instanceOf(SnapshotCorruptError);
      expect((failed as Error).message).to.include('a history line is not one');
    } finally {
      await again.close();
    }
  });
});
