import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ServerConfig, ListenAddress } from './config.js';
import type { CounterStore } from './counters/counter-store.js';
import { MemoryCounterStore } from './counters/memory-store.js';
import { connectRedisCounterStore } from './counters/redis-store.js';
import { DecisionService } from './decision/decision-service.js';
import { createApp } from './http/app.js';
import { Readiness } from './http/readiness.js';
import { LiveMatcher } from './policy/live-matcher.js';
import { loadPolicyFile } from './policy/policy-file.js';
import { log } from './util/log.js';

export interface RunningServer {
  httpPort: number;
  readiness: Readiness;
  /** Stop taking traffic, let in-flight requests finish (bounded by RL_DRAIN_SECS), release resources. */
  drain(): Promise<void>;
}

/** Builds every component from the typed config, listens, and reports ready. */
export async function startServer(config: ServerConfig): Promise<RunningServer> {
  const readiness = new Readiness();
  const policies = loadPolicyFile(config.policyFile);
  const matcher = new LiveMatcher(policies);
  const counters: CounterStore = config.counterStoreAddr
    ? connectRedisCounterStore(config.counterStoreAddr, { commandTimeoutMs: config.counterStoreTimeoutMs })
    : new MemoryCounterStore();
  const decisions = new DecisionService({ policies: matcher, counters, keyPrefix: config.keyPrefix });
  const app = createApp({ decisions, readiness, maxBodyBytes: config.maxBodyBytes });

  const httpServer = http.createServer(app.callback());
  const httpPort = await listen(httpServer, config.httpAddr);
  log.info('listening', {
    http: httpPort,
    counters: config.counterStoreAddr ? 'redis' : 'memory',
    policies: policies.length,
  });
  readiness.markReady();

  let draining: Promise<void> | undefined;
  const drain = () => {
    draining ??= (async () => {
      readiness.markDraining();
      await closeGracefully(httpServer, config.drainSecs * 1000);
      await counters.close();
    })();
    return draining;
  };
  return { httpPort, readiness, drain };
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
