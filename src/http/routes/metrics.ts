import Router from '@koa/router';
import type { Metrics } from '../../observability/metrics.js';

/** GET /metrics (unprefixed): the Prometheus text exposition of the service's own registry. */
export function metricsRoutes(metrics: Metrics): Router {
  const router = new Router();
  router.get('/metrics', async (ctx) => {
    ctx.body = await metrics.exposition();
    // After the body: Koa would otherwise default a string body to text/plain without the version.
    ctx.set('Content-Type', metrics.contentType);
  });
  return router;
}
