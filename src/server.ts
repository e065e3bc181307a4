import http from 'node:http';
import https from 'node:https';
import * as grpc from '@grpc/grpc-js';
import { Authenticator } from './auth/authenticator.js';
import type { HttpTimeouts, ServerConfig } from './config.js';
import { grpcAuthenticate } from './grpc/auth.js';
import { bindGrpcServer, createGrpcServer, shutdownGrpcServer } from './grpc/server.js';
import { createHttpListener } from './http/app.js';
import { HttpAuth } from './http/auth-guard.js';
import { Readiness } from './lifecycle/readiness.js';
import { analyticsRoutes } from './http/routes/analytics.js';
import { dashboardAssetRoutes, dashboardStreamRoutes } from './http/routes/dashboard.js';
import { DashboardHub } from './analytics/dashboard-hub.js';
import { regionStatus } from './analytics/region-status.js';
import { infoRoutes, packageVersion } from './http/routes/info.js';
import { metricsRoutes, type MetricsSource } from './http/routes/metrics.js';
import { openApiRoutes } from './http/routes/openapi.js';
import { policyRoutes } from './http/routes/policies.js';
import { InvalidationNotifier } from './invalidation/notifier.js';
import { Analytics } from './analytics/analytics.js';
import { OrgView } from './analytics/org-view.js';
import { DeniedIdentities, bothRecorders } from './analytics/denied-identities.js';
import { Metrics } from './observability/metrics.js';
import { ObservabilityRecorder } from './analytics/recorder.js';
import { startTracing } from './observability/start-tracing.js';
import type { Tracing } from './observability/tracing.js';
import { LiveMatcher } from './matching/live-matcher.js';
import { loadPolicyFile } from './policy/policy-file.js';
import { Explainer } from './decision/explainer.js';
import { explainRoutes } from './http/routes/explain.js';
import type { PolicyStore } from './policy-store/policy-store.js';
import { composeDecisionCore } from './composition/decision-core.js';
import { closeGracefully, listen } from './lifecycle/listening.js';
import { ShutdownOrder } from './lifecycle/shutdown-order.js';
import type { PolicyService } from './policy-service/policy-service.js';
import { redactAddress } from './redis/redis-connection.js';
import { grpcServerCredentials, httpsServerOptions, loadTlsMaterial, type TlsMaterial } from './tls.js';
import { log } from './util/log.js';

export interface RunningServer {
  httpPort: number;
  grpcPort: number;
  readiness: Readiness;
  policies: PolicyService;
  /** What a drain closes, in its order (the names of its steps). */
  shutdown: Pick<ShutdownOrder, 'names'>;
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
  // One order for a start-up that fails half-way and for the drain: what opened last closes first.
  const shutdown = new ShutdownOrder();
  return shutdown.opening(async () => {
    const listening = await startListening(config, hooks, { tls, authenticator, readiness, shutdown });
    readiness.markReady();
    let draining: Promise<void> | undefined;
    const drain = () => {
      draining ??= (async () => {
        // Readiness fails now (/readyz 503, gRPC health NOT_SERVING) while both listeners keep
        // answering, until load balancers have noticed; only then do they stop accepting.
        readiness.markDraining();
        await new Promise((resolve) => setTimeout(resolve, config.shutdownDelaySecs * 1000));
        await shutdown.close();
      })();
      return draining;
    };
    return { ...listening, readiness, shutdown, drain };
  });
}

interface StartParts {
  tls: TlsMaterial | undefined;
  authenticator: Authenticator;
  readiness: Readiness;
  shutdown: ShutdownOrder;
}

/** The core and what observes it (metrics, analytics, denied identities), over one live matcher. */
async function observedCore(config: ServerConfig, authenticator: Authenticator, shutdown: ShutdownOrder) {
  const matcher = new LiveMatcher();
  const metrics = new Metrics({ labelCap: config.metricsLabelCap });
  // Per-organisation counts only where some credential can be limited to organisations (they cost a second count).
  const analytics = new Analytics({ byOrg: authenticator.mayLimitOrgs });
  const viewOf = (orgs: readonly string[]) => new OrgView(orgs, matcher, config.platformLayers);
  // Who is being limited, for the dashboard: touched by denied decisions only.
  const deniedIdentities = new DeniedIdentities(matcher);
  const core = await composeDecisionCore(config, {
    shutdown,
    matcher,
    policies: { from: 'store', seed: config.policyFile === undefined ? undefined : () => loadPolicyFile(config.policyFile!) },
    observe: {
      recorder: bothRecorders(new ObservabilityRecorder(metrics, analytics), deniedIdentities),
      onCounterStoreError: () => metrics.countCounterStoreError(),
      onDenyCacheHit: () => metrics.countDenyCacheHit(),
      onLayerCompensation: (policyId) => metrics.countLayerCompensation(policyId),
      onIgnoredFields: (count) => metrics.countIgnoredFields(count),
    },
    // The lease holders (process, region) report to the metrics.
    leaseEvents: (level, policyId) => metrics.leaseEvents(level, policyId),
    rlqsEvents: (status) => metrics.rlqsEvents(status),
  });
  if (config.policyFile === undefined) noteUnseeded(core.policies.store!);
  return { core, metrics, analytics, viewOf, deniedIdentities };
}

