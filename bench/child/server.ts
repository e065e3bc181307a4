import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { CounterStore } from '../../src/counters/counter-store.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { connectRedisCounterStore } from '../../src/redis/redis-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { Authenticator } from '../../src/auth/authenticator.js';
import { loadServerConfig, type ServerConfig } from '../../src/config.js';
import { grpcAuthenticate } from '../../src/grpc/auth.js';
import { bindGrpcServer, createGrpcServer } from '../../src/grpc/server.js';
import { SERVICE_NAMES, serviceDefinition } from '../../src/grpc/protos.js';
import { createApp, createHttpListener } from '../../src/http/app.js';
import { HttpAuth, httpAuthGuard } from '../../src/http/auth-guard.js';
import { headersForMethod, newRequestId } from '../../src/http/headers.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { analyticsRoutes } from '../../src/http/routes/analytics.js';
import { metricsRoutes } from '../../src/http/routes/metrics.js';
import { Analytics } from '../../src/analytics/analytics.js';
import { decisionsCounted, Metrics } from '../../src/observability/metrics.js';
import { ObservabilityRecorder } from '../../src/analytics/recorder.js';
import { startTracing } from '../../src/observability/start-tracing.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { connectCounterStores } from '../../src/composition/counter-stores.js';
import { FIXED_DECISION, HOT_KEY_POLICY, LAYER_POLICIES, LEASE_POLICIES, REGION_POLICIES, REGION_WINDOW_POLICIES, TARGET_LIMIT, TARGET_WINDOW_SECONDS, generateWorkload } from '../lib/workload.js';
import { argOf, childMain, reportStats, send } from './common.js';

/**
 * One benchmarked server per process (pinned by the parent), so the load generator never shares its
 * event loop. Kinds:
 *   rl-http    the service's HTTP listener as startServer builds it (createHttpListener: the decision
 *              fast path in front of the Koa app), memory or Redis counters
 *   rl-koa-http  the Koa app alone (createApp), for the breakdown: what the fast path saves
 *   bare-http  node:http that reads the same JSON body, parses it and writes a fixed decision
 *   bare-http-headers  the same, answering with the documented response headers (X-Request-Id and the
 *              security headers) written the cheapest way node:http allows: how much of the gap the
 *              headers are
 *   ceiling-http  the minimal node:http server (issue 15, target 1: Node's ceiling): reads the same body,
 *              JSON.parse, answers synchronously with the same six response headers and a fixed
 *              decision JSON serialised once; no promise, no per-request object
 *   rlf-http   the bare-http server deciding with rate-limiter-flexible's RateLimiterRedis (fixed window)
 *   rl-grpc    the service's gRPC front-end (src/grpc/server.ts), memory counters
 *   bare-grpc  grpc-js with the same service definition whose CheckLimit returns a fixed message
 * Answers `{type: 'ready', port}` once listening.
 */

/**
 * The production configuration with every variable at its default (auth off, 1 MiB bodies, 100 ms store
 * timeout); with RL_BENCH_AUTH_API_KEYS, API key auth on with those entries (the load then sends
 * RL_BENCH_API_KEY, bench/lib/http-load.ts).
 */
const BENCH_KEYS = process.env.RL_BENCH_AUTH_API_KEYS;
const CONFIG: ServerConfig = loadServerConfig(BENCH_KEYS ? { RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'apikey', RL_AUTH_API_KEYS: BENCH_KEYS } : {});

