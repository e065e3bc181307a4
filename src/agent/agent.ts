import http from 'node:http';
import type { RedisCounterStore } from '../redis/redis-store.js';
import { composeDecisionCore } from '../composition/decision-core.js';
import { closeGracefully, listen } from '../lifecycle/listening.js';
import { ShutdownOrder } from '../lifecycle/shutdown-order.js';
import { redactUrl } from '../util/fetch.js';
import { log } from '../util/log.js';
import { createAgentApp, type AgentCounters } from './agent-app.js';
import type { AgentConfig } from './config.js';
import { PolicySync } from './policy-sync.js';
import { UpstreamClient } from './upstream.js';

export interface RunningAgent {
  port: number;
  sync: PolicySync;
  counters: AgentCounters;
  /** Set in Redis-direct mode. */
  counterStore: RedisCounterStore | undefined;
  /** What a close closes, in its order (the names of its steps). */
  shutdown: Pick<ShutdownOrder, 'names'>;
  /** Stops syncing, lets in-flight requests finish (bounded by RL_DRAIN_SECS), lets go of its units, closes Redis. */
  close(): Promise<void>;
}

/**
 * Builds the sidecar from its typed config and listens. The first policy sync is started at once and
 * awaited (it is bounded by RL_AGENT_SYNC_TIMEOUT_MS) after the port is open, so the agent answers
 * from its first second: until it has policies, it forwards everything.
 */
export async function startAgent(config: AgentConfig): Promise<RunningAgent> {
  const sync = new PolicySync({
    upstream: config.upstream,
    headers: config.upstreamHeaders,
    intervalSecs: config.syncIntervalSecs,
    timeoutMs: config.syncTimeoutMs,
  });
  const upstream = new UpstreamClient({
    upstream: config.upstream,
    headers: config.upstreamHeaders,
    timeoutMs: config.upstreamTimeoutMs,
  });
  // One order for a start-up that fails half-way and for the close: what opened last closes first.
  const shutdown = new ShutdownOrder();
  return shutdown.opening(async () => {
    // Redis-direct mode: the servers' core over the synced policies (with regions, as the region's servers).
    const core = config.counterStoreAddr ? await composeDecisionCore(config, { shutdown, matcher: sync.matcher, policies: { from: 'matcher' } }) : undefined;
    const { app, counters } = createAgentApp({
      sync,
      upstream,
      upstreamUrl: redactUrl(config.upstream),
      local: core?.decisions,
      invalidateToken: config.invalidateToken,
      maxBodyBytes: config.maxBodyBytes,
    });
    const server = http.createServer(app.callback());
    shutdown.add('listener', () => closeGracefully(server, config.drainSecs * 1000));
    const port = await listen(server, config.listen);
    log.info('listening', {
      http: port,
      upstream: redactUrl(config.upstream),
      mode: core ? 'redis' : 'forward',
      sync_interval_secs: config.syncIntervalSecs,
    });
    // Stopped first on close: no sync changes the policies while the listener drains.
    shutdown.add('policy sync', () => sync.stop());
    const first = await sync.start();
    if (first.ok) log.info('policies synced', { policies: sync.status().policies });
    return { port, sync, counters, counterStore: core?.redisCounters, shutdown, close: () => shutdown.close() };
  });
}
