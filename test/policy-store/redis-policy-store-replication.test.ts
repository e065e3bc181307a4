/**
 * The policy store acknowledges a change only once a replica has it (WAIT), so a failover cannot lose
 * an acknowledged change (issue 14). The Cluster failover itself is in test/redis/cluster-failover.test.ts.
 */
import { expect } from 'chai';
import { RlError } from '../../src/errors.js';
import { clusterReplicaCount, RedisPolicyStore } from '../../src/policy-store/redis-policy-store.js';
import { setLogLevel } from '../../src/util/log.js';
import { createChange, versionedPolicy } from '../support/policies.js';
import { command, randomPrefix, startPrivateRedisWithReplica, type RedisWithReplicaHandle } from '../support/redis.js';

describe('policy store on a primary with a replica (redis://)', function () {
  this.timeout(30_000);
  let redis: RedisWithReplicaHandle;
  let store: RedisPolicyStore | undefined;

  before(async () => {
    setLogLevel('silent');
    redis = await startPrivateRedisWithReplica();
  });
  after(async () => {
    await store?.close();
    await redis?.stop();
    setLogLevel('info');
  });

  it('acknowledges a change once the replica has it, and answers 503 when no replica confirms in time', async () => {
    const prefix = randomPrefix();
    store = await RedisPolicyStore.open({ addr: redis.primary.url, keyPrefix: prefix, replicaAckTimeoutMs: 300 });
    const current = `${prefix}{policies}:current`;

    expect(await store.commit(createChange(versionedPolicy('p1', 1)))).to.deep.include({ ok: true });
    // Acknowledged means the replica has applied it: read it there straight away.
    expect(await command('127.0.0.1', redis.replicaPort, ['HEXISTS', current, 'p1'])).to.equal(1);

    redis.freezeReplica();
    let unconfirmed: unknown;
    try {
      unconfirmed = await store.commit(createChange(versionedPolicy('p2', 1))).catch((error: unknown) => error);
    } finally {
      redis.thawReplica();
    }
    expect(unconfirmed).to.be.instanceOf(RlError).with.property('kind', 'unavailable');
    expect((unconfirmed as RlError).message).to.match(/saved on the Redis primary but no replica confirmed it within 300 ms/);
    // The primary has it, as the message says, and the replica catches up once it runs again.
    expect((await store.fetch('p2')).policy?.version).to.equal(1);

    expect(await store.commit(createChange(versionedPolicy('p3', 1)))).to.deep.include({ ok: true });
    expect(await command('127.0.0.1', redis.replicaPort, ['HMGET', current, 'p2', 'p3']).then((r) => (r as unknown[]).every((v) => v !== null))).to.equal(true);
  });

  it('after SCRIPT FLUSH (EVALSHA answered NOSCRIPT) the commit goes again with WAIT behind it: acknowledged means the replica has it', async () => {
    const prefix = randomPrefix();
    const flushed = await RedisPolicyStore.open({ addr: redis.primary.url, keyPrefix: prefix });
    try {
      expect(await flushed.commit(createChange(versionedPolicy('p1', 1)))).to.deep.include({ ok: true });
      expect(await command(redis.primary.host, redis.primary.port, ['SCRIPT', 'FLUSH'])).to.equal('OK');
      expect(await flushed.commit(createChange(versionedPolicy('p2', 1)))).to.deep.include({ ok: true });
      expect(await command('127.0.0.1', redis.replicaPort, ['HEXISTS', `${prefix}{policies}:current`, 'p2'])).to.equal(1);
      expect((await flushed.fetch('p2')).policy?.version).to.equal(1);
    } finally {
      await flushed.close();
    }
  });
});

describe('clusterReplicaCount (CLUSTER NODES as the primary sees it)', () => {
  const node = (id: string, flags: string, master = '-') => `${id} 127.0.0.1:7000@17000 ${flags} ${master} 0 0 1 connected`;

  it('counts the replicas of "myself" that are not failed, connected or not', () => {
    const text = [
      node('m1', 'myself,master'),
      node('m2', 'master'),
      node('r1', 'slave', 'm1'),
      node('r2', 'slave,fail?', 'm1'), // suspected only: it may still be promoted
      node('r3', 'slave,fail', 'm1'), // failed: it will not be
      node('r4', 'slave', 'm2'),
      '',
    ].join('\n');
    expect(clusterReplicaCount(text)).to.equal(2);
  });

  it('is 0 for a primary without replicas, and for a node that is itself a replica', () => {
    expect(clusterReplicaCount([node('m1', 'myself,master'), node('r1', 'slave', 'm2')].join('\n'))).to.equal(0);
    expect(clusterReplicaCount([node('m1', 'master'), node('r1', 'myself,slave', 'm1')].join('\n'))).to.equal(0);
  });
});
