import type http from 'node:http';
import type Koa from 'koa';
import { Authenticator } from '../../src/auth/authenticator.js';
import { loadServerConfig } from '../../src/config.js';
import { createApp, createHttpListener, type AppDeps } from '../../src/http/app.js';
import { HttpAuth } from '../../src/http/auth-guard.js';

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
