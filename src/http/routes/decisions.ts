import Router from '@koa/router';
import type { DecisionService } from '../../decision/decision-service.js';
import { parseOperationContext } from '../../model/request-context.js';
import { DECISION_SPANS, httpTraceCarrier, itself, type Tracing } from '../../observability/tracing.js';
import { bodyOf } from '../body.js';

/** POST /rl/v1/check, /acquire, /release, /refund: validate the RequestContext, decide, answer 200 with the Decision. */
export function decisionRoutes(decisions: DecisionService, tracing?: Tracing): Router {
  const router = new Router({ prefix: '/rl/v1' });
  for (const operation of ['check', 'acquire', 'release', 'refund'] as const) {
    const decide = (body: unknown) => decisions.decideNow(operation, parseOperationContext(operation, body));
    router.post(`/${operation}`, async (ctx) => {
      const body = bodyOf(ctx);
      ctx.body = await (tracing ? tracing.decision(DECISION_SPANS[operation], httpTraceCarrier(ctx.headers), () => decide(body), itself) : decide(body));
    });
  }
  return router;
}
