import http from 'node:http';
import type { RedisCounterStore } from '../counters/redis-store.js';
import { DecisionService } from '../decision/decision-service.js';
import { connectCounterStores } from '../composition/counter-stores.js';
import { closeGracefully, listen } from '../lifecycle/listening.js';
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
  /** Stops syncing, lets in-flight requests finish (bounded by RL_DRAIN_SECS), closes Redis. */
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
  // With regions, as the region's servers: global budgets from the region's units, the rest in its store.
  const stores = connectCounterStores(config);
  const counterStore = stores?.redis;
  const store = stores?.region ?? counterStore;
  // Its DecisionService lets go of the units it holds (process leases, the region's) on policy changes and on close.
  const local = store
    ? new DecisionService({
        policies: sync.matcher,
        counters: store,
        keyPrefix: config.keyPrefix,
        region: config.region?.name,
        leases: { maxWaitMs: config.leaseMaxWaitMs, takeTimeoutMs: config.counterStoreTimeoutMs },
      })
    : undefined;
  const { app, counters } = createAgentApp({
    sync,
    upstream,
    upstreamUrl: redactUrl(config.upstream),
    local,
    invalidateToken: config.invalidateToken,
    maxBodyBytes: config.maxBodyBytes,
  });

  const server = http.createServer(app.callback());
  let port: number;
  try {
    port = await listen(server, config.listen);
  } catch (error) {
    await store?.close();
    throw error;
  }
  log.info('listening', {
    http: port,
    upstream: redactUrl(config.upstream),
    mode: local ? 'redis' : 'forward',
    sync_interval_secs: config.syncIntervalSecs,
  });
  const first = await sync.start();
  if (first.ok) log.info('policies synced', { policies: sync.status().policies });

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      sync.stop();
      await closeGracefully(server, config.drainSecs * 1000);
      await local?.letGoLeases();
      await store?.close();
    })();
    return closing;
  };
  return { port, sync, counters, counterStore, close };
}
