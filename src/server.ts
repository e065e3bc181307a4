import http from 'node:http';
import https from 'node:https';
import * as grpc from '@grpc/grpc-js';
import { Authenticator } from './auth/authenticator.js';
import type { HttpTimeouts, ServerConfig } from './config.js';
import type { CounterStore } from './counters/counter-store.js';
import { MemoryCounterStore } from './counters/memory-store.js';
import { CounterSnapshots, removeCounterSnapshot } from './counters/snapshot/counter-snapshots.js';
import { DecisionService } from './decision/decision-service.js';
import { RlqsHub } from './lease/rlqs-hub.js';
import { systemClock } from './lease/types.js';
import { grpcAuthenticate } from './grpc/auth.js';
import { bindGrpcServer, createGrpcServer, shutdownGrpcServer } from './grpc/server.js';
import { createHttpListener } from './http/app.js';
import { HttpAuth } from './http/auth-guard.js';
import { Readiness } from './lifecycle/readiness.js';
import { analyticsRoutes } from './http/routes/analytics.js';
import { dashboardAssetRoutes, dashboardStreamRoutes } from './http/routes/dashboard.js';
import { DashboardHub } from './observability/dashboard-hub.js';
import { regionStatus } from './observability/region-status.js';
import { infoRoutes, packageVersion } from './http/routes/info.js';
import { metricsRoutes, type MetricsSource } from './http/routes/metrics.js';
import { openApiRoutes } from './http/routes/openapi.js';
import { policyRoutes } from './http/routes/policies.js';
import { InvalidationNotifier } from './invalidation/notifier.js';
import { Analytics } from './observability/analytics.js';
import { OrgView } from './observability/org-view.js';
import { DeniedIdentities, bothRecorders } from './observability/denied-identities.js';
import { Metrics } from './observability/metrics.js';
import { ObservabilityRecorder } from './observability/recorder.js';
import { startTracing } from './observability/start-tracing.js';
import { FilePolicyStore } from './policy-store/file-policy-store.js';
import { LiveMatcher } from './matching/live-matcher.js';
import { loadPolicyFile } from './policy/policy-file.js';
import { PolicyService } from './policy-service/policy-service.js';
import { Explainer } from './decision/explainer.js';
import { explainRoutes } from './http/routes/explain.js';
import type { PolicyStore } from './policy-store/policy-store.js';
import { RedisPolicyStore } from './policy-store/redis-policy-store.js';
import { connectCounterStores } from './composition/counter-stores.js';
import { closeGracefully, listen } from './lifecycle/listening.js';
import { redactAddress } from './redis/redis-connection.js';
import { grpcServerCredentials, httpsServerOptions, loadTlsMaterial } from './tls.js';
import { log } from './util/log.js';

export interface RunningServer {
  httpPort: number;
  grpcPort: number;
  readiness: Readiness;
  policies: PolicyService;
  /**
   * Fail readiness but keep answering for RL_SHUTDOWN_DELAY_SECS, then stop accepting, let in-flight
   * requests finish (bounded by RL_DRAIN_SECS) and release resources.
   */
  drain(): Promise<void>;
}

/** What a composition root may put in place of the single-process default. */
export interface ServerHooks {
  /** What /metrics answers, given this process's own metrics: a cluster worker answers for every worker (src/workers). */
  metricsSource?: (local: Metrics) => MetricsSource;
}

