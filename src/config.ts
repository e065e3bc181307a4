import { availableParallelism } from 'node:os';
import { isOrgName } from './model/org-scope.js';
import { LAYER_PATTERN } from './schema/policy.js';
import { ConfigError, Reader, type Env, type ListenAddress } from './config-reader.js';
import { SETTINGS } from './settings.js';

/**
 * The server's reader of its `RL_*` variables (the sidecar's is src/agent/config.ts; both read the
 * variables declared in src/settings.ts, with their defaults and bounds, and no other). Composition
 * roots call `loadServerConfig(process.env)`; everything else receives typed values. A bad value throws ConfigError naming the variable, and the
 * process stops before it listens: a limiter running with a half-understood config is worse than none.
 */

export { ConfigError, Reader, type Env, type ListenAddress } from './config-reader.js';

export type Role = 'admin' | 'read-only';
const ROLES: readonly Role[] = ['admin', 'read-only'];

export interface AuthConfig {
  enabled: boolean;
  mode: 'apikey' | 'jwt' | undefined;
  apiKeys: ApiKeyEntry[];
  jwtSecret: string | undefined;
  roleClaim: string;
  /** The JWT claim naming the organisations a token acts for (absent from a token: unrestricted). */
  orgClaim: string;
  exemptPaths: string[];
}

/** One `RL_AUTH_API_KEYS` entry: `orgs` absent = unrestricted (every organisation). */
export interface ApiKeyEntry {
  key: string;
  role: Role;
  orgs?: string[];
}

export interface TlsConfig {
  enabled: boolean;
  certFile: string | undefined;
  keyFile: string | undefined;
}

/** RL_POLICY_FILE's default: the demo policies, which seed only a memory-mode server (docs/deployment.md "Several nodes: one shared Redis", Seeding). */
export const DEMO_POLICY_FILE = 'examples/policies.json';

export interface ServerConfig {
  /**
   * The file an empty policy store is seeded from: RL_POLICY_FILE, or without it the demo policies in
   * memory mode only. undefined: no seeding (a shared counter store without RL_POLICY_FILE), so demo
   * policies never land in a store other servers read.
   */
  policyFile: string | undefined;
  httpAddr: ListenAddress;
  grpcAddr: ListenAddress;
  invalidationTargets: string[];
  /** Sent to the sidecars as `Authorization: Bearer` (their RL_AGENT_INVALIDATE_TOKEN). */
  invalidationToken: string | undefined;
  tls: TlsConfig;
  auth: AuthConfig;
  /** undefined = in-memory counters and a file-backed policy store (single-node mode). */
  counterStoreAddr: string | undefined;
  counterStoreTimeoutMs: number;
  /** RL_LEASE_MAX_WAIT_MS: the longest a decision waits for its lease holder's refill, then refused (lease_wait_timeout). */
  leaseMaxWaitMs: number;
  /** Redis mode's deny cache (docs/algorithms.md): counters held (0 = off), and how long one answers at most. */
  denyCache: { size: number; maxAgeMs: number };
  keyPrefix: string;
  maxBodyBytes: number;
  dataDir: string;
  /** After SIGTERM: seconds of answering (readiness 503) before the listeners close, so load balancers notice. */
  shutdownDelaySecs: number;
  drainSecs: number;
  http: HttpTimeouts;
  metricsLabelCap: number;
  grpcMaxMessageBytes: number;
  /** The rate-limit headers of Envoy RLS answers: the IETF draft's, the X-RateLimit-* ones, or none. */
  envoyHeaders: 'ietf' | 'legacy' | 'off';
  /** Which descriptors those headers speak for: the limiting one, or every one an enforced policy answered. */
  envoyHeaderDescriptors: 'limiting' | 'all';
  /** RL_RLQS_BUCKET_IDLE_SECS: an RLQS bucket with no request reported for this long is abandoned; ALLOW_ALL lives this long. */
  rlqsBucketIdleSecs: number;
  /** RL_ENVOY_CONSUME_ALL: every descriptor of an Envoy call counts whatever the others answer (default: all or nothing). */
  envoyConsumeAll: boolean;
  /** Server processes sharing the ports (RL_WORKERS, `auto` = cores); more than 1 needs RL_COUNTERSTORE_ADDR. */
  workers: number;
  /** OpenTelemetry traces: on when an OTLP endpoint is set (docs/tracing.md); the SDK reads the other OTEL_* itself. */
  tracing: { protocol: 'http/protobuf' | 'http/json' } | undefined;
  /** RL_REGION + RL_GLOBAL_COUNTERSTORE_ADDR (docs/distribution.md); undefined = no regions. */
  region: RegionConfig | undefined;
  /** RL_COUNTER_SNAPSHOT_SECS: memory mode saves its counters in dataDir this often, and on drain; 0 = never. */
  counterSnapshotSecs: number;
  /** RL_PLATFORM_LAYERS: policy layers only credentials not limited to organisations read and write (docs/tenants.md). */
  platformLayers: string[];
}

