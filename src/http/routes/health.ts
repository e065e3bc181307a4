import Router from '@koa/router';
import type { Readiness } from '../../lifecycle/readiness.js';
import { sendError } from '../errors.js';

/** Unprefixed operational probes. /healthz: the process is alive. /readyz: send traffic here. */
export function healthRoutes(readiness: Readiness): Router {
  const router = new Router();
  router.get('/healthz', (ctx) => {
    ctx.type = 'text/plain';
    ctx.body = 'ok';
  });
  router.get('/readyz', (ctx) => {
    if (readiness.isReady) {
      ctx.type = 'text/plain';
      ctx.body = 'ok';
    } else {
      sendError(ctx, 503, `not ready: ${readiness.state}`);
    }
  });
  return router;
}
