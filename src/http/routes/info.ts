import { readFileSync } from 'node:fs';
import Router from '@koa/router';
import type { MasterState } from '../../redis/master-health.js';
import type { CounterSnapshotStatus } from '../../counters/snapshot/counter-snapshots.js';
import type { LeaseTotals, RegionStatus, RlqsStatus, ServerInfoBody } from '../../schema/server-info.js';
import { callerOf } from '../auth-guard.js';

/** The build and the modes chosen at start-up (for `rl status`); the body's shape is ServerInfoSchema. */
export type ServerInfo = Pick<ServerInfoBody, 'version' | 'counters' | 'policy_store' | 'auth' | 'tls'>;

/** What is read on each request: each one present only in the mode it belongs to. */
export interface LiveInfo {
  /** Redis mode: each counter store master's health. */
  counterStoreMasters?: () => MasterState[];
  /** Region mode: the region and the global store's state. */
  region?: () => RegionStatus;
  /** Redis mode (where leases run): this process's lease totals (unrestricted callers only). */
  leases?: () => LeaseTotals;
  /** Memory mode with snapshots on: the age and size of the counters' last snapshot. */
  counterSnapshot?: () => CounterSnapshotStatus;
  /** Envoy's rate limit quota service: open streams, their buckets and the units they hold. */
  rlqs?: () => RlqsStatus;
}

/**
 * GET /rl/v1/info: facts of this process, plus what is live in its mode (masters, region, leases) as of
 * the request; read-only, behind the same authentication as the API.
 */
export function infoRoutes(info: ServerInfo, live: LiveInfo = {}): Router {
  const router = new Router({ prefix: '/rl/v1' });
  const body = { service: 'rl-decision-service', ...info, node: process.version };
  router.get('/info', (ctx) => {
    const answer: ServerInfoBody = { ...body };
    if (live.counterStoreMasters) answer.counter_store_masters = live.counterStoreMasters();
    if (live.region) answer.region = live.region();
    // Every organisation's lease totals: not for a credential limited to organisations (as on the dashboard).
    if (live.leases && callerOf(ctx).orgs === undefined) answer.leases = live.leases();
    if (live.counterSnapshot) answer.counter_snapshot = live.counterSnapshot();
    if (live.rlqs && callerOf(ctx).orgs === undefined) answer.rlqs = live.rlqs();
    ctx.body = answer;
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
