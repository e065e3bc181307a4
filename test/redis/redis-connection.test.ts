import { expect } from 'chai';
import { Cluster, Redis } from 'ioredis';
import type { RateSpec } from '../../src/counters/counter-spec.js';
import { counterKeys } from '../../src/counters/keys.js';
import {
  CounterStoreAddressError,
  createRedisClient,
  describeAddress,
  parseCounterStoreAddress,
  reconnectDelayMs,
  redactAddress,
  type CounterStoreAddress,
} from '../../src/redis/redis-connection.js';
import { connectRedisCounterStore, type RedisCounterStore } from '../../src/redis/redis-store.js';
import { RedisPolicyStore } from '../../src/policy-store/redis-policy-store.js';
import { createChange, versionedPolicy } from '../support/policies.js';
import { command, randomPrefix, startPrivateRedis, startRedis, startRedisCluster, startRedisSentinel } from '../support/redis.js';

describe('counter store address (RL_COUNTERSTORE_ADDR)', function () {
  const ok: [string, CounterStoreAddress][] = [
    ['redis://127.0.0.1:6379', { kind: 'standalone', tls: false, host: '127.0.0.1', port: 6379, db: 0 }],
    ['redis://cache.internal', { kind: 'standalone', tls: false, host: 'cache.internal', port: 6379, db: 0 }],
    ['redis://h:6380/3', { kind: 'standalone', tls: false, host: 'h', port: 6380, db: 3 }],
    [
      'redis://user:p%40ss%3Aw0rd@h:6379/0',
      { kind: 'standalone', tls: false, host: 'h', port: 6379, db: 0, username: 'user', password: 'p@ss:w0rd' },
    ],
    ['redis://:secret@h:1', { kind: 'standalone', tls: false, host: 'h', port: 1, db: 0, password: 'secret' }],
    ['redis://secret@h:1', { kind: 'standalone', tls: false, host: 'h', port: 1, db: 0, password: 'secret' }],
    ['REDIS://H:2', { kind: 'standalone', tls: false, host: 'H', port: 2, db: 0 }],
    ['rediss://u:p@redis.example.com:6380', {
      kind: 'standalone', tls: true, host: 'redis.example.com', port: 6380, db: 0, username: 'u', password: 'p',
    }],
    ['redis://[::1]:6379/2', { kind: 'standalone', tls: false, host: '::1', port: 6379, db: 2 }],
    ['localhost:6379', { kind: 'standalone', tls: false, host: 'localhost', port: 6379, db: 0 }],
    ['10.0.0.5:7000', { kind: 'standalone', tls: false, host: '10.0.0.5', port: 7000, db: 0 }],
    ['[fe80::1%eth0]:7000', { kind: 'standalone', tls: false, host: 'fe80::1%eth0', port: 7000, db: 0 }],
    ['  redis-host:6379  ', { kind: 'standalone', tls: false, host: 'redis-host', port: 6379, db: 0 }],
    ['redis+cluster://h1:7000,h2:7001,[::1]:7002', {
      kind: 'cluster', tls: false,
      nodes: [{ host: 'h1', port: 7000 }, { host: 'h2', port: 7001 }, { host: '::1', port: 7002 }],
    }],
    ['redis+cluster://:pw@h1:7000', { kind: 'cluster', tls: false, nodes: [{ host: 'h1', port: 7000 }], password: 'pw' }],
    ['rediss+cluster://h1:7000', { kind: 'cluster', tls: true, nodes: [{ host: 'h1', port: 7000 }] }],
    ['redis+sentinel://s1:26379,s2:26380/mymaster', {
      kind: 'sentinel', tls: false, masterName: 'mymaster', db: 0,
      sentinels: [{ host: 's1', port: 26379 }, { host: 's2', port: 26380 }],
    }],
    ['redis+sentinel://u:p@s1:26379/my-master.1/4', {
      kind: 'sentinel', tls: false, masterName: 'my-master.1', db: 4, username: 'u', password: 'p',
      sentinels: [{ host: 's1', port: 26379 }],
    }],
    ['redis+unix:///var/run/redis/redis.sock', { kind: 'unix', tls: false, path: '/var/run/redis/redis.sock', db: 0 }],
    ['redis+unix:///tmp/r.sock?db=3', { kind: 'unix', tls: false, path: '/tmp/r.sock', db: 3 }],
    ['REDIS+UNIX:///tmp/my%20redis.sock', { kind: 'unix', tls: false, path: '/tmp/my redis.sock', db: 0 }],
    ['redis+unix://:pw@/tmp/r.sock', { kind: 'unix', tls: false, path: '/tmp/r.sock', db: 0, password: 'pw' }],
  ];
  for (const [addr, expected] of ok) {
    it(`parses ${addr.trim()}`, function () {
      expect(parseCounterStoreAddress(addr)).to.deep.equal(expected);
    });
  }

  const bad: [string, RegExp][] = [
    ['', /empty/],
    ['   ', /empty/],
    ['http://h:6379', /unknown scheme "http:\/\/"/],
    ['memcached://h:11211', /unknown scheme/],
    ['redis:h:6379', /neither host:port nor/],
    ['redis://', /needs a host/],
    ['redis://user:pw@', /needs a host/],
    ['redis://h:0', /bad port "0"/],
    ['redis://h:65536', /bad port "65536"/],
    ['redis://h:http', /bad port "http"/],
    ['redis://h:', /bad port ""/],
    ['h:6379:1', /must be in brackets/],
    ['::1', /must be in brackets/],
    ['redis://[::1', /unclosed "\["/],
    ['redis://[zz::1]:6379', /bad IPv6 address/],
    ['redis://h:6379/x', /bad database "\/x"/],
    ['redis://h:6379/1/2', /bad database/],
    ['redis://h_:6379?timeout=5', /query strings/],
    ['redis://h1:1,h2:2', /takes one host/],
    ['redis://bad host:1', /whitespace/],
    ['redis://b@d!:1', /bad host "d!"/],
    ['redis+cluster://', /needs a host/],
    ['redis+cluster://h1:1,,h2:2', /empty cluster node address/],
    ['redis+cluster://h1:1,h1:1', /listed twice/],
    ['redis+cluster://h1:1/0', /takes no path/],
    ['redis+sentinel://s1:26379', /needs the master name/],
    ['redis+sentinel://s1:26379/', /needs the master name/],
    ['redis+sentinel://s1:26379/m/x', /bad database/],
    ['redis+sentinel://s1:26379/m/1/2', /unexpected path/],
    ['redis+sentinel://s1:26379/bad%20name', /bad master name/],
    ['redis://u:%zz@h:1', /bad percent-encoding in the password/],
    ['redis://u:@h:1', /password after ":" is empty/],
    ['host/0', /neither host:port nor/],
    ['redis+unix://', /absolute socket path/],
    ['redis+unix://tmp/r.sock', /absolute socket path/],
    ['redis+unix://h:6379/tmp/r.sock', /absolute socket path/],
    ['redis+unix:///', /names a directory/],
    ['redis+unix:///tmp/', /names a directory/],
    ['redis+unix:///tmp/r.sock?db=x', /bad database "\?db=x" \(a number such as \?db=0\)/],
    ['redis+unix:///tmp/r.sock?db=1&timeout=5', /takes only \?db=N/],
    ['redis+unix:///tmp/r.sock?x=1', /takes only \?db=N/],
    ['redis+unix:///tmp/r.sock#f', /fragments/],
    [`redis+unix:///${'d'.repeat(120)}.sock`, /longer than 107 bytes/],
  ];
  for (const [addr, problem] of bad) {
    it(`rejects ${JSON.stringify(addr)}`, function () {
      expect(() => parseCounterStoreAddress(addr)).to.throw(Error, /^RL_COUNTERSTORE_ADDR: /).that.satisfies(
        (err: Error) => problem.test(err.message),
      );
    });
  }

  it('never puts a password in an error message', function () {
    for (const addr of ['redis://u:s3cr3t%zz@h:1', 'redis://u:s3cr3t@h:99999', 'redis://u:s3cr3t@h:1/x', 'x:s3cr3t@h/1']) {
      let message = '';
      try {
        parseCounterStoreAddress(addr);
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message, addr).to.match(/^RL_COUNTERSTORE_ADDR: /);
      expect(message, addr).not.to.include('s3cr3t');
    }
  });

  it('redacts passwords for logs', function () {
    expect(redactAddress('redis://user:s3cr3t@h:6379/1')).to.equal('redis://user:***@h:6379/1');
    expect(redactAddress('redis://s3cr3t@h:6379')).to.equal('redis://***@h:6379');
    expect(redactAddress('redis+sentinel://:p@w@s1:1,s2:2/m')).to.equal('redis+sentinel://:***@s1:1,s2:2/m');
    expect(redactAddress('redis://h:6379/0')).to.equal('redis://h:6379/0');
    expect(redactAddress('h:6379')).to.equal('h:6379');
    const described = describeAddress(parseCounterStoreAddress('rediss://u:s3cr3t@h:6380/2'));
    expect(described).to.equal('redis h:6380 db 2 over TLS (with credentials)');
    expect(describeAddress(parseCounterStoreAddress('redis+cluster://[::1]:1,h:2'))).to.equal('redis cluster [::1]:1,h:2');
  });

  it('reconnects with a bounded backoff', function () {
    expect([1, 2, 3, 9, 10, 11, 1000].map(reconnectDelayMs)).to.deep.equal([50, 100, 150, 450, 500, 500, 500]);
  });

  it('builds fail-fast clients of the right kind', function () {
    const single = createRedisClient('redis://u:p@127.0.0.1:1/3', { commandTimeoutMs: 42 }) as Redis;
    const sentinel = createRedisClient('redis+sentinel://127.0.0.1:1/m') as Redis;
    const cluster = createRedisClient('redis+cluster://127.0.0.1:1,127.0.0.1:2') as Cluster;
    for (const c of [single, sentinel, cluster]) c.on('error', () => {});
    try {
      expect(single).to.be.instanceOf(Redis);
      expect(single.options).to.include({
        host: '127.0.0.1', port: 1, db: 3, username: 'u', password: 'p',
        commandTimeout: 42, enableOfflineQueue: false, maxRetriesPerRequest: 0, autoResendUnfulfilledCommands: false,
        enableAutoPipelining: true,
      });
      expect(sentinel.options).to.include({ name: 'm', role: 'master', enableOfflineQueue: false, commandTimeout: 100 });
      expect(sentinel.options.sentinels).to.deep.equal([{ host: '127.0.0.1', port: 1 }]);
      expect(cluster).to.be.instanceOf(Cluster);
      expect(cluster.options).to.include({ enableOfflineQueue: false, retryDelayOnFailover: 0, enableAutoPipelining: true });
      expect(cluster.options.redisOptions).to.include({ commandTimeout: 100, maxRetriesPerRequest: 0 });
    } finally {
      for (const c of [single, sentinel, cluster]) c.disconnect();
    }
  });

  it('perCommandTimeout: false leaves command deadlines to the caller, still bounding Sentinel and slot refreshes', function () {
    const single = createRedisClient('redis://127.0.0.1:1', { commandTimeoutMs: 42, perCommandTimeout: false }) as Redis;
    const sentinel = createRedisClient('redis+sentinel://127.0.0.1:1/m', { commandTimeoutMs: 700, perCommandTimeout: false }) as Redis;
    const cluster = createRedisClient('redis+cluster://127.0.0.1:1', { commandTimeoutMs: 1500, perCommandTimeout: false }) as Cluster;
    for (const c of [single, sentinel, cluster]) c.on('error', () => {});
    try {
      expect(single.options.commandTimeout).to.equal(undefined);
      expect(sentinel.options.commandTimeout).to.equal(undefined);
      expect(sentinel.options.sentinelCommandTimeout).to.equal(700);
      expect(cluster.options.redisOptions?.commandTimeout).to.equal(undefined);
      expect(cluster.options.slotsRefreshTimeout).to.equal(1500);
    } finally {
      for (const c of [single, sentinel, cluster]) c.disconnect();
    }
  });

  it('the counter store\'s own client: no auto-pipelining and no per-command timer (the store batches and bounds each call)', async function () {
    const store = connectRedisCounterStore('redis://127.0.0.1:1', { commandTimeoutMs: 42 });
    store.onError(() => {});
    try {
      expect((store.client as Redis).options).to.include({ enableAutoPipelining: false, commandTimeout: undefined });
    } finally {
      await store.close();
    }
  });

  it('connectRedisCounterStore rejects a bad address naming the variable', function () {
    expect(() => connectRedisCounterStore('redis://h:0')).to.throw(/^RL_COUNTERSTORE_ADDR: bad port/);
  });

  it('names the variable it is given (one parser for every store address)', function () {
    expect(() => parseCounterStoreAddress('redis+unix://', 'RL_GLOBAL_COUNTERSTORE_ADDR'))
      .to.throw(CounterStoreAddressError, /^RL_GLOBAL_COUNTERSTORE_ADDR: redis\+unix:\/\/ takes an absolute socket path/)
      .with.property('problem').that.matches(/^redis\+unix/);
    expect(describeAddress(parseCounterStoreAddress('redis+unix://u:pw@/tmp/r.sock?db=2'))).to.equal('redis unix socket /tmp/r.sock db 2 (with credentials)');
  });
});