type ObservedCore = Awaited<ReturnType<typeof observedCore>>;

/** The core, what observes it, both listeners; each piece joins the shutdown order as it opens. */
async function startListening(config: ServerConfig, hooks: ServerHooks, parts: StartParts): Promise<Pick<RunningServer, 'httpPort' | 'grpcPort' | 'policies'>> {
  const { readiness, shutdown } = parts;
  const observed = await observedCore(config, parts.authenticator, shutdown);
  const { core, metrics, analytics, viewOf, deniedIdentities } = observed;
  const { counters, regionCounters, rlqs } = core;
  const store = core.policies.store!;
  const policies = core.policies.service!;
  // Off without an OTLP endpoint: then nothing of OpenTelemetry is loaded and no transport calls it.
  const tracing = await startTracing(config.tracing && { ...config.tracing, serviceVersion: packageVersion() });
  if (tracing) shutdown.add('tracing', () => tracing.shutdown());

  const regionName = config.region?.name;
  const region = regionCounters && regionName !== undefined ? () => regionStatus(regionName, regionCounters.globalStoreHealth(), regionCounters.shareStatus()) : undefined;
  // Ticks from now on, viewers or not: a dashboard opened later starts with the last hour.
  const hub = new DashboardHub({ analytics, metrics, policies, counters, readiness, deniedIdentities, region, viewOf, rlqs: rlqs && (() => rlqs.status()) });
  hub.start();
  shutdown.add('dashboard', () => hub.stop());

  const notifier = invalidationNotifier(config, metrics);
  if (notifier) {
    shutdown.add('invalidation', () => notifier.close());
    // Only the node that made a change tells the sidecars; the others learn it from the store.
    store.onChange((event) => {
      if (event.local) notifier.notify({ policy_id: event.policy_id, change: event.change, version: event.version });
    });
  }
  const ports = await openListeners(config, hooks, parts, { ...observed, tracing, hub, region });
  core.start();
  return { ...ports, policies };
}

/** HTTP and gRPC over the core, listening; they close first, draining RLQS streams as they do. */
async function openListeners(
  config: ServerConfig,
  hooks: ServerHooks,
  { tls, authenticator, readiness, shutdown }: StartParts,
  { core, metrics, analytics, viewOf, tracing, hub, region }: ObservedCore & { tracing: Tracing | undefined; hub: DashboardHub; region: (() => ReturnType<typeof regionStatus>) | undefined },
): Promise<{ httpPort: number; grpcPort: number }> {
  const { decisions, matcher, redisCounters, snapshots, rlqs } = core;
  const store = core.policies.store!;
  const policies = core.policies.service!;
  // Per-master health is the Redis connection's (the regional one with regions).
  const counterStoreMasters = redisCounters && (() => redisCounters.health.states());
  if (counterStoreMasters) metrics.watchCounterStoreMasters(counterStoreMasters);
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
  // Both listeners stop accepting and let in-flight requests finish, bounded by RL_DRAIN_SECS; RLQS streams
  // end meanwhile once their reports settled them (cut at the deadline, their units lapse).
  const deadlineMs = config.drainSecs * 1000;
  shutdown.add('listeners', () => Promise.all([closeGracefully(httpServer, deadlineMs), shutdownGrpcServer(grpcServer, deadlineMs), rlqs?.drain()]));
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
    seeded_from_file: core.policies.seeded,
    invalidation_targets: config.invalidationTargets.length,
    tracing: config.tracing ? config.tracing.protocol : 'off',
    ...(config.region && { region: config.region.name, global_store: redactAddress(config.region.globalStoreAddr) }),
  });
  return { httpPort, grpcPort };
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
 * Without RL_POLICY_FILE (a shared counter store) an empty store stays empty, and one line says how to load
 * policies, since a server without any answers every decision `no_matching_policy`.
 */
function noteUnseeded(store: PolicyStore): void {
  if (store.list().length === 0) {
    log.info('the policy store holds no policies and none were seeded (a shared counter store is seeded only from RL_POLICY_FILE): load them with RL_POLICY_FILE=<file> or `rl apply -f <file>`');
  }
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
