import Router from '@koa/router';
import { requireUnrestricted } from '../../model/org-scope.js';
import { callerOf } from '../auth-guard.js';

/** A Prometheus text exposition: this process's Metrics, or every cluster worker's summed (src/workers). */
export interface MetricsSource {
  exposition(): Promise<string>;
  readonly contentType: string;
}

/**
 * GET /metrics (unprefixed): the Prometheus text exposition of the service's own registry. Its figures
 * are every organisation's: a caller limited to organisations gets a 403.
 */
export function metricsRoutes(metrics: MetricsSource): Router {
  const router = new Router();
  router.get('/metrics', async (ctx) => {
    requireUnrestricted(callerOf(ctx).orgs, '/metrics (every organisation\'s figures)');
    ctx.body = await metrics.exposition();
    // After the body: Koa would otherwise default a string body to text/plain without the version.
    ctx.set('Content-Type', metrics.contentType);
  });
  return router;
}
