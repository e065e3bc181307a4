import type { RegionConfig } from '../config.js';
import { connectRedisCounterStore, type RedisCounterStore } from '../redis/redis-store.js';
import { RegionPool } from '../regions/region-pool.js';
import { RegionCounterStore } from '../regions/region-store.js';
import type { LeaseEvents } from '../lease/types.js';

/** The counter stores a server or sidecar connects: `redis` is the Redis it talks to; `region ?? redis` serves its decisions. */
export interface CounterStores {
  redis: RedisCounterStore;
  /** With regions: the region's store (its own Redis, and the global store for the global budgets). */
  region?: RegionCounterStore;
}

/** RL_COUNTERSTORE_ADDR's Redis, with regions as the region's store beside the global one; undefined without an address (memory). */
export function connectCounterStores(options: {
  counterStoreAddr?: string;
  counterStoreTimeoutMs: number;
  region?: RegionConfig;
  leaseMaxWaitMs: number;
  regionEvents?: (policyId: string) => LeaseEvents;
}): CounterStores | undefined {
  const { counterStoreAddr, counterStoreTimeoutMs, region } = options;
  if (!counterStoreAddr) return undefined;
  const redis = connectRedisCounterStore(counterStoreAddr, { commandTimeoutMs: counterStoreTimeoutMs });
  if (!region) return { redis };
  const global = connectRedisCounterStore(region.globalStoreAddr, { commandTimeoutMs: region.globalTimeoutMs, connectionName: 'rl-global-counter-store' });
  const regionStore = new RegionCounterStore({
    regional: redis,
    pool: new RegionPool(redis),
    global,
    globalTimeoutMs: region.globalTimeoutMs,
    regionalTimeoutMs: counterStoreTimeoutMs,
    maxWaitMs: options.leaseMaxWaitMs,
    events: options.regionEvents,
    region: region.name,
  });
  return { redis, region: regionStore };
}