childMain(async () => {
  const kind = argOf('kind');
  const redisAddr = argOf('redis', '');
  const policyCount = Number(argOf('policies', '10'));
  // Scenario 9: a low-limit policy for the attacking identity (HOT_KEY_BODY), and the deny cache on or off.
  const options = {
    hotKey: argOf('hot-key', '') === 'yes',
    denyCache: argOf('deny-cache', 'yes') === 'yes',
    lease: argOf('lease', '') === 'yes',
    // Scenario 17: two more layers over the target request (org and platform).
    layers: argOf('layers', '') === 'yes',
    // Scenario 13: the global-budget policies; with --region and --global, this server is in a region.
    regions: argOf('regions', '') === 'yes',
    region: argOf('region', ''),
    globalAddr: argOf('global', ''),
  };
  let port: number;
  switch (kind) {
    case 'rl-http':
      port = await rlHttp(policyCount, redisAddr, 'listener', options);
      break;
    case 'rl-koa-http':
      port = await rlHttp(policyCount, redisAddr, 'koa', options);
      break;
    case 'bare-http':
      port = await listen(http.createServer(bareHandler(() => Promise.resolve(FIXED_DECISION))));
      break;
    case 'bare-http-headers':
      port = await listen(http.createServer(bareHandler(() => Promise.resolve(FIXED_DECISION), true)));
      break;
    case 'ceiling-http':
      port = await listen(http.createServer(ceilingHandler()));
      break;
    case 'rlf-http':
      port = await rlfHttp(redisAddr);
      break;
    case 'rl-grpc':
      port = await rlGrpc(policyCount);
      break;
    case 'bare-grpc':
      port = await bareGrpc();
      break;
    default:
      throw new Error(`unknown --kind ${kind}`);
  }
  send({ type: 'ready', port });
});

/**
 * What startServer (src/server.ts) builds for decisions, recorder included: matcher, counters, metrics,
 * analytics, DecisionService. The policy store and policy routes are left out: decisions never read them.
 */
async function decisionService(
  policyCount: number,
  redisAddr: string,
  options: ServiceOptions = { hotKey: false, denyCache: true, lease: false, layers: false, regions: false, region: '', globalAddr: '' },
) {
  const { policies } = generateWorkload(policyCount);
  const matcher = new LiveMatcher([
    ...policies,
    ...(options.hotKey ? [HOT_KEY_POLICY] : []),
    ...(options.lease ? LEASE_POLICIES : []),
    ...(options.layers ? LAYER_POLICIES : []),
    ...(options.regions ? [...REGION_POLICIES, ...REGION_WINDOW_POLICIES] : []),
  ]);
  const metrics = new Metrics({ labelCap: CONFIG.metricsLabelCap });
  let counters: CounterStore;
  if (redisAddr && options.globalAddr) {
    const stores = connectCounterStores({
      counterStoreAddr: redisAddr,
      counterStoreTimeoutMs: CONFIG.counterStoreTimeoutMs,
      region: { name: options.region, globalStoreAddr: options.globalAddr, globalTimeoutMs: 1000 },
      leaseMaxWaitMs: CONFIG.leaseMaxWaitMs,
      regionEvents: (policyId) => metrics.leaseEvents('region', policyId),
    })!;
    await stores.redis.waitUntilReady(10_000);
    counters = stores.region ?? stores.redis;
  } else if (redisAddr) {
    const store = connectRedisCounterStore(redisAddr, { commandTimeoutMs: CONFIG.counterStoreTimeoutMs });
    await store.waitUntilReady(10_000);
    counters = store;
  } else {
    counters = new MemoryCounterStore();
  }
  const analytics = new Analytics();
  const decisions = new DecisionService({
    policies: matcher,
    counters,
    keyPrefix: 'rl:',
    recorder: new ObservabilityRecorder(metrics, analytics),
    onCounterStoreError: () => metrics.countCounterStoreError(),
    onDenyCacheHit: () => metrics.countDenyCacheHit(),
    denyCache: options.denyCache ? undefined : false,
    leases: { events: (policyId) => metrics.leaseEvents('process', policyId), maxWaitMs: CONFIG.leaseMaxWaitMs },
    region: options.region || undefined,
  });
  // Read from the service's own metrics only when the parent asks: nothing is added to the hot path.
  reportStats(async () => {
    const stats: Record<string, number> = {};
    for (const metric of await metrics.registry.getMetricsAsJSON()) {
      // Scenario 12's never-over count: the capped lease policy's admitted decisions.
      if (metric.name === 'rl_policy_decisions_total') {
        stats.lease_capped_allowed = metric.values.find((v) => v.labels.policy_id === 'lease-capped' && v.labels.outcome === 'allowed')?.value ?? 0;
        // Scenario 13's never-over and utilisation count.
        stats.region_capped_allowed = metric.values.find((v) => v.labels.policy_id === 'region-capped' && v.labels.outcome === 'allowed')?.value ?? 0;
      }
      // Scenario 14's count of units lost with a reason.
      if (metric.name === 'rl_lease_units_lapsed_total') {
        stats.region_faults_lapsed = metric.values.filter((v) => v.labels.policy_id === 'region-faults').reduce((sum, v) => sum + v.value, 0);
      }
      if (metric.name === 'rl_lease_parent_wait_seconds') {
        stats.lease_waits = metric.values.find((v) => (v as { metricName?: string }).metricName === 'rl_lease_parent_wait_seconds_count')?.value ?? 0;
        continue;
      }
      if (!['rl_decisions_total', 'rl_counter_store_errors_total', 'rl_failure_mode_decisions_total', 'rl_deny_cache_hits_total', 'rl_lease_refills_total'].includes(metric.name)) continue;
      stats[metric.name] = decisionsCounted(metric.values);
    }
    return stats;
  });
  return { decisions, metrics, analytics, matcher };
}

