import { SETTINGS } from '../settings.js';
import { ConfigError, Reader, readLeaseMaxWait, readRegion, type Env, type ListenAddress, type RegionConfig } from '../config.js';

/**
 * The sidecar agent's configuration, read once from `RL_*` variables by its composition root
 * (src/agent/main.ts). The variables, their defaults and bounds are declared in src/settings.ts (those
 * it shares with the server, such as RL_COUNTERSTORE_ADDR and RL_DRAIN_SECS, once for both); README's
 * "Sidecar agent" table lists them. A bad value throws ConfigError naming the variable.
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
    listen: read.setting('RL_AGENT_LISTEN'),
    upstream: read.httpUrl('RL_UPSTREAM_HTTP', read.string('RL_UPSTREAM_HTTP', SETTINGS.RL_UPSTREAM_HTTP.default)),
    syncIntervalSecs: read.setting('RL_AGENT_SYNC_SECS'),
    upstreamTimeoutMs: read.setting('RL_AGENT_UPSTREAM_TIMEOUT_MS'),
    syncTimeoutMs: read.setting('RL_AGENT_SYNC_TIMEOUT_MS'),
    upstreamHeaders,
    invalidateToken: read.optional('RL_AGENT_INVALIDATE_TOKEN'),
    counterStoreAddr,
    counterStoreTimeoutMs: read.setting('RL_COUNTERSTORE_TIMEOUT_MS'),
    leaseMaxWaitMs: readLeaseMaxWait(read),
    region: readRegion(read, counterStoreAddr),
    keyPrefix: read.setting('RL_KEY_PREFIX'),
    maxBodyBytes: read.setting('RL_MAX_BODY_BYTES'),
    drainSecs: read.setting('RL_DRAIN_SECS'),
  };
}
