import Router from '@koa/router';
import type { DecisionService } from '../../decision/decision-service.js';
import { parseOperationContext, parseRequestContext } from '../../model/request-context.js';
import { bodyOf } from '../body.js';

/** POST /rl/v1/check, /acquire, /release, /refund: validate the RequestContext, decide, answer 200 with the Decision. */
export function decisionRoutes(decisions: DecisionService): Router {
  const router = new Router({ prefix: '/rl/v1' });
  router.post('/check', async (ctx) => {
    ctx.body = await decisions.check(parseRequestContext(bodyOf(ctx)));
  });
  router.post('/acquire', async (ctx) => {
    ctx.body = await decisions.acquire(parseRequestContext(bodyOf(ctx)));
  });
  router.post('/release', async (ctx) => {
    ctx.body = await decisions.release(parseRequestContext(bodyOf(ctx)));
  });
  router.post('/refund', async (ctx) => {
    ctx.body = await decisions.refund(parseOperationContext('refund', bodyOf(ctx)));
  });
  return router;
}
