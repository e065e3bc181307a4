import * as grpc from '@grpc/grpc-js';
import type { DecisionService, Operation } from '../decision/decision-service.js';
import type { MatcherSource } from '../matching/live-matcher.js';
import type { Readiness } from '../lifecycle/readiness.js';
import type { Decision } from '../model/decision.js';
import { requireUnrestricted, scopeDecisionOrg } from '../model/org-scope.js';
import { CONTEXT_STRING_FIELDS, parseOperationContext } from '../model/request-context.js';
import { DECISION_SPANS, grpcTraceCarrier, itself, type Tracing } from '../observability/tracing.js';
import { log } from '../util/log.js';
import type { GrpcAuthenticate } from './auth.js';
import { ensureLive, guardedUnary, type CallGuards } from './call.js';
import { shouldRateLimit, unitLookup, type EnvoyHeaderDescriptors, type EnvoyHeadersMode, type EnvoyRateLimitRequest, type EnvoyRateLimitResponse } from './envoy.js';
import { createHealthService, type HealthService } from './health.js';
import type { RlqsHub } from '../lease/rlqs-hub.js';
import { rlqsHandler } from './rlqs.js';
import { SERVICE_NAMES, serviceDefinition } from './protos.js';

export { credentialsFromMetadata, grpcAuthenticate, type GrpcAuthenticate, type Principal } from './auth.js';

export interface GrpcServerDeps {
  decisions: DecisionService;
  readiness: Readiness;
  /** Largest request message accepted (`grpc.max_receive_message_length`); above it RESOURCE_EXHAUSTED. */
  maxMessageBytes: number;
  /** Runs before every decision RPC (not health); throws RlError unauthenticated / permission_denied. */
  authenticate?: GrpcAuthenticate;
  /** The live policies, so ShouldRateLimit can name the time unit of a limit; without it: UNKNOWN. */
  policies?: MatcherSource;
  /** The rate-limit headers ShouldRateLimit asks Envoy to add (RL_ENVOY_HEADERS); default ietf. */
  envoyHeaders?: EnvoyHeadersMode;
  /** Which descriptors those headers list (RL_ENVOY_HEADER_DESCRIPTORS); default limiting. */
  envoyHeaderDescriptors?: EnvoyHeaderDescriptors;
  /** RL_ENVOY_CONSUME_ALL: each descriptor counts on its own, whatever the others answer. */
  envoyConsumeAll?: boolean;
  /** OpenTelemetry spans per decision RPC (absent: tracing off, nothing is called). */
  tracing?: Tracing;
  /** Envoy's rate limit quota service (StreamRateLimitQuotas); absent: not served. */
  rlqs?: RlqsHub;
}

/** A decision RPC request as decoded: the RequestContext fields flat (int64 quantity as a decimal string). */
type DecisionRequest = Record<string, unknown>;

/** The Decision fields flat, exactly as HTTP returns them. */
type DecisionResponse = Decision;

const healthServices = new WeakMap<grpc.Server, HealthService>();

/**
 * The gRPC front-end, not yet bound: rl.v1.RateLimitService (CheckLimit, Acquire, Release, Refund),
 * envoy.service.ratelimit.v3.RateLimitService (ShouldRateLimit) and grpc.health.v1.Health on one
 * server. Handlers are thin adapters over DecisionService: validate, decide, map errors (status.ts).
 */
