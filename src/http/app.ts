import type http from 'node:http';
import Koa from 'koa';
import type Router from '@koa/router';
import type { DecisionService } from '../decision/decision-service.js';
import type { Tracing } from '../observability/tracing.js';
import { httpAuthGuard, type HttpAuth } from './auth-guard.js';
import { jsonBody } from './body.js';
import { withDecisionFastPath } from './decision-fast-path.js';
import { conditionalGet } from './conditional-get.js';
import { errorHandler } from './errors.js';
import { responseHeaders } from './headers.js';
import type { Readiness } from '../lifecycle/readiness.js';
import { decisionRoutes } from './routes/decisions.js';
import { healthRoutes } from './routes/health.js';

export interface AppDeps {
  decisions: DecisionService;
  readiness: Readiness;
  maxBodyBytes: number;
  /** Routers of other capabilities (policy management, metrics), mounted after the decision routes. */
  routers?: Router[];
  /** Runs before any route, after headers and error handling (authentication). */
  guards?: Koa.Middleware[];
  /** Routers that need no credentials (the dashboard's static page), mounted before the guards. */
  publicRouters?: Router[];
  /** OpenTelemetry spans per decision (absent: tracing off, nothing is called). */
  tracing?: Tracing;
}

/**
 * The HTTP front-end as a Koa app that does not listen: tests drive `app.callback()`, the composition
 * root wraps it in an http(s) server.
 */
export function createApp(deps: AppDeps): Koa {
  const app = new Koa();
  app.proxy = false;
  // Errors are answered by errorHandler; Koa's own default logger would print them a second time.
  app.silent = true;
  app.use(responseHeaders());
  app.use(errorHandler());
  for (const router of deps.publicRouters ?? []) app.use(router.routes());
  for (const guard of deps.guards ?? []) app.use(guard);
  // After authentication (a 304 reveals nothing to a caller who may not read) and around every route.
  app.use(conditionalGet());
  app.use(jsonBody(deps.maxBodyBytes));
  const routers = [healthRoutes(deps.readiness), decisionRoutes(deps.decisions, deps.tracing), ...(deps.routers ?? [])];
  for (const router of routers) {
    app.use(router.routes());
    app.use(router.allowedMethods());
  }
  return app;
}

/**
 * The server's HTTP request listener: the decision fast path in front of the Koa app, both
 * authenticating with the same HttpAuth.
 */
export function createHttpListener(deps: Omit<AppDeps, 'guards'> & { auth: HttpAuth }): http.RequestListener {
  const app = createApp({ ...deps, guards: [httpAuthGuard(deps.auth)] });
  return withDecisionFastPath({ decisions: deps.decisions, auth: deps.auth, maxBodyBytes: deps.maxBodyBytes, tracing: deps.tracing }, app.callback());
}
