/**
 * The four kinds of store a layered decision runs on, for test/layers: the memory store and a single
 * Redis (one group: a refused group writes nothing), a store that has to wait and has no groups (each
 * layer alone) and a Redis Cluster (one group per hash slot). `decidedApart`: the store decides the
 * layers apart (one by one, or per slot), so a refusal has the others give back what they took.
 * Call inside a `describe`: the Redis stores (and the Cluster) are started on first use and closed after it.
 */
import type { CounterStore } from '../../src/counters/counter-store.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import type { RedisCounterStore } from '../../src/redis/redis-store.js';
import { awaitingOnly } from './async-store.js';
import { connectRedisStore, getSuiteRedis } from './counter-stores.js';
import { startRedisCluster, type RedisClusterHandle } from './redis.js';

export type LayerStoreSuite = (name: string, makeStore: () => Promise<CounterStore>, decidedApart: boolean) => void;

export function forEachLayerStore(suite: LayerStoreSuite): void {
  suite('memory store', async () => new MemoryCounterStore({ sweepIntervalMs: 0 }), false);
  suite('a store that has to wait, without groups', async () => awaitingOnly(new MemoryCounterStore({ sweepIntervalMs: 0 })), true);

  let redis: RedisCounterStore | undefined;
  after(async () => redis?.close());
  suite('single Redis', async () => {
    redis ??= connectRedisStore((await getSuiteRedis()).url);
    return redis;
  }, false);

  let cluster: RedisClusterHandle | undefined;
  let clustered: RedisCounterStore | undefined;
  after(async () => {
    await clustered?.close();
    await cluster?.stop();
  });
  suite('Redis Cluster', async () => {
    cluster ??= await startRedisCluster();
    clustered ??= connectRedisStore(cluster.addr, { commandTimeoutMs: 5_000 });
    await clustered.waitUntilReady(10_000);
    return clustered;
  }, true);
}
