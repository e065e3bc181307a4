import { expect } from 'chai';
import { Redis } from 'ioredis';
import type { PolicyChangeEvent } from '../../src/policy-store/policy-store.js';
import { RlError } from '../../src/errors.js';
import { setLogLevel } from '../../src/util/log.js';
import { RedisPolicyStore, type RedisPolicyStoreOptions } from '../../src/policy-store/redis-policy-store.js';
import { getSuiteRedis } from '../support/counter-stores.js';
import { createChange as create, removeChange as remove, updateChange as update, versionedPolicy as policy } from '../support/policies.js';
import { randomPrefix, startPrivateRedis, startRedisCluster, type RedisHandle } from '../support/redis.js';

async function eventually(what: string, withinMs: number, check: () => boolean | Promise<boolean>): Promise<number> {
  const start = Date.now();
  while (Date.now() - start <= withinMs) {
    if (await check()) return Date.now() - start;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`not within ${withinMs} ms: ${what}`);
}

describe('RedisPolicyStore', function () {
  this.timeout(30_000);
  let redis: RedisHandle;
  let prefix: string;
  const stores: RedisPolicyStore[] = [];
  const open = async (options: Partial<RedisPolicyStoreOptions> = {}) => {
    const store = await RedisPolicyStore.open({ addr: redis.url, keyPrefix: prefix, ...options });
    stores.push(store);
    return store;
  };

  before(async () => {
    redis = await getSuiteRedis();
  });
  beforeEach(() => {
    prefix = randomPrefix();
  });
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
  });

  it('commits current, version and audit atomically; every key shares one hash tag', async () => {
    const store = await open();
    const v1 = policy('b', 1);
    expect(await store.commit(create(v1))).to.deep.equal({ ok: true, revision: 1 });
    await store.commit(create(policy('a', 1)));
    expect(await store.commit(update(policy('b', 2, 20), v1))).to.deep.equal({ ok: true, revision: 3 });
    await store.commit(remove(policy('a', 1)));
    expect(store.list().map((p) => [p.policy_id, p.version])).to.deep.equal([['b', 2]]);
    expect(await store.fetch('a')).to.deep.equal({ policy: undefined, head: 1 });
    expect((await store.versions('b')).map((v) => [v.version, v.snapshot.algorithm.limit])).to.deep.equal([[1, 10], [2, 20]]);
    expect((await store.audit('a')).map((e) => e.action_type)).to.deep.equal(['create', 'delete']);
    expect(await store.versions('never')).to.deep.equal([]);
    expect(await store.audit('never')).to.deep.equal([]);

    const probe = new Redis(redis.url);
    try {
      const keys = await probe.keys(`${prefix}*`);
      expect(keys.length).to.be.greaterThan(0);
      for (const key of keys) expect(key.startsWith(`${prefix}{policies}:`), key).to.equal(true);
    } finally {
      probe.disconnect();
    }
  });

  it('refuses a stale change and writes nothing for it', async () => {
    const store = await open();
    const v1 = policy('p', 1);
    await store.commit(create(v1));
    expect(await store.commit(create(v1))).to.deep.equal({ ok: false, reason: 'conflict', head: 1, exists: true });
    await store.commit(update(policy('p', 2), v1));
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => store.commit(update(policy('p', 3, 50 + i), policy('p', 2)))));
    expect(results.filter((r) => r.ok)).to.have.length(1);
    expect((await store.audit('p')).length).to.equal(3);
    expect(store.revision()).to.equal(3);
  });

  it('a change on one node reaches another within a second (pub/sub), deletes included', async () => {
    const a = await open();
    const b = await open();
    const events: PolicyChangeEvent[] = [];
    b.onChange((e) => events.push(e));
    const v1 = policy('p', 1);
    await a.commit(create(v1));
    await eventually('B sees the create', 1000, () => b.get('p')?.version === 1);
    await a.commit(update(policy('p', 2, 99), v1));
    await eventually('B sees the update', 1000, () => b.get('p')?.algorithm.limit === 99);
    await a.commit(remove(policy('p', 2)));
    await eventually('B sees the delete', 1000, () => b.get('p') === undefined);
    expect(events.map((e) => [e.change, e.local])).to.deep.equal([['created', false], ['updated', false], ['deleted', false]]);
    expect(b.revision()).to.equal(3);
    // And back: B's change reaches A.
    await b.commit(create(policy('p', 3), 2));
    await eventually('A sees the re-create', 1000, () => a.get('p')?.version === 3);
  });

  it('the periodic revision check catches changes whose messages never arrived', async () => {
    const a = await open();
    const deaf = await open({ subscribe: false, checkIntervalMs: 150, gapGraceMs: 50 });
    await a.commit(create(policy('p', 1)));
    await eventually('the unsubscribed node reloads', 2000, () => deaf.get('p')?.version === 1);
    expect(deaf.revision()).to.equal(1);
  });

  it('a gap in message revisions triggers a full reload', async () => {
    const a = await open({ subscribe: false });
    const b = await open();
    // Changes made without publishing would be invisible to B's subscriber; simulate a lost message by
    // writing two changes and publishing only a message for the second.
    await a.commit(create(policy('x', 1)));
    await eventually('B sees x', 1000, () => b.get('x') !== undefined);
    const probe = new Redis(redis.url);
    try {
      await probe.hset(`${prefix}{policies}:current`, 'y', JSON.stringify(policy('y', 1)));
      await probe.hset(`${prefix}{policies}:heads`, 'y', '1');
      await probe.hset(`${prefix}{policies}:changed`, 'y', '2');
      await probe.hset(`${prefix}{policies}:current`, 'z', JSON.stringify(policy('z', 1)));
      await probe.hset(`${prefix}{policies}:heads`, 'z', '1');
      await probe.hset(`${prefix}{policies}:changed`, 'z', '3');
      await probe.hset(`${prefix}{policies}:meta`, 'revision', '3');
      await probe.publish(`${prefix}{policies}:changes`, JSON.stringify({ policy_id: 'z', change: 'created', version: 1, revision: 3 }));
    } finally {
      probe.disconnect();
    }
    await eventually('B reloads both', 1000, () => b.get('y') !== undefined && b.get('z') !== undefined);
    expect(b.revision()).to.equal(3);
  });

  it('seeds an empty store exactly once even when several nodes start together', async () => {
    const nodes = await Promise.all([open(), open(), open()]);
    const seeded = await Promise.all(nodes.map((n) => n.seedIfEmpty(() => [policy('f1', 1), policy('f2', 1)])));
    expect(seeded.filter(Boolean)).to.have.length(1);
    for (const n of nodes) {
      await eventually('every node has the seed', 1000, () => n.list().length === 2);
    }
    expect((await nodes[0].audit('f1')).map((e) => [e.action_type, e.changed_by])).to.deep.equal([['create', 'policy-file']]);
    // Once it has held policies, the file is not read again.
    let read = false;
    const later = await open();
    expect(await later.seedIfEmpty(() => ((read = true), []))).to.equal(false);
    expect(read).to.equal(false);
    expect(later.list().map((p) => p.policy_id)).to.deep.equal(['f1', 'f2']);
  });

  it('after SCRIPT FLUSH the commit, read_one and snapshot scripts run again from their text', async () => {
    // A Redis of its own: the NOSCRIPT answers are counted, and no other test's client may add one.
    const own = await startPrivateRedis();
    const probe = new Redis(own.url);
    const noScriptErrors = async () => Number(/^errorstat_NOSCRIPT:count=(\d+)/m.exec(String(await probe.info('errorstats')))?.[1] ?? 0);
    const mine: RedisPolicyStore[] = [];
    const openOwn = async (options: Partial<RedisPolicyStoreOptions>) => {
      mine.push(await RedisPolicyStore.open({ addr: own.url, keyPrefix: prefix, subscribe: false, ...options }));
      return mine[mine.length - 1];
    };
    try {
      // ioredis sends a script's text the first time on a connection and EVALSHA after that: run each
      // once so that, after a flush, the next call is an EVALSHA that Redis answers NOSCRIPT.
      const a = await openOwn({ checkIntervalMs: 100, gapGraceMs: 20 });
      // The writer's own revision check must not reload (and count a NOSCRIPT) during the test.
      const writer = await openOwn({ checkIntervalMs: 3_600_000 });
      await a.commit(create(policy('p', 1)));
      expect((await a.fetch('p')).policy?.version).to.equal(1);
      expect(await noScriptErrors()).to.equal(0);

      await probe.script('FLUSH');
      expect(await a.commit(update(policy('p', 2), policy('p', 1)))).to.deep.include({ ok: true, revision: 2 });
      await probe.script('FLUSH');
      expect((await a.fetch('p')).policy?.version).to.equal(2);
      await probe.script('FLUSH');
      // The writer's first commit on its connection goes in full; A sees the revision move and reloads (snapshot).
      await writer.commit(create(policy('q', 1)));
      await eventually('A reloads after the flush', 10_000, () => a.get('q') !== undefined);
      expect(a.list().map((x) => [x.policy_id, x.version])).to.deep.equal([['p', 2], ['q', 1]]);
      // Each of the three went out as EVALSHA, was answered NOSCRIPT (nothing ran) and was sent again in full.
      expect(await noScriptErrors()).to.equal(3);
    } finally {
      await Promise.all(mine.map((s) => s.close()));
      probe.disconnect();
      await own.stop();
    }
  });

  it('fails to open within its connect timeout when Redis is unreachable (never hangs)', async () => {
    let error: unknown;
    setLogLevel('silent');
    try {
      await RedisPolicyStore.open({ addr: 'redis://127.0.0.1:1', keyPrefix: prefix, connectTimeoutMs: 300 });
    } catch (e) {
      error = e;
    } finally {
      setLogLevel('info');
    }
    expect(String(error)).to.match(/not reachable within 300 ms/);
  });

  it('turns a Redis failure during a change into an unavailable error (503)', async () => {
    const store = await open({ commandTimeoutMs: 200 });
    await store.commit(create(policy('p', 1)));
    const probe = new Redis(redis.url);
    // Pause every client for a moment: the commit times out instead of hanging.
    const blocked = probe.call('CLIENT', 'PAUSE', '500', 'ALL');
    await new Promise((r) => setTimeout(r, 50));
    let error: unknown;
    try {
      await store.commit(update(policy('p', 2), policy('p', 1)));
    } catch (e) {
      error = e;
    }
    await blocked;
    probe.disconnect();
    expect(error).to.be.instanceOf(RlError);
    expect((error as RlError).kind).to.equal('unavailable');
    // Reads still answer from memory.
    expect(store.get('p')).to.not.equal(undefined);
  });

  describe('on a Redis Cluster', function () {
    this.timeout(60_000);
    let cluster: Awaited<ReturnType<typeof startRedisCluster>> | undefined;
    before(async function () {
      cluster = await startRedisCluster();
    });
    after(async () => {
      await cluster?.stop();
    });

    it('commits, reads history and follows another node', async () => {
      const a = await RedisPolicyStore.open({ addr: cluster!.addr, keyPrefix: prefix });
      const b = await RedisPolicyStore.open({ addr: cluster!.addr, keyPrefix: prefix });
      stores.push(a, b);
      const v1 = policy('p', 1);
      expect(await a.commit(create(v1))).to.deep.include({ ok: true });
      expect(await a.commit(update(policy('p', 2, 5), v1))).to.deep.include({ ok: true });
      await eventually('B follows on the cluster', 1000, () => b.get('p')?.version === 2);
      expect((await b.versions('p')).map((v) => v.version)).to.deep.equal([1, 2]);
      expect((await b.audit('p')).length).to.equal(2);
    });
  });
});
