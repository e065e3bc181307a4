import type { CounterStore } from '../counters/counter-store.js';
import { MemoryCounterStore } from '../counters/memory-store.js';
import type { RedisCounterStore } from '../redis/redis-store.js';
import { CounterSnapshots, removeCounterSnapshot } from '../counters/snapshot/counter-snapshots.js';
import { DecisionService, type DecisionServiceDeps } from '../decision/decision-service.js';
import type { RegionCounterStore } from '../regions/region-store.js';
import { RlqsHub } from '../lease/rlqs-hub.js';
import type { RlqsEvents } from '../lease/rlqs-stream.js';
import { systemClock, type LeaseEvents } from '../lease/types.js';
import type { ShutdownOrder } from '../lifecycle/shutdown-order.js';
import { LiveMatcher } from '../matching/live-matcher.js';
import type { RlqsStatus } from '../schema/server-info.js';
import { connectCounterStores } from './counter-stores.js';
import { openPolicies, type CorePolicies, type PolicySource, type PolicyStoreSettings } from './policy-source.js';

/**
 * What a core is built from. The server's and the sidecar's configs carry these fields under these
 * names; the embedded client fills them from its options and the settings' defaults.
 */
export interface CoreSettings extends PolicyStoreSettings {
  counterStoreTimeoutMs: number;
  leaseMaxWaitMs: number;
  /** Redis mode's deny cache: counters held (0: off) and the longest one answers. Absent: the cache's defaults. */
  denyCache?: { size: number; maxAgeMs: number };
  /** Memory mode keeps its counters in `dataDir` this often, and on drain (0: never). Absent: not kept. */
  counterSnapshotSecs?: number;
  /** Set: Envoy's rate limit quota service, whose buckets idle out after this long. Absent: no RLQS. */
  rlqsBucketIdleSecs?: number;
}

/** What the composition root brings: the shared shutdown order, where policies come from, and its observers. */
export interface CoreParts {
  shutdown: ShutdownOrder;
  policies: PolicySource;
  /** The live policy set the decisions read; a new one when absent. */
  matcher?: LiveMatcher;
  /** The decisions' recorder and counts (the server's metrics); none when absent. */
  observe?: Pick<DecisionServiceDeps, 'recorder' | 'onCounterStoreError' | 'onDenyCacheHit' | 'onLayerCompensation' | 'onIgnoredFields'>;
  leaseEvents?: (level: 'process' | 'region', policyId: string) => LeaseEvents;
  rlqsEvents?: (status: () => RlqsStatus) => RlqsEvents;
}

/** Decisions, policies, counters and leases, wired once for every composition root. */
export interface DecisionCore {
  matcher: LiveMatcher;
  policies: CorePolicies;
  /** The store decisions count in: the region's, else Redis, else memory. */
  counters: CounterStore;
  /** The Redis this process talks to (absent in memory mode). */
  redisCounters?: RedisCounterStore;
  /** With regions: the region's store, beside the global one. */
  regionCounters?: RegionCounterStore;
  memoryCounters?: MemoryCounterStore;
  /** Memory mode with snapshots on: restored already, saved periodically once `start` is called, and on close. */
  snapshots?: CounterSnapshots;
  decisions: DecisionService;
  /** Served by the gRPC transport, which drains it as its listener closes. */
  rlqs?: RlqsHub;
  /** Begins what waits until the process serves: periodic counter snapshots. */
  start(): void;
}

/**
 * Builds the core and adds what it opens to `parts.shutdown`, in the order opened, so it closes in reverse:
 * leases let go while the counter store is open, the last counter snapshot taken after them, then the
 * counters, the policies and their store. What the root adds after it (listeners) closes before all of it.
 * A failure half-way leaves what was opened in the order: the root closes it.
 */
