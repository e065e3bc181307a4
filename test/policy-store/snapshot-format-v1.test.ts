/**
 * A data directory written before the snapshot format changed (`"snapshot":1`, every version and audit
 * entry parsed at start-up) still opens and answers exactly what the store that wrote it answered; its
 * first compaction rewrites it in the current format, and nothing is lost on the way.
 */
import { expect } from 'chai';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FilePolicyStore } from '../../src/policy-store/file-policy-store.js';
import { SNAPSHOT_FILE, SnapshotCorruptError } from '../../src/policy-store/journal-snapshot.js';
import { churn, expectAcknowledged } from '../support/policy-churn.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/policy-store-v1/', import.meta.url));

interface Expected {
  revision: number;
  stats: { snapshotBytes: number; journalBytes: number; journalRecords: number };
  list: unknown[];
  ids: Record<string, unknown>;
}

describe('FilePolicyStore reads the first snapshot format', function () {
  this.timeout(30_000);
  const expected = JSON.parse(readFileSync(join(FIXTURE, 'expected.json'), 'utf8')) as Expected;
  let dir: string;
  const stores: FilePolicyStore[] = [];
  const open = async () => {
    const store = await FilePolicyStore.open(dir, { compactMinBytes: 4096 });
    stores.push(store);
    return store;
  };

  beforeEach(() => {
    dir = join(mkdtempSync(join(tmpdir(), 'rl-snapshot-v1-')), 'store');
    cpSync(join(FIXTURE, 'store'), dir, { recursive: true });
  });
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
    rmSync(join(dir, '..'), { recursive: true, force: true });
  });

  /** What a reader sees, as JSON (the fixture's form). */
  async function seen(store: FilePolicyStore) {
    const ids = Object.keys(expected.ids);
    const per = await Promise.all(ids.map(async (id) => [id, { fetch: await store.fetch(id), versions: await store.versions(id), audit: await store.audit(id) }]));
    return JSON.parse(JSON.stringify({ revision: store.revision(), list: store.list(), ids: Object.fromEntries(per) })) as Omit<Expected, 'stats'>;
  }

  it('a snapshot and journal written in the first format open with every current policy, version and audit entry', async () => {
    expect(readFileSync(join(dir, SNAPSHOT_FILE), 'utf8')).to.match(/^\{"snapshot":1,/);
    const store = await open();
    const { revision, list, ids } = expected;
    expect(await seen(store)).to.deep.equal({ revision, list, ids });
    const { snapshotBytes, journalBytes, journalRecords } = expected.stats;
    expect(store.storageStats()).to.deep.include({ snapshotBytes, journalBytes, journalRecords });
    // That format holds every version and audit entry in memory.
    const entries = Object.values(expected.ids as Record<string, { versions: unknown[]; audit: unknown[] }>);
    expect(store.storageStats().historyInMemory).to.equal(entries.reduce((sum, id) => sum + id.versions.length + id.audit.length, 0));
  });

  it('a damaged snapshot in the first format is refused, as before', async () => {
    const path = join(dir, SNAPSHOT_FILE);
    const damaged = readFileSync(path);
    damaged[Math.floor(damaged.length / 2)] ^= 0x01;
    writeFileSync(path, damaged);
    const failed = await open().then(() => undefined, (error: unknown) => error);
    expect(failed).to.be.instanceOf(SnapshotCorruptError);
    expect((failed as Error).message).to.match(/digest mismatch/);
  });

  it('its first compaction writes the current format; before and after a restart the store answers the same', async () => {
    const store = await open();
    const acks = await churn(store, 60, undefined, 3, 1000);
    await store.settled();
    expect(store.storageStats().compactions).to.be.greaterThan(0);
    expect(readFileSync(join(dir, SNAPSHOT_FILE), 'utf8')).to.not.match(/^\{"snapshot":1,/);
    const after = await seen(store);
    // The fixture's policies are untouched by the churn (other ids): still exactly as written.
    expect(after.ids).to.deep.equal(expected.ids);
    await store.close();

    const again = await open();
    expect(await seen(again)).to.deep.equal(after);
    await expectAcknowledged(again, acks);
  });
});