/** Builds every component from the typed config, listens on HTTP and gRPC, and reports ready. */
export async function startServer(config: ServerConfig, hooks: ServerHooks = {}): Promise<RunningServer> {
  // Everything that can refuse the config is checked before any store is opened or port taken.
  const tls = config.tls.enabled ? loadTlsMaterial(config.tls) : undefined;
  const authenticator = new Authenticator(config.auth);
  const readiness = new Readiness();

  const store = await openPolicyStore(config);
  const closers: (() => unknown)[] = [() => store.close()];
  const closeAll = () => Promise.allSettled(closers.reverse().map((close) => close()));
  try {
    // Off without an OTLP endpoint: then nothing of OpenTelemetry is loaded and no transport calls it.
    const tracing = await startTracing(config.tracing && { ...config.tracing, serviceVersion: packageVersion() });
    if (tracing) closers.push(() => tracing.shutdown());
    const seeded = await seedPolicies(store, config.policyFile);
    const matcher = new LiveMatcher();
    // Keeps the matcher in sync with every local and remote change from here on.
    const policies = new PolicyService({ store, matcher, platformLayers: config.platformLayers });
    closers.push(() => policies.close());

    const metrics = new Metrics({ labelCap: config.metricsLabelCap });
    // Per-organisation counts only where some credential can be limited to organisations (they cost a second count).
    const analytics = new Analytics({ byOrg: authenticator.mayLimitOrgs });
    const viewOf = (orgs: readonly string[]) => new OrgView(orgs, matcher, config.platformLayers);
    // Who is being limited, for the dashboard: touched by denied decisions only.
    const deniedIdentities = new DeniedIdentities(matcher);
    // With regions the region's store serves the counters (global budgets from its pool); its per-master
    // health is the regional Redis connection's.
    const stores = connectCounterStores({ ...config, regionEvents: (policyId) => metrics.leaseEvents('region', policyId) });
    const regionCounters = stores?.region;
    const redisCounters = stores?.redis;
    const memoryCounters = stores ? undefined : new MemoryCounterStore();
    const counters: CounterStore = regionCounters ?? redisCounters ?? memoryCounters!;
    closers.push(() => counters.close());
    // Memory mode: the counters of the last run come back before anything is decided.
    const snapshots = memoryCounters && (await openCounterSnapshots(memoryCounters, config));
    const counterStoreMasters = redisCounters && (() => redisCounters.health.states());
    if (counterStoreMasters) metrics.watchCounterStoreMasters(counterStoreMasters);
    const decisions = new DecisionService({
      policies: matcher,
      counters,
      keyPrefix: config.keyPrefix,
      recorder: bothRecorders(new ObservabilityRecorder(metrics, analytics), deniedIdentities),
      onCounterStoreError: () => metrics.countCounterStoreError(),
      onDenyCacheHit: () => metrics.countDenyCacheHit(),
      onLayerCompensation: (policyId) => metrics.countLayerCompensation(policyId),
      onIgnoredFields: (count) => metrics.countIgnoredFields(count),
      denyCache: config.denyCache.size > 0 && { capacity: config.denyCache.size, maxAgeMs: config.denyCache.maxAgeMs },
      region: config.region?.name,
      // Process leases, and the region's units with regions: DecisionService lets go of both (policy
      // change, drain); the holders report to the metrics.
      leases: { events: (policyId) => metrics.leaseEvents('process', policyId), maxWaitMs: config.leaseMaxWaitMs, takeTimeoutMs: config.counterStoreTimeoutMs },
    });

    const rlqs = rlqsHub(config, counters, matcher, metrics);

    const regionName = config.region?.name;
    const region = regionCounters && regionName !== undefined ? () => regionStatus(regionName, regionCounters.globalStoreHealth(), regionCounters.shareStatus()) : undefined;
    // Ticks from now on, viewers or not: a dashboard opened later starts with the last hour.
    const hub = new DashboardHub({ analytics, metrics, policies, counters, readiness, deniedIdentities, region, viewOf, rlqs: rlqs && (() => rlqs.status()) });
    hub.start();
    closers.push(() => hub.stop());

    const notifier = invalidationNotifier(config, metrics);
    if (notifier) {
      closers.push(() => notifier.close());
      // Only the node that made a change tells the sidecars; the others learn it from the store.
      store.onChange((event) => {
        if (event.local) notifier.notify({ policy_id: event.policy_id, change: event.change, version: event.version });
      });
    }

    const listener = createHttpListener({
      decisions,
      readiness,
      maxBodyBytes: config.maxBodyBytes,
      auth: new HttpAuth(authenticator, config.auth),
      // The dashboard's static files and the API reference describe no data: no credentials needed.
      publicRouters: [dashboardAssetRoutes(), openApiRoutes(packageVersion())],
      tracing,
      routers: [
        policyRoutes(policies, tracing),
        explainRoutes(new Explainer(matcher, policies)),
        analyticsRoutes(analytics, viewOf),
        metricsRoutes(hooks.metricsSource?.(metrics) ?? metrics),
        dashboardStreamRoutes(hub),
        infoRoutes(
          {
            version: packageVersion(),
            counters: config.counterStoreAddr ? 'redis' : 'memory',
            policy_store: config.counterStoreAddr ? 'redis' : 'file',
            auth: (config.auth.enabled && config.auth.mode) || 'off',
            tls: Boolean(tls),
          },
          { counterStoreMasters, region, leases: redisCounters && (() => metrics.leaseTotals()), counterSnapshot: snapshots && (() => snapshots.status()), rlqs: rlqs && (() => rlqs.status()) },
        ),
      ],
    });
    const httpOptions = httpServerOptions(config.http);
    const httpServer = tls
      ? https.createServer({ ...httpsServerOptions(tls), ...httpOptions }, listener)
      : http.createServer(httpOptions, listener);
    const grpcServer = createGrpcServer({
      decisions,
      readiness,
      maxMessageBytes: config.grpcMaxMessageBytes,
      authenticate: grpcAuthenticate(authenticator),
      policies: matcher,
      envoyHeaders: config.envoyHeaders,
      envoyHeaderDescriptors: config.envoyHeaderDescriptors,
      envoyConsumeAll: config.envoyConsumeAll,
      tracing,
      rlqs,
    });
    closers.push(() => shutdownGrpcServer(grpcServer, 0), () => closeGracefully(httpServer, 0));
    const [httpPort, grpcPort] = await Promise.all([
      listen(httpServer, config.httpAddr),
      bindGrpcServer(grpcServer, config.grpcAddr, tls ? grpcServerCredentials(tls) : grpc.ServerCredentials.createInsecure()),
    ]);
    log.info('listening', {
      http: httpPort,
      grpc: grpcPort,
      tls: Boolean(tls),
      auth: config.auth.enabled ? config.auth.mode : 'off',
      counters: config.counterStoreAddr ? 'redis' : 'memory',
      policy_store: config.counterStoreAddr ? 'redis' : `file:${config.dataDir}`,
      policies: store.list().length,
      seeded_from_file: seeded,
      invalidation_targets: config.invalidationTargets.length,
      tracing: config.tracing ? config.tracing.protocol : 'off',
      ...(config.region && { region: config.region.name, global_store: redactAddress(config.region.globalStoreAddr) }),
    });
    snapshots?.start();
    readiness.markReady();

    let draining: Promise<void> | undefined;
    const drain = () => {
      draining ??= (async () => {
        // Readiness fails now (/readyz 503, gRPC health NOT_SERVING) while both listeners keep
        // answering, until load balancers have noticed; only then do they stop accepting.
        readiness.markDraining();
        await new Promise((resolve) => setTimeout(resolve, config.shutdownDelaySecs * 1000));
        const deadlineMs = config.drainSecs * 1000;
        // RLQS streams end once their reports settled them (cut at the deadline, their units lapse).
        await Promise.all([closeGracefully(httpServer, deadlineMs), shutdownGrpcServer(grpcServer, deadlineMs), rlqs?.drain()]);
        notifier?.close();
        policies.close();
        // Process leases and the region's units go back while the counter store is still open.
        await decisions.letGoLeases();
        hub.stop();
        // Every decision has been answered: the last snapshot holds them all.
        await snapshots?.stop();
        await Promise.all([store.close(), counters.close(), tracing?.shutdown()]);
      })();
      return draining;
    };
    return { httpPort, grpcPort, readiness, policies, drain };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

/**
 * Explicit timeouts instead of Node's minutes-long defaults. Node checks them every
 * `connectionsCheckingInterval` (30 s by default): once a second keeps the bound close to the setting.
 */
function httpServerOptions(timeouts: HttpTimeouts): http.ServerOptions {
  return {
    headersTimeout: timeouts.headersTimeoutMs,
    requestTimeout: timeouts.requestTimeoutMs,
    keepAliveTimeout: timeouts.keepAliveTimeoutMs,
    connectionsCheckingInterval: 1000,
  };
}

/**
 * Envoy's rate limit quota service over the counter store (docs/envoy.md "RLQS"), when the store can lend
 * units (memory and Redis; a region's store lends only process leases' units).
 */
function rlqsHub(config: ServerConfig, counters: CounterStore, matcher: LiveMatcher, metrics: Metrics): RlqsHub | undefined {
  const { take, giveBack } = counters;
  if (take === undefined || giveBack === undefined || config.region !== undefined) return undefined;
  let hub: RlqsHub | undefined = undefined;
  const events = metrics.rlqsEvents(() => hub?.status() ?? { streams: 0, buckets: 0, units_held: 0 });
  hub = new RlqsHub({
    policies: matcher,
    store: { take: take.bind(counters), giveBack: giveBack.bind(counters), peek: counters.peek.bind(counters) },
    keyPrefix: config.keyPrefix,
    clock: systemClock,
    idleMs: config.rlqsBucketIdleSecs * 1000,
    wallNow: Date.now,
    events,
  });
  return hub;
}

/**
 * Seeds an empty policy store from `policyFile` (README "Managing policies"); true when it did. Without a file
 * (a shared counter store and no RL_POLICY_FILE) an empty store stays empty, and one line says how to
 * load policies, since a server without any answers every decision `no_matching_policy`.
 */
async function seedPolicies(store: PolicyStore, policyFile: string | undefined): Promise<boolean> {
  if (policyFile !== undefined) return store.seedIfEmpty(() => loadPolicyFile(policyFile));
  if (store.list().length === 0) {
    log.info('the policy store holds no policies and none were seeded (a shared counter store is seeded only from RL_POLICY_FILE): load them with RL_POLICY_FILE=<file> or `rl apply -f <file>`');
  }
  return false;
}

/**
 * Redis hashes when a shared store is configured (multi node), else the journal in RL_DATA_DIR. With
 * regions, the global store holds them, so a change made in any region reaches every region.
 */
function openPolicyStore(config: ServerConfig): Promise<PolicyStore> {
  if (config.region) {
    return RedisPolicyStore.open({
      addr: config.region.globalStoreAddr,
      keyPrefix: config.keyPrefix,
      commandTimeoutMs: config.region.globalTimeoutMs,
      unavailable: {
        name: 'global store (RL_GLOBAL_COUNTERSTORE_ADDR)',
        consequence: '; policy changes are refused until it is reachable again, decisions go on with the policies this server holds',
      },
    });
  }
  return config.counterStoreAddr
    ? RedisPolicyStore.open({ addr: config.counterStoreAddr, keyPrefix: config.keyPrefix })
    : FilePolicyStore.open(config.dataDir);
}

/** RL_COUNTER_SNAPSHOT_SECS above 0: the snapshots of these memory counters, restored now; 0: none (and none kept). */
async function openCounterSnapshots(counters: MemoryCounterStore, config: ServerConfig): Promise<CounterSnapshots | undefined> {
  if (config.counterSnapshotSecs === 0) return void (await removeCounterSnapshot(config.dataDir));
  const snapshots = new CounterSnapshots({ space: counters.keyspace, dataDir: config.dataDir, keyPrefix: config.keyPrefix, intervalMs: config.counterSnapshotSecs * 1000 });
  await snapshots.restore();
  return snapshots;
}

function invalidationNotifier(config: ServerConfig, metrics: Metrics): InvalidationNotifier | undefined {
  if (config.invalidationTargets.length === 0) return undefined;
  return new InvalidationNotifier({
    targets: config.invalidationTargets,
    token: config.invalidationToken,
    // The notifier itself logs each failure (with the target redacted).
    onFailure: () => metrics.countInvalidationFailure(),
  });
}
