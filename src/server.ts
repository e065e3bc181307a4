import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ServerConfig, ListenAddress } from './config.js';
import type { CounterStore } from './counters/counter-store.js';
import { MemoryCounterStore } from './counters/memory-store.js';
import { connectRedisCounterStore } from './counters/redis-store.js';
import { DecisionService } from './decision/decision-service.js';
import { createApp } from './http/app.js';
import { Readiness } from './http/readiness.js';
import { policyRoutes } from './http/routes/policies.js';
import { FilePolicyStore } from './policy/file-policy-store.js';
import { LiveMatcher } from './policy/live-matcher.js';
import { loadPolicyFile } from './policy/policy-file.js';
import { PolicyService } from './policy/policy-service.js';
import type { PolicyStore } from './policy/policy-store.js';
import { RedisPolicyStore } from './policy/redis-policy-store.js';
import { log } from './util/log.js';

export interface RunningServer {
  httpPort: number;
  readiness: Readiness;
  policies: PolicyService;
  /** Stop taking traffic, let in-flight requests finish (bounded by RL_DRAIN_SECS), release resources. */
  drain(): Promise<void>;
}

/** Builds every component from the typed config, listens, and reports ready. */
export async function startServer(config: ServerConfig): Promise<RunningServer> {
  const readiness = new Readiness();
  const store = await openPolicyStore(config);
  const seeded = await seedPolicyStore(store, config).catch(async (error: unknown) => {
    await store.close();
    throw error;
  });
  const matcher = new LiveMatcher();
  // Keeps the matcher in sync with every local and remote change from here on.
  const policies = new PolicyService({ store, matcher });
  const counters: CounterStore = config.counterStoreAddr
    ? connectRedisCounterStore(config.counterStoreAddr, { commandTimeoutMs: config.counterStoreTimeoutMs })
    : new MemoryCounterStore();
  const decisions = new DecisionService({ policies: matcher, counters, keyPrefix: config.keyPrefix });
  const app = createApp({
    decisions,
    readiness,
    maxBodyBytes: config.maxBodyBytes,
    routers: [policyRoutes(policies)],
  });

  const httpServer = http.createServer(app.callback());
  const httpPort = await listen(httpServer, config.httpAddr);
  log.info('listening', {
    http: httpPort,
    counters: config.counterStoreAddr ? 'redis' : 'memory',
    policy_store: config.counterStoreAddr ? 'redis' : `file:${config.dataDir}`,
    policies: store.list().length,
    seeded_from_file: seeded,
  });
  readiness.markReady();

  let draining: Promise<void> | undefined;
  const drain = () => {
    draining ??= (async () => {
      readiness.markDraining();
      await closeGracefully(httpServer, config.drainSecs * 1000);
      policies.close();
      await Promise.all([store.close(), counters.close()]);
    })();
    return draining;
  };
  return { httpPort, readiness, policies, drain };
}

/** Redis hashes when a shared store is configured (multi node), else the journal in RL_DATA_DIR. */
function openPolicyStore(config: ServerConfig): Promise<PolicyStore> {
  return config.counterStoreAddr
    ? RedisPolicyStore.open({ addr: config.counterStoreAddr, keyPrefix: config.keyPrefix })
    : FilePolicyStore.open(config.dataDir);
}

/**
 * RL_POLICY_FILE seeds a store that has never held a policy; once it has, the store wins and the file
 * is not even read (CONTRACT.md). A bad file on first start stops the process (PolicyFileError).
 */
function seedPolicyStore(store: PolicyStore, config: ServerConfig): Promise<boolean> {
  return store.seedIfEmpty(() => loadPolicyFile(config.policyFile));
}

export function listen(server: http.Server, address: ListenAddress): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Stops accepting, closes idle keep-alive sockets, and force-closes whatever is left after the deadline. */
export function closeGracefully(server: http.Server, deadlineMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => server.closeAllConnections(), deadlineMs);
    timer.unref();
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}
