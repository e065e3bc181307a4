/**
 * The fields most policies do not have (`source_ip_prefix`, `budget`, `budget_shares`, `lease`) survive every way a
 * stored policy is made and read back: a policy file, PATCH (merged, removed with null), rollback,
 * the file store's journal and its snapshot after a compaction, and the Redis policy store read by
 * another instance. stored-policy.ts builds and revives policies field by field, so a field it forgot
 * would vanish silently here.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { FilePolicyStore } from '../../src/policy-store/file-policy-store.js';
import type { PolicyStore } from '../../src/policy-store/policy-store.js';
import { RedisPolicyStore } from '../../src/policy-store/redis-policy-store.js';
import { parsePolicyDocument } from '../../src/policy/policy-file.js';
import { PolicyService } from '../../src/policy-service/policy-service.js';
import { getSuiteRedis } from '../support/counter-stores.js';
import { randomPrefix } from '../support/redis.js';

const GIVEN = { source_ip_prefix: { v4: 24, v6: 48 }, budget: 'global', budget_shares: { eu: 3, us: 1, '*': 1 }, lease: { max_units: 50, max_hold: '2s' } };
const FILE = {
  policies: [{ policy_id: 'net', scope: { service: 'api', source_ip: '*' }, algorithm: { type: 'fixed_window', limit: 10, window: '1m' }, ...GIVEN }],
};

/** Everything a reader of the store sees, to compare two instances. */
async function everything(store: PolicyStore) {
  return { list: store.list(), fetched: await store.fetch('net'), versions: await store.versions('net'), audit: await store.audit('net') };
}

/** Seeds from the policy file, then PATCHes and rolls back through the service; checks each answer. */
async function change(store: PolicyStore): Promise<void> {
  let clock = Date.UTC(2030, 0, 1);
  const service = new PolicyService({ store, matcher: new LiveMatcher(), now: () => (clock += 1000) });
  try {
    expect(await store.seedIfEmpty(() => parsePolicyDocument('policies.json', FILE))).to.equal(true);
    expect(service.get('net')).to.deep.include(GIVEN);
    // A merge patch merges into the objects and keeps what it does not name.
    const merged = await service.patch('net', { source_ip_prefix: { v6: 64 }, lease: { max_units: 7 } }, 'alice');
    expect(merged).to.deep.include({ version: 2, source_ip_prefix: { v4: 24, v6: 64 }, budget: 'global', budget_shares: GIVEN.budget_shares, lease: { max_units: 7, max_hold: '2s' } });
    const removed = await service.patch('net', { source_ip_prefix: null, budget: null, budget_shares: null, lease: null }, 'bob');
    expect(removed.version).to.equal(3);
    for (const field of Object.keys(GIVEN)) expect(removed, field).to.not.have.property(field);
    expect(await service.rollback('net', { version: 1 }, 'carol')).to.deep.include({ version: 4, ...GIVEN });
    const versions = await service.versions('net');
    expect(versions.map((v) => [v.version, v.snapshot.source_ip_prefix, v.snapshot.budget, v.snapshot.lease])).to.deep.equal([
      [1, GIVEN.source_ip_prefix, 'global', GIVEN.lease],
      [2, { v4: 24, v6: 64 }, 'global', { max_units: 7, max_hold: '2s' }],
      [3, undefined, undefined, undefined],
      [4, GIVEN.source_ip_prefix, 'global', GIVEN.lease],
    ]);
  } finally {
    service.close();
  }
}

describe('source_ip_prefix, budget and lease round-trip through every store', function () {
  this.timeout(30_000);

  it('the file store: through its journal, and through its snapshot after a compaction', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-stored-fields-'));
    try {
      let store = await FilePolicyStore.open(dir);
      await change(store);
      const written = await everything(store);
      await store.close();

      // Replayed from the journal.
      store = await FilePolicyStore.open(dir, { compactMinBytes: 1 });
      expect(await everything(store)).to.deep.equal(written);
      // One more change compacts the whole state into a snapshot.
      await store.seedIfEmpty(() => []);
      const service = new PolicyService({ store });
      await service.create({ policy_id: 'other', algorithm: { type: 'fixed_window', limit: 1, window: '1s' } }, 'dave');
      service.close();
      await store.settled();
      expect(store.storageStats().compactions).to.equal(1);
      const compacted = await everything(store);
      await store.close();

      store = await FilePolicyStore.open(dir);
      expect(store.storageStats()).to.deep.include({ journalRecords: 0 });
      expect(await everything(store)).to.deep.equal(compacted);
      expect(compacted.fetched).to.deep.equal(written.fetched);
      expect(compacted.versions).to.deep.equal(written.versions);
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the Redis policy store: read back by another instance', async () => {
    const redis = await getSuiteRedis();
    const keyPrefix = randomPrefix();
    const writer = await RedisPolicyStore.open({ addr: redis.url, keyPrefix });
    const reader = await RedisPolicyStore.open({ addr: redis.url, keyPrefix });
    try {
      await change(writer);
      const written = await everything(writer);
      const again = await RedisPolicyStore.open({ addr: redis.url, keyPrefix });
      try {
        expect(await everything(again)).to.deep.equal(written);
      } finally {
        await again.close();
      }
      // An instance open all along reads each change as it is told of it (another path than a load).
      const deadline = Date.now() + 20_000; // a hang guard only
      while (reader.revision() < writer.revision()) {
        if (Date.now() > deadline) throw new Error('the reader never caught up');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(await everything(reader)).to.deep.equal(written);
    } finally {
      await Promise.all([writer.close(), reader.close()]);
    }
  });
});