export interface RegionConfig {
  /** RL_REGION: this server's region ([a-z0-9-]{1,32}). */
  name: string;
  /** RL_GLOBAL_COUNTERSTORE_ADDR: policies, versions, audit and the global budgets' counters. */
  globalStoreAddr: string;
  /** RL_GLOBAL_COUNTERSTORE_TIMEOUT_MS: the deadline of one global-store call (a WAN round trip). */
  globalTimeoutMs: number;
}

/** Node's defaults hold a header-trickling socket 60 s and a slow body 300 s; ours are seconds. */
export interface HttpTimeouts {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
}

export function loadServerConfig(env: Env): ServerConfig {
  const read = new Reader(env);
  const auth = readAuth(read);
  const tls = readTls(read);
  const counterStoreAddr = read.counterStoreAddr();
  return {
    policyFile: read.optional('RL_POLICY_FILE') ?? (counterStoreAddr === undefined ? DEMO_POLICY_FILE : undefined),
    httpAddr: read.setting('RL_HTTP_ADDR'),
    grpcAddr: read.setting('RL_GRPC_ADDR'),
    invalidationTargets: read.list('RL_INVALIDATION_TARGETS').map((t) => read.httpUrl('RL_INVALIDATION_TARGETS', t)),
    invalidationToken: read.optional('RL_INVALIDATION_TOKEN'),
    tls,
    auth,
    counterStoreAddr,
    counterStoreTimeoutMs: read.setting('RL_COUNTERSTORE_TIMEOUT_MS'),
    leaseMaxWaitMs: readLeaseMaxWait(read),
    denyCache: {
      size: read.setting('RL_DENY_CACHE_SIZE'),
      maxAgeMs: read.setting('RL_DENY_CACHE_MAX_AGE_MS'),
    },
    keyPrefix: read.setting('RL_KEY_PREFIX'),
    maxBodyBytes: read.setting('RL_MAX_BODY_BYTES'),
    dataDir: read.setting('RL_DATA_DIR'),
    shutdownDelaySecs: read.setting('RL_SHUTDOWN_DELAY_SECS'),
    drainSecs: read.setting('RL_DRAIN_SECS'),
    http: readHttpTimeouts(read),
    metricsLabelCap: read.setting('RL_METRICS_LABEL_CAP'),
    grpcMaxMessageBytes: read.setting('RL_GRPC_MAX_MESSAGE_BYTES'),
    envoyHeaders: read.setting('RL_ENVOY_HEADERS'),
    envoyHeaderDescriptors: read.setting('RL_ENVOY_HEADER_DESCRIPTORS'),
    rlqsBucketIdleSecs: read.setting('RL_RLQS_BUCKET_IDLE_SECS'),
    envoyConsumeAll: read.setting('RL_ENVOY_CONSUME_ALL'),
    workers: readWorkers(read, counterStoreAddr),
    tracing: readTracing(read),
    region: readRegion(read, counterStoreAddr),
    counterSnapshotSecs: read.setting('RL_COUNTER_SNAPSHOT_SECS'),
    platformLayers: readPlatformLayers(read),
  };
}

/** RL_PLATFORM_LAYERS: comma-separated layer names (a policy's `layer` syntax), default `platform`. */
function readPlatformLayers(read: Reader): string[] {
  const layers = read.setting('RL_PLATFORM_LAYERS');
  for (const layer of layers) {
    if (!LAYER_PATTERN.test(layer)) {
      throw new ConfigError('RL_PLATFORM_LAYERS', `"${layer}" is not a layer name (a lower-case letter, then up to 31 of a-z, 0-9, _ and -)`);
    }
  }
  return [...new Set(layers)];
}

