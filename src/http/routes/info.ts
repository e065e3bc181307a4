import { readFileSync } from 'node:fs';
import Router from '@koa/router';
import type { MasterState } from '../../redis/master-health.js';

/** What `GET /rl/v1/info` reports: the build and the modes chosen at start-up (for `rl status`). */
export interface ServerInfo {
  /** `version` of package.json. */
  version: string;
  counters: 'redis' | 'memory';
  policy_store: 'redis' | 'file';
  auth: 'off' | 'apikey' | 'jwt';
  tls: boolean;
}

/**
 * GET /rl/v1/info: facts of this process, plus (Redis mode) each counter store master's health as of the
 * request; read-only, behind the same authentication as the API.
 */
export function infoRoutes(info: ServerInfo, counterStoreMasters?: () => MasterState[]): Router {
  const router = new Router({ prefix: '/rl/v1' });
  const body = { service: 'rl-decision-service', ...info, node: process.version };
  router.get('/info', (ctx) => {
    ctx.body = counterStoreMasters ? { ...body, counter_store_masters: counterStoreMasters() } : body;
  });
  return router;
}

/** The package version, read once: package.json sits three levels above both src/http/routes and dist/http/routes. */
export function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}
