import Router from '@koa/router';
import type { DecisionService } from '../../decision/decision-service.js';
import type { Tracing } from '../../observability/tracing.js';
import { callerOf } from '../auth-guard.js';
import { bodyOf } from '../body.js';
import { decideBody } from '../decide-body.js';

/** POST /rl/v1/check, /acquire, /release, /refund: validate the RequestContext, decide, answer 200 with the Decision. */
export function decisionRoutes(decisions: DecisionService, tracing?: Tracing): Router {
  const router = new Router({ prefix: '/rl/v1' });
  for (const operation of ['check', 'acquire', 'release', 'refund'] as const) {
    router.post(`/${operation}`, async (ctx) => {
      ctx.body = await decideBody(decisions, tracing, operation, bodyOf(ctx), ctx.headers, callerOf(ctx).orgs);
    });
  }
  return router;
}
