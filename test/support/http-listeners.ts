import type http from 'node:http';
import type Koa from 'koa';
import { Authenticator } from '../../src/auth/authenticator.js';
import { loadServerConfig } from '../../src/config.js';
import { createApp, createHttpListener, type AppDeps } from '../../src/http/app.js';
import { HttpAuth } from '../../src/http/auth-guard.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import type { Policy } from '../../src/policy/types.js';
import { serve, type TestServer } from './http.js';

/**
 * The two ways a request reaches the decision routes: the Koa app alone, and the server's listener
 * (the decision fast path in front of the same app). Suites run against both so they cannot drift.
 */
export const HTTP_PATHS: [string, (deps: AppDeps) => Koa | http.RequestListener][] = [
  ['Koa app', (deps) => createApp(deps)],
  [
    'server listener (decision fast path)',
    (deps) => {
      const auth = loadServerConfig({}).auth;
      return createHttpListener({ ...deps, auth: new HttpAuth(new Authenticator(auth), auth) });
    },
  ],
];

/**
 * Serves `build` over a ready DecisionService with `policies` and fresh in-memory counters;
 * `close` stops the server, then the counters.
 */
export async function serveDecisions(
  build: (deps: AppDeps) => Koa | http.RequestListener,
  policies: Policy[],
  maxBodyBytes: number,
): Promise<TestServer> {
  const counters = new MemoryCounterStore({ sweepIntervalMs: 0 });
  const readiness = new Readiness();
  readiness.markReady();
  const decisions = new DecisionService({ policies: new LiveMatcher(policies), counters, keyPrefix: 't:' });
  const server = await serve(build({ decisions, readiness, maxBodyBytes }));
  return {
    url: server.url,
    close: async () => {
      await server.close();
      await counters.close();
    },
  };
}
