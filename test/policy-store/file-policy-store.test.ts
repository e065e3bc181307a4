import { expect } from 'chai';
import { appendFileSync, constants, readdirSync, readFileSync, readlinkSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FilePolicyStore, JOURNAL_FILE, JournalCorruptError } from '../../src/policy-store/file-policy-store.js';
import { churn } from '../support/policy-churn.js';
import { createChange as create, removeChange as remove, updateChange as update, versionedPolicy as policy } from '../support/policies.js';
import { tempDir } from '../support/temp-dir.js';

describe('FilePolicyStore', () => {
  let dir: string;
  const stores: FilePolicyStore[] = [];
  const open = async () => {
    const store = await FilePolicyStore.open(dir, { onTornTail: () => undefined });
    stores.push(store);
    return store;
  };

  tempDir('rl-file-store-', { per: 'test', made: (path) => (dir = path), release: async () => { for (const s of stores.splice(0)) await s.close(); } });

  it('creates the data directory and an empty store', async () => {
    dir = join(dir, 'nested', 'data');
    const store = await open();
    expect(store.list()).to.deep.equal([]);
    expect(store.revision()).to.equal(0);
    expect(statSync(join(dir, JOURNAL_FILE)).size).to.equal(0);
  });

  it('commits current, version and audit together and keeps them across a restart', async () => {
    let store = await open();
    const v1 = policy('b', 1);
    const v2 = policy('b', 2, 20);
    expect(await store.commit(create(v1))).to.deep.equal({ ok: true, revision: 1 });
    expect(await store.commit(create(policy('a', 1)))).to.deep.include({ ok: true });
    expect(await store.commit(update(v2, v1))).to.deep.include({ ok: true, revision: 3 });
    expect(await store.commit(remove(policy('a', 1)))).to.deep.include({ ok: true });
    const check = async (s: FilePolicyStore) => {
      expect(s.list().map((p) => [p.policy_id, p.version])).to.deep.equal([['b', 2]]);
      expect(s.get('a')).to.equal(undefined);
      expect((await s.fetch('a')).head).to.equal(1);
      expect((await s.versions('b')).map((v) => v.snapshot.algorithm.limit)).to.deep.equal([10, 20]);
      expect((await s.audit('b')).map((e) => e.action_type)).to.deep.equal(['create', 'update']);
      expect((await s.audit('a')).map((e) => e.action_type)).to.deep.equal(['create', 'delete']);
      expect(await s.versions('nope')).to.deep.equal([]);
      expect(s.revision()).to.equal(4);
    };
    await check(store);
    await store.close();
    store = await open();
    await check(store);
  });

  it("keeps a rollback's restored version in its audit entry across a compaction and a restart", async () => {
    let store = await FilePolicyStore.open(dir, { compactMinBytes: 16 * 1024 });
    stores.push(store);
    const v1 = policy('r', 1);
    await store.commit(create(v1));
    const change = update(policy('r', 2), v1);
    await store.commit({ ...change, action: 'rollback', audit: { ...change.audit, action_type: 'rollback', restored_version: 1 } });
    const restored = async (s: FilePolicyStore) => (await s.audit('r')).map((e) => [e.action_type, e.restored_version]);
    expect(await restored(store)).to.deep.equal([['create', undefined], ['rollback', 1]]);
    // Enough other changes that the entry moves from the journal into the snapshot.
    await churn(store, 120, undefined, 3);
    await store.settled();
    expect(store.storageStats().compactions).to.be.greaterThan(0);
    expect(await restored(store)).to.deep.equal([['create', undefined], ['rollback', 1]]);
    await store.close();
    store = await open();
    expect(await restored(store)).to.deep.equal([['create', undefined], ['rollback', 1]]);
  });

  // Where the journal is written through (O_DSYNC), an append is durable once its write returns.
  if (process.platform === 'linux') {
    it('opens the journal write-through (O_DSYNC): an acknowledged append is on disk without a separate fdatasync', async () => {
      const store = await open();
      await store.commit(create(policy('p', 1)));
      const journal = join(dir, JOURNAL_FILE);
      const fd = readdirSync('/proc/self/fd').find((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`) === journal;
        } catch {
          return false; // closed since it was listed
        }
      });
      expect(fd, 'an open descriptor of the journal').to.not.equal(undefined);
      const flags = parseInt(/^flags:\s+(\d+)/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))![1], 8);
      expect(flags & constants.O_DSYNC).to.equal(constants.O_DSYNC);
      expect(flags & constants.O_APPEND).to.equal(constants.O_APPEND);
    });
  }

  it('refuses a change whose expected head or existence no longer holds', async () => {
    const store = await open();
    const v1 = policy('p', 1);
    await store.commit(create(v1));
    expect(await store.commit(create(v1))).to.deep.equal({ ok: false, reason: 'conflict', head: 1, exists: true });
    await store.commit(update(policy('p', 2), v1));
    expect(await store.commit(update(policy('p', 2), v1))).to.deep.equal({ ok: false, reason: 'conflict', head: 2, exists: true });
    expect((await store.audit('p')).length).to.equal(2);
  });

  it('serialises concurrent commits: of several based on the same head exactly one wins', async () => {
    const store = await open();
    const v1 = policy('p', 1);
    await store.commit(create(v1));
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => store.commit(update(policy('p', 2, 100 + i), v1))));
    expect(results.filter((r) => r.ok)).to.have.length(1);
    expect((await store.versions('p')).length).to.equal(2);
  });

  it('notifies listeners after each change', async () => {
    const store = await open();
    const events: unknown[] = [];
    store.onChange((e) => events.push([e.policy_id, e.change, e.version, e.revision, e.local]));
    const v1 = policy('p', 1);
    await store.commit(create(v1));
    await store.commit(update(policy('p', 2), v1));
    await store.commit(remove(policy('p', 2)));
    expect(events).to.deep.equal([
      ['p', 'created', 1, 1, true],
      ['p', 'updated', 2, 2, true],
      ['p', 'deleted', 0, 3, true],
    ]);
  });

  it('seeds only a store that never held a policy, and does not even read the file otherwise', async () => {
    let store = await open();
    let loads = 0;
    const load = () => {
      loads++;
      return [policy('f1', 1), policy('f2', 1)];
    };
    expect(await store.seedIfEmpty(load)).to.equal(true);
    expect(store.list().map((p) => p.policy_id)).to.deep.equal(['f1', 'f2']);
    expect((await store.audit('f1'))[0]).to.include({ action_type: 'create', changed_by: 'policy-file', version: 1 });
    await store.commit(remove(policy('f1', 1)));
    await store.commit(remove(policy('f2', 1)));
    await store.close();
    store = await open();
    expect(await store.seedIfEmpty(load)).to.equal(false);
    expect(loads).to.equal(1);
    expect(store.list()).to.deep.equal([]);
  });

  it('drops a torn last record (cut short, no newline) and keeps appending after the good ones', async () => {
    let store = await open();
    const v1 = policy('p', 1);
    await store.commit(create(v1));
    await store.commit(update(policy('p', 2), v1));
    await store.close();
    const path = join(dir, JOURNAL_FILE);
    const size = statSync(path).size;
    const text = readFileSync(path, 'utf8');
    const lastStart = text.lastIndexOf('\n', text.length - 2) + 1;
    // Cut the last record in half.
    truncateSync(path, lastStart + Math.floor((size - lastStart) / 2));
    store = await open();
    expect(store.get('p')!.version).to.equal(1);
    expect(statSync(path).size).to.equal(lastStart);
    expect(await store.commit(update(policy('p', 2, 30), v1))).to.deep.include({ ok: true, revision: 2 });
    await store.close();
    store = await open();
    expect(store.get('p')!.algorithm.limit).to.equal(30);
  });

  it('drops a torn tail of zeros or a complete-looking line with a bad checksum', async () => {
    let store = await open();
    await store.commit(create(policy('p', 1)));
    await store.close();
    const path = join(dir, JOURNAL_FILE);
    appendFileSync(path, Buffer.alloc(300));
    store = await open();
    expect(store.list()).to.have.length(1);
    await store.close();
    appendFileSync(path, '0123456789abcdef {"rev":2,"changes":[]}\n');
    store = await open();
    expect(store.list()).to.have.length(1);
    expect(store.revision()).to.equal(1);
  });

  it('refuses to start when a damaged record is followed by good ones (corruption, not a torn write)', async () => {
    const store = await open();
    const v1 = policy('p', 1);
    await store.commit(create(v1));
    await store.commit(update(policy('p', 2), v1));
    await store.close();
    stores.length = 0;
    const path = join(dir, JOURNAL_FILE);
    const text = readFileSync(path, 'utf8');
    writeFileSync(path, text.replace('"rev":1', '"rev":7'));
    let error: unknown;
    try {
      await FilePolicyStore.open(dir);
    } catch (e) {
      error = e;
    }
    expect(error).to.be.instanceOf(JournalCorruptError);
    expect(String((error as Error).message)).to.include('record 1');
  });
});