export async function composeDecisionCore(settings: CoreSettings, parts: CoreParts): Promise<DecisionCore> {
  const { shutdown } = parts;
  const matcher = parts.matcher ?? new LiveMatcher();
  const policies = await openPolicies(settings, parts.policies, matcher, shutdown);

  // With regions the region's store serves the counters (global budgets from its pool).
  const stores = connectCounterStores({ ...settings, regionEvents: parts.leaseEvents && ((policyId) => parts.leaseEvents!('region', policyId)) });
  const memoryCounters = stores ? undefined : new MemoryCounterStore();
  const counters: CounterStore = stores?.region ?? stores?.redis ?? memoryCounters!;
  shutdown.add('counters', () => counters.close());

  // Memory mode: the counters of the last run come back before anything is decided.
  const snapshots = memoryCounters && (await openCounterSnapshots(memoryCounters, settings));
  let started = false;
  // Every decision has been answered (the listeners closed, the leases let go): the last snapshot holds them all.
  if (snapshots) shutdown.add('counter snapshots', () => started && snapshots.stop());

  const { denyCache } = settings;
  const decisions = new DecisionService({
    policies: matcher,
    counters,
    keyPrefix: settings.keyPrefix,
    ...parts.observe,
    denyCache: denyCache && denyCache.size > 0 && { capacity: denyCache.size, maxAgeMs: denyCache.maxAgeMs },
    region: settings.region?.name,
    // Process leases, and the region's units with regions: the DecisionService lets go of both (policy change, close).
    leases: { events: parts.leaseEvents && ((policyId) => parts.leaseEvents!('process', policyId)), maxWaitMs: settings.leaseMaxWaitMs, takeTimeoutMs: settings.counterStoreTimeoutMs },
  });
  // Units go back while the counter store is still open, and before the last snapshot.
  shutdown.add('leases', () => decisions.letGoLeases());

  const rlqs = rlqsHub(settings, counters, matcher, parts.rlqsEvents);
  const start = () => {
    if (started) return;
    started = true;
    snapshots?.start();
  };
  return { matcher, policies, counters, redisCounters: stores?.redis, regionCounters: stores?.region, memoryCounters, snapshots, decisions, rlqs, start };
}

/** Snapshots on: the snapshots of these memory counters, restored now; off (0): none, and the last one removed. */
async function openCounterSnapshots(counters: MemoryCounterStore, settings: CoreSettings): Promise<CounterSnapshots | undefined> {
  const { counterSnapshotSecs, dataDir } = settings;
  if (counterSnapshotSecs === undefined || dataDir === undefined) return undefined;
  if (counterSnapshotSecs === 0) return void (await removeCounterSnapshot(dataDir));
  const snapshots = new CounterSnapshots({ space: counters.keyspace, dataDir, keyPrefix: settings.keyPrefix, intervalMs: counterSnapshotSecs * 1000 });
  await snapshots.restore();
  return snapshots;
}

/**
 * Envoy's rate limit quota service over the counter store (docs/envoy.md "RLQS"), when the store can lend
 * units (memory and Redis; a region's store lends only process leases' units).
 */
function rlqsHub(settings: CoreSettings, counters: CounterStore, matcher: LiveMatcher, rlqsEvents: CoreParts['rlqsEvents']): RlqsHub | undefined {
  const { take, giveBack } = counters;
  if (settings.rlqsBucketIdleSecs === undefined || take === undefined || giveBack === undefined || settings.region !== undefined) return undefined;
  let hub: RlqsHub | undefined = undefined;
  const status = () => hub?.status() ?? { streams: 0, buckets: 0, units_held: 0 };
  hub = new RlqsHub({
    policies: matcher,
    store: { take: take.bind(counters), giveBack: giveBack.bind(counters), peek: counters.peek.bind(counters) },
    keyPrefix: settings.keyPrefix,
    clock: systemClock,
    idleMs: settings.rlqsBucketIdleSecs * 1000,
    wallNow: Date.now,
    events: rlqsEvents?.(status) ?? {},
  });
  return hub;
}