interface ServiceOptions {
  hotKey: boolean;
  denyCache: boolean;
  lease: boolean;
  layers: boolean;
  regions: boolean;
  region: string;
  globalAddr: string;
}

async function rlHttp(policyCount: number, redisAddr: string, front: 'listener' | 'koa', options: ServiceOptions): Promise<number> {
  const { decisions, metrics, analytics } = await decisionService(policyCount, redisAddr, options);
  const readiness = new Readiness();
  const auth = new HttpAuth(new Authenticator(CONFIG.auth), CONFIG.auth);
  // Traced when the parent sets an OTLP endpoint (bench/tracing-cost.ts), as the server would be.
  const tracingConfig = loadServerConfig(process.env).tracing;
  const tracing = await startTracing(tracingConfig && { ...tracingConfig, serviceVersion: 'bench' });
  const deps = { decisions, readiness, maxBodyBytes: CONFIG.maxBodyBytes, routers: [analyticsRoutes(analytics), metricsRoutes(metrics)], tracing };
  const listener =
    front === 'listener' ? createHttpListener({ ...deps, auth }) : createApp({ ...deps, guards: [httpAuthGuard(auth)] }).callback();
  const port = await listen(http.createServer(listener));
  readiness.markReady();
  return port;
}

async function rlGrpc(policyCount: number): Promise<number> {
  const { decisions, matcher } = await decisionService(policyCount, '');
  const readiness = new Readiness();
  const server = createGrpcServer({
    decisions,
    readiness,
    maxMessageBytes: CONFIG.grpcMaxMessageBytes,
    authenticate: grpcAuthenticate(new Authenticator(CONFIG.auth)),
    policies: matcher,
  });
  const port = await bindGrpcServer(server, { host: '127.0.0.1', port: 0 }, grpc.ServerCredentials.createInsecure());
  readiness.markReady();
  return port;
}

async function bareGrpc(): Promise<number> {
  const server = new grpc.Server({ 'grpc.max_receive_message_length': CONFIG.grpcMaxMessageBytes });
  const fixed: grpc.handleUnaryCall<unknown, unknown> = (_call, callback) => callback(null, FIXED_DECISION);
  server.addService(serviceDefinition(SERVICE_NAMES.rateLimit), { CheckLimit: fixed, Acquire: fixed, Release: fixed });
  return bindGrpcServer(server, { host: '127.0.0.1', port: 0 }, grpc.ServerCredentials.createInsecure());
}

