import { expect } from 'chai';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeRecord, FilePolicyStore, JOURNAL_FILE, JournalCorruptError, type FilePolicyStoreOptions } from '../../src/policy-store/file-policy-store.js';
import { LOCK_FILE } from '../../src/policy-store/journal-lock.js';
import { SNAPSHOT_FILE, SNAPSHOT_TEMP_FILE, SnapshotCorruptError } from '../../src/policy-store/journal-snapshot.js';
import { churn, expectAcknowledged, type ChurnAck } from '../support/policy-churn.js';
import { tempDir } from '../support/temp-dir.js';

describe('FilePolicyStore compaction (snapshot + journal)', function () {
  this.timeout(60_000);
  let dir: string;
  const stores: FilePolicyStore[] = [];
  const open = async (options: FilePolicyStoreOptions = {}) => {
    const store = await FilePolicyStore.open(dir, { compactMinBytes: 16 * 1024, ...options });
    stores.push(store);
    return store;
  };
  const closeAll = async () => {
    for (const s of stores.splice(0)) await s.close();
  };

  tempDir('rl-compaction-', { per: 'test', made: (path) => (dir = path), release: closeAll });

  /** Everything a reader can see, to compare a store before and after a restart. */
  async function everything(store: FilePolicyStore) {
    const ids = [...new Set([...store.list().map((p) => p.policy_id), 'churn-0', 'churn-1', 'churn-2', 'churn-3'])].sort();
    const per = await Promise.all(ids.map(async (id) => [id, await store.fetch(id), await store.versions(id), await store.audit(id)]));
    return { revision: store.revision(), list: store.list(), per };
  }

  it('compacts once the journal outgrows the snapshot, and a restart reads back exactly the same state', async () => {
    const store = await open();
    const acks = await churn(store, 300);
    await store.settled();
    const stats = store.storageStats();
    expect(stats.compactions).to.be.greaterThan(0);
    expect(stats.journalRecords).to.be.lessThan(300);
    const before = await everything(store);
    await closeAll();
    expect(readdirSync(dir).sort()).to.deep.equal([JOURNAL_FILE, SNAPSHOT_FILE].sort()); // the lock is gone too

    const again = await open();
    expect(await everything(again)).to.deep.equal(before);
    expect(again.storageStats()).to.deep.include({ journalRecords: stats.journalRecords, snapshotBytes: stats.snapshotBytes });
    await expectAcknowledged(again, acks);
    // And it keeps going: more changes, another restart.
    const more = await churn(again, 50, undefined, 4, 300);
    await closeAll();
    await expectAcknowledged(await open(), [...acks, ...more]);
  });

  it('start-up work and disk stay bounded after many changes: journal records and bytes, snapshot size', async () => {
    const minBytes = 32 * 1024;
    const store = await open({ compactMinBytes: minBytes });
    const acks: ChurnAck[] = [];
    let maxJournalRecords = 0;
    for (let round = 0; round < 20; round++) {
      acks.push(...(await churn(store, 100, undefined, 6, round * 100)));
      await store.settled();
      const stats = store.storageStats();
      // Once the writer is idle the journal is below the threshold: it never holds more than that.
      expect(stats.journalBytes, `round ${round}`).to.be.below(Math.max(minBytes, stats.snapshotBytes));
      maxJournalRecords = Math.max(maxJournalRecords, stats.journalRecords);
    }
    const stats = store.storageStats();
    await closeAll();

    const files = readdirSync(dir).sort();
    expect(files).to.deep.equal([JOURNAL_FILE, SNAPSHOT_FILE].sort());
    const disk = files.reduce((sum, f) => sum + statSync(join(dir, f)).size, 0);
    console.log(
      `      ${acks.length} changes, ${stats.appendedBytes} B appended: ${stats.compactions} compactions; on disk ${disk} B ` +
        `(snapshot ${stats.snapshotBytes} B, journal ${stats.journalBytes} B = ${stats.journalRecords} records; most ever ${maxJournalRecords})`,
    );
    // Start-up reads the snapshot and a journal smaller than max(threshold, snapshot): at most about
    // twice the state, however many changes made it.
    expect(disk).to.be.below(2 * stats.snapshotBytes + minBytes);
    // The snapshot writes each version once (audit values are references to versions), so the whole
    // directory is well under what the journal alone would have grown to.
    expect(stats.snapshotBytes).to.be.below(stats.appendedBytes / 2);
    expect(disk).to.be.below(stats.appendedBytes * 0.75);
    const again = await open({ compactMinBytes: minBytes });
    expect(again.storageStats().journalRecords).to.equal(stats.journalRecords);
    await expectAcknowledged(again, acks);
  });

  it('answers versions and audit alike while a compaction moves them into the new snapshot, after it, and after a restart', async () => {
    let store: FilePolicyStore | undefined;
    // Reads started while a compaction runs: at its start, and just before the store turns to the new snapshot.
    let reads: ReturnType<typeof everything>[] = [];
    store = await open({
      onCompactionStep: (step) => {
        if (step === 'snapshot-started' || step === 'snapshot-durable') reads.push(everything(store!));
      },
    });
    // One change at a time, each compaction finished before the next change: what a reader may see is
    // fixed while a compaction runs. The second compaction finds history both in a snapshot and in memory.
    for (let i = 0; store.storageStats().compactions < 2; i++) {
      reads = [];
      await churn(store, 1, undefined, 4, i);
      await store.settled();
    }
    // The change that asked for the compaction is in the new snapshot: nothing is left in memory.
    expect(store.storageStats().historyInMemory).to.equal(0);
    const after = await everything(store);
    expect(reads).to.have.length(2);
    for (const read of reads) expect(await read).to.deep.equal(after);
    await closeAll();
    expect(await everything(await open())).to.deep.equal(after);
  });

  it('deletes a temporary snapshot left by an interrupted compaction, ignoring its content', async () => {
    const store = await open();
    const acks = await churn(store, 40);
    await closeAll();
    writeFileSync(join(dir, SNAPSHOT_TEMP_FILE), '{"snapshot":1,"rev":9999}\n');
    const again = await open();
    expect(readdirSync(dir)).to.not.include(SNAPSHOT_TEMP_FILE);
    await expectAcknowledged(again, acks);
  });

  it('refuses to start on a damaged snapshot, and on a journal that starts after the snapshot ends', async () => {
    const store = await open();
    await churn(store, 300);
    await store.settled();
    expect(store.storageStats().compactions).to.be.greaterThan(0);
    const rev = store.revision();
    await closeAll();
    const snapshotPath = join(dir, SNAPSHOT_FILE);
    const good = readFileSync(snapshotPath);

    const damaged = Buffer.from(good);
    damaged[Math.floor(damaged.length / 2)] ^= 0x01;
    writeFileSync(snapshotPath, damaged);
    await expectOpenToFail(SnapshotCorruptError, /digest mismatch/);
    writeFileSync(snapshotPath, good.subarray(0, good.length - 10));
    await expectOpenToFail(SnapshotCorruptError, /complete line/);

    writeFileSync(snapshotPath, good);
    const journal = join(dir, JOURNAL_FILE);
    const snapshotRev = JSON.parse(good.toString('utf8', 0, good.indexOf(0x0a))).rev as number;
    expect(snapshotRev).to.be.at.most(rev);
    // A record two revisions past the snapshot: the one in between is lost.
    writeFileSync(journal, encodeRecord({ rev: snapshotRev + 2, changes: [] }));
    await expectOpenToFail(JournalCorruptError, /rev from 1 to/);
  });

  async function expectOpenToFail(type: new (...args: never[]) => Error, message: RegExp): Promise<void> {
    let error: unknown;
    try {
      await open();
    } catch (e) {
      error = e;
    }
    expect(error).to.be.instanceOf(type);
    expect((error as Error).message).to.match(message);
    expect(readdirSync(dir), 'a failed start leaves no lock behind').to.not.include(LOCK_FILE);
  }
});
