import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Koa from 'koa';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { createApp } from '../../src/http/app.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { policyRoutes } from '../../src/http/routes/policies.js';
import { FilePolicyStore } from '../../src/policy-store/file-policy-store.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { PolicyService } from '../../src/policy-service/policy-service.js';
import { serve, type TestServer } from './http.js';

/** The policy routes on the Koa app, over a file store in a fresh temporary directory. */
export interface PolicyApi {
  dir: string;
  store: FilePolicyStore;
  service: PolicyService;
  server: TestServer;
  /** Stops the server and the store and removes the directory. */
  close(): Promise<void>;
}

/** `now`: the decisions' clock (default Date.now); a fixed one keeps every decision in one window whatever the scheduling. */
export async function servePolicyApi(options: { maxBodyBytes: number; guards?: Koa.Middleware[]; now?: () => number }): Promise<PolicyApi> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-policy-api-'));
  const store = await FilePolicyStore.open(dir);
  const matcher = new LiveMatcher();
  const service = new PolicyService({ store, matcher });
  const readiness = new Readiness();
  readiness.markReady();
  const decisions = new DecisionService({
    policies: matcher,
    counters: new MemoryCounterStore({ sweepIntervalMs: 0, now: options.now }),
    keyPrefix: 't:',
    now: options.now,
  });
  const server = await serve(
    createApp({ decisions, readiness, maxBodyBytes: options.maxBodyBytes, routers: [policyRoutes(service)], guards: options.guards }),
  );
  return {
    dir,
    store,
    service,
    server,
    async close() {
      await server.close();
      service.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