/** RL_LEASE_MAX_WAIT_MS: the longest a decision waits for its lease holder's refill (docs/reference.md "Slots, leases and pools"). */
export function readLeaseMaxWait(read: Reader): number {
  return read.setting('RL_LEASE_MAX_WAIT_MS');
}

/** Both RL_REGION and RL_GLOBAL_COUNTERSTORE_ADDR or neither; with them RL_COUNTERSTORE_ADDR is this region's store. */
export function readRegion(read: Reader, counterStoreAddr: string | undefined): RegionConfig | undefined {
  const name = read.optional('RL_REGION');
  const globalStoreAddr = read.counterStoreAddr('RL_GLOBAL_COUNTERSTORE_ADDR');
  const globalTimeoutMs = read.setting('RL_GLOBAL_COUNTERSTORE_TIMEOUT_MS');
  if (name !== undefined && !/^[a-z0-9-]{1,32}$/.test(name)) {
    throw new ConfigError('RL_REGION', `must be 1-32 characters of a-z, 0-9 and "-", got "${name}"`);
  }
  if (name === undefined && globalStoreAddr === undefined) return undefined;
  if (name === undefined) throw new ConfigError('RL_REGION', 'must be set when RL_GLOBAL_COUNTERSTORE_ADDR is (both or neither)');
  if (globalStoreAddr === undefined) {
    throw new ConfigError('RL_GLOBAL_COUNTERSTORE_ADDR', 'must be set when RL_REGION is (both or neither)');
  }
  if (counterStoreAddr === undefined) {
    throw new ConfigError('RL_COUNTERSTORE_ADDR', "must be set when RL_REGION is: it is this region's counter store");
  }
  return { name, globalStoreAddr, globalTimeoutMs };
}