describe('counter store connections to real Redis', function () {
  this.timeout(60_000);
  const spec: RateSpec = { type: 'fixed_window', limit: 3, windowMs: 60_000 };

  async function consumeThree(store: RedisCounterStore): Promise<number[]> {
    await store.waitUntilReady(10_000);
    const keys = counterKeys(randomPrefix(), 'conn-test', spec, ['x']);
    const remaining: number[] = [];
    for (let i = 0; i < 4; i++) remaining.push((await store.consume(keys, spec, 1)).remaining);
    return remaining;
  }

  it('connects to a single server (host:port and redis://)', async function () {
    const redis = await startRedis();
    try {
      for (const addr of [`${redis.host}:${redis.port}`, redis.url]) {
        const store = connectRedisCounterStore(addr);
        try {
          expect(await consumeThree(store)).to.deep.equal([2, 1, 0, 0]);
          expect(store.isHealthy()).to.equal(true);
        } finally {
          await store.close();
        }
      }
    } finally {
      await redis.stop();
    }
  });

  it('connects over a Unix socket (redis+unix://, ?db=N), the counter store and the policy store', async function () {
    const redis = await startPrivateRedis({ unixSocket: true });
    try {
      const store = connectRedisCounterStore(`redis+unix://${redis.socketPath}?db=2`);
      try {
        expect(await consumeThree(store)).to.deep.equal([2, 1, 0, 0]);
        // Over the socket, into db 2: the server saw a Unix-socket client, and the keys are in db 2.
        const clients = String(await command(redis.host, redis.port, ['CLIENT', 'LIST']));
        expect(clients).to.match(new RegExp(`addr=${redis.socketPath}:0 .*name=rl-counter-store .*flags=U db=2 `));
        expect(String(await command(redis.host, redis.port, ['INFO', 'keyspace']))).to.match(/^db2:keys=\d+/m);
      } finally {
        await store.close();
      }
      const policies = await RedisPolicyStore.open({ addr: `redis+unix://${redis.socketPath}`, keyPrefix: randomPrefix() });
      try {
        expect(await policies.commit(createChange(versionedPolicy('p1', 1)))).to.deep.include({ ok: true });
        expect((await policies.fetch('p1')).policy?.version).to.equal(1);
      } finally {
        await policies.close();
      }
    } finally {
      await redis.stop();
    }
  });

  it('connects through Sentinel (redis+sentinel://)', async function () {
    const sentinel = await startRedisSentinel();
    try {
      const store = connectRedisCounterStore(sentinel.addr, { commandTimeoutMs: 1000 });
      try {
        expect(await consumeThree(store)).to.deep.equal([2, 1, 0, 0]);
      } finally {
        await store.close();
      }
    } finally {
      await sentinel.stop();
    }
  });

  it('connects to a Redis Cluster (redis+cluster://) and survives SCRIPT FLUSH on every node', async function () {
    const cluster = await startRedisCluster();
    try {
      const store = connectRedisCounterStore(cluster.addr, { commandTimeoutMs: 1000 });
      try {
        expect(await consumeThree(store)).to.deep.equal([2, 1, 0, 0]);
        // Keys of many counters spread over the slots of all three masters; the sliding log's two
        // keys share a hash tag, so each script runs on one node.
        const log: RateSpec = { type: 'sliding_window_log', limit: 5, windowMs: 60_000 };
        const prefix = randomPrefix();
        const counters = Array.from({ length: 30 }, (_, i) => counterKeys(prefix, 'spread', log, [String(i)]));
        for (const keys of counters) expect((await store.consume(keys, log, 2)).remaining).to.equal(3);
        for (const node of cluster.nodes) {
          const admin = new Redis({ host: node.host, port: node.port });
          await admin.script('FLUSH');
          admin.disconnect();
        }
        const after = await Promise.all(counters.map((keys) => store.consume(keys, log, 1)));
        expect(after.map((r) => r.remaining)).to.deep.equal(counters.map(() => 2));
      } finally {
        await store.close();
      }
    } finally {
      await cluster.stop();
    }
  });
});