/**
 * The same route on rate-limiter-flexible: RateLimiterRedis (one Lua script per consume, fixed window of
 * `duration` seconds from the first hit) keyed by the same identity as the target policy (tenant,
 * endpoint, user), the limit and window of the target policy. The ioredis client is created as the
 * rate-limiter-flexible docs show (offline queue off); auto-pipelining stays at the ioredis default (off).
 */
async function rlfHttp(redisAddr: string): Promise<number> {
  const url = new URL(redisAddr);
  const client = new Redis({ host: url.hostname, port: Number(url.port), enableOfflineQueue: false });
  await new Promise<void>((resolve, reject) => {
    client.once('ready', resolve);
    client.once('error', reject);
  });
  const limiter = new RateLimiterRedis({ storeClient: client, keyPrefix: 'rlf', points: TARGET_LIMIT, duration: TARGET_WINDOW_SECONDS });
  return listen(
    http.createServer(
      bareHandler(async (body) => {
        const key = `${body.tenant_id}:${body.endpoint}:${body.user_id}`;
        try {
          const res = await limiter.consume(key);
          return { ...FIXED_DECISION, remaining: res.remainingPoints, reset_after: res.msBeforeNext };
        } catch (rejection) {
          if (rejection instanceof RateLimiterRes) {
            return {
              ...FIXED_DECISION,
              allowed: false,
              action: 'deny',
              reason: 'limit_exceeded',
              remaining: 0,
              retry_after: rejection.msBeforeNext,
              reset_after: rejection.msBeforeNext,
            };
          }
          return { ...FIXED_DECISION, reason: 'counter_store_unavailable' }; // fail open
        }
      }),
    ),
  );
}

/**
 * Reads the whole body, JSON.parse, decides, writes the decision as JSON: the least any Node server does.
 * `contractHeaders`: also answers with the headers the service sends on a decision, X-Request-Id (a
 * fresh id per request, from the service's own generator) and the security headers of an answer to a
 * POST (headersForMethod), in the cheapest way node:http offers: one writeHead with a prebuilt flat
 * list (no validated setHeader call per header). This variant is a diagnostic (how much of the gap the
 * headers are), never the baseline.
 */
function bareHandler(decide: (body: Record<string, string>) => Promise<object>, contractHeaders = false): http.RequestListener {
  return (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      let body: Record<string, string>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        if (typeof body !== 'object' || body === null) throw new Error('not an object');
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end('{"error":"malformed JSON","status":400}');
        return;
      }
      decide(body).then((decision) => {
        const payload = JSON.stringify(decision);
        if (contractHeaders) {
          res.writeHead(200, DECISION_HEADERS.concat('X-Request-Id', newRequestId(), 'Content-Length', String(Buffer.byteLength(payload))));
        } else {
          res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(payload) });
        }
        res.end(payload);
      });
    });
  };
}

/**
 * Node's ceiling for this route: the least a node:http server can do and still answer a decision call
 * as the service does — the whole body read, JSON.parse, the same six headers (the four security
 * headers, Content-Type, a fresh X-Request-Id) plus Content-Length, and a decision JSON. Synchronous,
 * the decision serialised once.
 */
function ceilingHandler(): http.RequestListener {
  const payload = JSON.stringify(FIXED_DECISION);
  const length = String(Buffer.byteLength(payload));
  return (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      try {
        JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end('{"error":"malformed JSON","status":400}');
        return;
      }
      res.writeHead(200, DECISION_HEADERS.concat('X-Request-Id', newRequestId(), 'Content-Length', length));
      res.end(payload);
    });
  };
}

/** The service's headers of an answer to a POST and the Content-Type, flat as writeHead takes them, built once. */
const DECISION_HEADERS: readonly string[] = [...headersForMethod('POST').flat(), 'Content-Type', 'application/json; charset=utf-8'];

function listen(server: http.Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });
}