export function createGrpcServer(deps: GrpcServerDeps): grpc.Server {
  if (!Number.isSafeInteger(deps.maxMessageBytes) || deps.maxMessageBytes <= 0) {
    throw new Error(`maxMessageBytes must be a positive integer, got ${deps.maxMessageBytes}`);
  }
  const server = new grpc.Server({
    'grpc.max_receive_message_length': deps.maxMessageBytes,
  });
  const guards: CallGuards = { readiness: deps.readiness, authenticate: deps.authenticate };
  const { decisions, tracing } = deps;

  const decide = (operation: Operation) =>
    guardedUnary<DecisionRequest, DecisionResponse>(guards, async (request, call, caller) => {
      const run = () => {
        const ctx = scopeDecisionOrg(caller?.orgs, parseOperationContext(operation, fromWire(request, QUANTITY_ZERO_IS_UNSET[operation])));
        ensureLive(call);
        return decisions.decideNow(operation, ctx);
      };
      return tracing ? tracing.decision(DECISION_SPANS[operation], grpcTraceCarrier(call.metadata), run, itself) : run();
    });

  server.addService(serviceDefinition(SERVICE_NAMES.rateLimit), {
    CheckLimit: decide('check'),
    Acquire: decide('acquire'),
    Release: decide('release'),
    Refund: decide('refund'),
  });

  const unitOf = unitLookup(deps.policies);
  server.addService(serviceDefinition(SERVICE_NAMES.envoy), {
    ShouldRateLimit: guardedUnary<EnvoyRateLimitRequest, EnvoyRateLimitResponse>(guards, async (request, call, caller) => {
      // A proxy's descriptors are shaped by its route config, not by a team: the adapter acts for every organisation.
      requireUnrestricted(caller?.orgs, 'the Envoy rate-limit service (ShouldRateLimit)');
      const options = {
        unitOf,
        headers: deps.envoyHeaders ?? 'ietf',
        headerDescriptors: deps.envoyHeaderDescriptors,
        consumeAll: deps.envoyConsumeAll,
        beforeDecide: () => ensureLive(call),
      } as const;
      if (!tracing) return shouldRateLimit(decisions, request, options);
      let reported: Decision | undefined;
      const decided = (d: Decision) => (reported = d);
      return tracing.decision('rl.envoy', grpcTraceCarrier(call.metadata), () => shouldRateLimit(decisions, request, { ...options, decided }), () => reported);
    }),
  });

  if (deps.rlqs) server.addService(serviceDefinition(SERVICE_NAMES.rlqs), { StreamRateLimitQuotas: rlqsHandler(deps.rlqs, guards) });

  const health = createHealthService(deps.readiness, [SERVICE_NAMES.rateLimit, SERVICE_NAMES.envoy, ...(deps.rlqs ? [SERVICE_NAMES.rlqs] : [])]);
  server.addService(serviceDefinition(SERVICE_NAMES.health), health.implementation);
  healthServices.set(server, health);
  return server;
}

/**
 * Whether a 0 `quantity` is proto3's "unset" (default 1). CheckLimit's is `optional` (a 0 on the wire
 * is a peek, an absent one the default) and Refund's is required: there a decoded 0 is kept as given.
 */
const QUANTITY_ZERO_IS_UNSET: Record<Operation, boolean> = { check: false, acquire: true, release: true, refund: false };

/**
 * proto3 has no presence for plain scalars: an empty string is treated as absent (so it never matches
 * a `*` scope nor changes a lease digest), and quantity 0 as absent where `zeroIsUnset`. Everything
 * else goes to parseOperationContext unchanged, which validates exactly as for HTTP.
 */
function fromWire(request: DecisionRequest, zeroIsUnset: boolean): DecisionRequest {
  const body: DecisionRequest = {};
  for (const field of CONTEXT_STRING_FIELDS) {
    const value = request[field];
    if (value !== undefined && value !== '') body[field] = value;
  }
  const quantity = request.quantity;
  if (quantity !== undefined && quantity !== null && !(zeroIsUnset && String(quantity) === '0')) body.quantity = int64Value(quantity);
  if (request.tags !== undefined) body.tags = request.tags;
  return body;
}

/** An int64 decoded as a decimal string becomes a number when exact, so messages read as over HTTP. */
function int64Value(value: unknown): unknown {
  if (typeof value !== 'string' || !/^-?\d+$/.test(value)) return value;
  const n = Number(value);
  return Number.isSafeInteger(n) ? n : value;
}

/**
 * Binds `server` to `[host]:port` (no host: every interface, IPv6 and IPv4, falling back to IPv4 only
 * where IPv6 is unavailable) and resolves with the bound port (the chosen one for port 0).
 */
export async function bindGrpcServer(
  server: grpc.Server,
  address: { host?: string; port: number },
  credentials: grpc.ServerCredentials,
): Promise<number> {
  const bind = (target: string) =>
    new Promise<number>((resolve, reject) => {
      server.bindAsync(target, credentials, (error, port) => (error ? reject(error) : resolve(port)));
    });
  const host = address.host;
  if (host !== undefined && host !== '') {
    return bind(`${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${address.port}`);
  }
  try {
    return await bind(`[::]:${address.port}`);
  } catch (error) {
    log.warn('cannot bind gRPC on [::], binding 0.0.0.0', { error: String(error) });
    return bind(`0.0.0.0:${address.port}`);
  }
}

/**
 * Graceful stop: ends health Watch streams, refuses new calls, lets in-flight ones finish, and cancels
 * whatever is still running after `deadlineMs`.
 */
export function shutdownGrpcServer(server: grpc.Server, deadlineMs: number): Promise<void> {
  healthServices.get(server)?.endWatches();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, deadlineMs);
    timer.unref();
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