/** The standard OTEL_* variables that decide whether (and how) traces are exported; a bad one stops start-up. */
function readTracing(read: Reader): ServerConfig['tracing'] {
  if (read.bool('OTEL_SDK_DISABLED', false)) return undefined;
  const endpointVar = read.optional('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  const endpoint = read.optional(endpointVar);
  if (endpoint === undefined) return undefined;
  read.httpUrl(endpointVar, endpoint);
  const protocolVar = read.optional('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  return { protocol: read.oneOf(protocolVar, ['http/protobuf', 'http/json'] as const, 'http/protobuf') };
}

/**
 * RL_WORKERS: `1` (default), a count, or `auto` (one per core the process may use). Workers share
 * counters and policies only through Redis: in memory mode each would keep its own, so refused.
 */
function readWorkers(read: Reader, counterStoreAddr: string | undefined): number {
  const name = 'RL_WORKERS';
  const text = read.optional(name);
  if (text !== undefined && text !== 'auto' && !/^\d+$/.test(text)) {
    throw new ConfigError(name, `must be a whole number of processes or "auto", got "${text}"`);
  }
  const workers = text === 'auto' ? availableParallelism() : read.int(name, Number(SETTINGS.RL_WORKERS.default), SETTINGS.RL_WORKERS.min, SETTINGS.RL_WORKERS.max);
  if (workers > 1 && counterStoreAddr === undefined) {
    throw new ConfigError(
      name,
      `${text === 'auto' ? `auto means ${workers} workers here, and ` : ''}${workers} workers need RL_COUNTERSTORE_ADDR (Redis): ` +
        `in memory mode each worker would keep its own counters and policies, so every limit would split between ` +
        `them and ${workers} workers would admit up to ${workers} times the limit. Set RL_WORKERS=1, or RL_COUNTERSTORE_ADDR.`,
    );
  }
  return workers;
}

function readHttpTimeouts(read: Reader): HttpTimeouts {
  const headersSecs = read.setting('RL_HTTP_HEADERS_TIMEOUT_SECS');
  const requestSecs = read.setting('RL_HTTP_REQUEST_TIMEOUT_SECS');
  // node:http refuses a headers timeout longer than the request timeout (which includes the headers).
  if (headersSecs > requestSecs) {
    throw new ConfigError('RL_HTTP_HEADERS_TIMEOUT_SECS', `must not exceed RL_HTTP_REQUEST_TIMEOUT_SECS (${requestSecs}), got ${headersSecs}`);
  }
  return {
    headersTimeoutMs: headersSecs * 1000,
    requestTimeoutMs: requestSecs * 1000,
    keepAliveTimeoutMs: read.setting('RL_HTTP_KEEPALIVE_TIMEOUT_SECS') * 1000,
  };
}

function readAuth(read: Reader): AuthConfig {
  const enabled = read.setting('RL_AUTH_ENABLED');
  const modeText = read.optional('RL_AUTH_MODE');
  if (modeText !== undefined && modeText !== 'apikey' && modeText !== 'jwt') {
    throw new ConfigError('RL_AUTH_MODE', `must be "apikey" or "jwt", got "${modeText}"`);
  }
  const mode = modeText as AuthConfig['mode'];
  const apiKeys = read.list('RL_AUTH_API_KEYS').map((entry, at) => parseApiKeyEntry(entry, at + 1));
  const jwtSecret = read.optional('RL_AUTH_JWT_SECRET');
  if (enabled) {
    if (!mode) throw new ConfigError('RL_AUTH_MODE', 'must be "apikey" or "jwt" when RL_AUTH_ENABLED is true');
    if (mode === 'apikey' && apiKeys.length === 0) {
      throw new ConfigError('RL_AUTH_API_KEYS', 'must list at least one key when RL_AUTH_MODE is apikey');
    }
    if (mode === 'jwt' && !jwtSecret) {
      throw new ConfigError('RL_AUTH_JWT_SECRET', 'must be set when RL_AUTH_MODE is jwt');
    }
  }
  return {
    enabled,
    mode,
    apiKeys,
    jwtSecret,
    roleClaim: read.setting('RL_AUTH_ROLE_CLAIM'),
    orgClaim: read.setting('RL_AUTH_ORG_CLAIM'),
    exemptPaths: read.setting('RL_AUTH_EXEMPT_PATHS'),
  };
}

/**
 * One `RL_AUTH_API_KEYS` entry (`position` counts from 1): `key` (admin, every organisation), `key:role`,
 * or `key:role:org1|org2` (limited to those organisations). Parts are read from the end, so a key may
 * contain colons, but then its role must follow: an entry with a colon that does not end in a role
 * (and organisations) is refused rather than taken as an admin key, so a typo in a role or an
 * organisation list cannot grant every organisation. Errors name the entry's position, never the key.
 */
export function parseApiKeyEntry(entry: string, position: number): ApiKeyEntry {
  const refuse = (problem: string) => new ConfigError('RL_AUTH_API_KEYS', `entry ${position} ${problem}`);
  if (entry === '') throw refuse('is empty');
  const parts = entry.split(':');
  if (parts.length === 1) return { key: entry, role: 'admin' };
  const last = parts[parts.length - 1];
  if (isRole(last)) {
    const key = parts.slice(0, -1).join(':');
    if (key === '') throw refuse('has no key before its role');
    return { key, role: last };
  }
  const role = parts.length >= 3 ? parts[parts.length - 2] : undefined;
  if (role === undefined || !isRole(role)) {
    throw refuse(`must be key, key:role or key:role:org1|org2 with role ${ROLES.join(' or ')} (a key containing ":" needs its role after it)`);
  }
  const key = parts.slice(0, -2).join(':');
  if (key === '') throw refuse('has no key before its role');
  const orgs = last.split('|');
  if (orgs.some((org) => !isOrgName(org))) {
    throw refuse('has an organisation list with an empty name, "*" or surrounding spaces (write org1|org2)');
  }
  return { key, role, orgs: [...new Set(orgs)] };
}

function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value);
}

function readTls(read: Reader): TlsConfig {
  const enabled = read.setting('RL_TLS_ENABLED');
  const certFile = read.optional('RL_TLS_CERT_FILE');
  const keyFile = read.optional('RL_TLS_KEY_FILE');
  if (enabled && !certFile) throw new ConfigError('RL_TLS_CERT_FILE', 'must be set when RL_TLS_ENABLED is true');
  if (enabled && !keyFile) throw new ConfigError('RL_TLS_KEY_FILE', 'must be set when RL_TLS_ENABLED is true');
  return { enabled, certFile, keyFile };
}
