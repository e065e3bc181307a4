import { ConfigError, Reader, readLeaseMaxWait, readRegion, type Env, type ListenAddress, type RegionConfig } from '../config.js';

/**
 * The sidecar agent's configuration, read once from `RL_*` variables by its composition root
 * (src/agent/main.ts). A bad value throws ConfigError naming the variable.
 *
 * | Variable | Meaning | Default |
 * |---|---|---|
 * | RL_AGENT_LISTEN | `[host]:port` the agent listens on | `:18080` |
 * | RL_UPSTREAM_HTTP | base URL of a server | `http://127.0.0.1:8080` |
 * | RL_AGENT_SYNC_SECS | policy sync interval | 30 |
 * | RL_AGENT_UPSTREAM_TIMEOUT_MS | deadline of one forwarded decision | 500 |
 * | RL_AGENT_SYNC_TIMEOUT_MS | deadline of one policy fetch | 5000 |
 * | RL_AGENT_API_KEY | sent upstream as `X-Api-Key` | none |
 * | RL_AGENT_TOKEN | sent upstream as `Authorization: Bearer` (API key or JWT) | none |
 * | RL_AGENT_INVALIDATE_TOKEN | when set, `POST /rl/v1/agent/invalidate` needs `Authorization: Bearer <it>` | none |
 * | RL_COUNTERSTORE_ADDR | when set, decide against this Redis directly (no hop) | none |
 * | RL_COUNTERSTORE_TIMEOUT_MS | Redis command timeout | 100 |
 * | RL_KEY_PREFIX | counter key prefix; must equal the servers' | `rl:` |
 * | RL_REGION, RL_GLOBAL_COUNTERSTORE_ADDR, RL_GLOBAL_COUNTERSTORE_TIMEOUT_MS | with RL_COUNTERSTORE_ADDR: as the servers of this region (global budgets from the region's units) | none |
 * | RL_LEASE_MAX_WAIT_MS | with RL_COUNTERSTORE_ADDR: the longest a decision waits for a lease refill (0–10000), then refused with reason lease_wait_timeout | 100 |
 * | RL_MAX_BODY_BYTES | largest request body | 1048576 |
 * | RL_DRAIN_SECS | on SIGTERM, how long in-flight requests get | 10 |
 *
 * The credential needs the `read-only` role (or admin) on the server: the agent reads
 * `GET /rl/v1/policies` and makes decision calls.
 */
export interface AgentConfig {
  listen: ListenAddress;
  /** Upstream base URL without a trailing slash. */
  upstream: string;
  syncIntervalSecs: number;
  upstreamTimeoutMs: number;
  syncTimeoutMs: number;
  /** Headers that carry the agent's credential upstream (empty when none is configured). */
  upstreamHeaders: Record<string, string>;
  invalidateToken: string | undefined;
  /** undefined = forward decisions to the upstream; set = decide against this Redis directly. */
  counterStoreAddr: string | undefined;
  counterStoreTimeoutMs: number;
  /** RL_LEASE_MAX_WAIT_MS: the longest a decision waits for a lease refill (process leases, region units). */
  leaseMaxWaitMs: number;
  /** With RL_COUNTERSTORE_ADDR: this sidecar's region, as its servers' (docs/distribution.md). */
  region: RegionConfig | undefined;
  keyPrefix: string;
  maxBodyBytes: number;
  drainSecs: number;
}

export function loadAgentConfig(env: Env): AgentConfig {
  const read = new Reader(env);
  const apiKey = read.optional('RL_AGENT_API_KEY');
  const token = read.optional('RL_AGENT_TOKEN');
  if (apiKey !== undefined && token !== undefined) {
    throw new ConfigError('RL_AGENT_TOKEN', 'set either RL_AGENT_API_KEY or RL_AGENT_TOKEN, not both');
  }
  for (const [name, value] of [['RL_AGENT_API_KEY', apiKey], ['RL_AGENT_TOKEN', token], ['RL_AGENT_INVALIDATE_TOKEN', read.optional('RL_AGENT_INVALIDATE_TOKEN')]] as const) {
    // A header value cannot carry control characters or spaces; never echo the secret itself.
    if (value !== undefined && !/^[\x21-\x7e]+$/.test(value)) {
      throw new ConfigError(name, 'must be printable ASCII without spaces');
    }
  }
  const upstreamHeaders: Record<string, string> = {};
  if (apiKey !== undefined) upstreamHeaders['x-api-key'] = apiKey;
  if (token !== undefined) upstreamHeaders.authorization = `Bearer ${token}`;

  const counterStoreAddr = read.counterStoreAddr();
  return {
    listen: read.listen('RL_AGENT_LISTEN', ':18080'),
    upstream: read.httpUrl('RL_UPSTREAM_HTTP', read.string('RL_UPSTREAM_HTTP', 'http://127.0.0.1:8080')),
    syncIntervalSecs: read.int('RL_AGENT_SYNC_SECS', 30, 1, 86_400),
    upstreamTimeoutMs: read.int('RL_AGENT_UPSTREAM_TIMEOUT_MS', 500, 1, 60_000),
    syncTimeoutMs: read.int('RL_AGENT_SYNC_TIMEOUT_MS', 5000, 1, 300_000),
    upstreamHeaders,
    invalidateToken: read.optional('RL_AGENT_INVALIDATE_TOKEN'),
    counterStoreAddr,
    counterStoreTimeoutMs: read.int('RL_COUNTERSTORE_TIMEOUT_MS', 100, 1, 60_000),
    leaseMaxWaitMs: readLeaseMaxWait(read),
    region: readRegion(read, counterStoreAddr),
    keyPrefix: read.string('RL_KEY_PREFIX', 'rl:'),
    maxBodyBytes: read.int('RL_MAX_BODY_BYTES', 1024 * 1024, 1, 1024 * 1024 * 1024),
    drainSecs: read.int('RL_DRAIN_SECS', 10, 0, 3600),
  };
}
