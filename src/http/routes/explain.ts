import Router from '@koa/router';
import type { Operation } from '../../decision/decision-service.js';
import type { Explainer } from '../../decision/explainer.js';
import { RlError, invalidField } from '../../errors.js';
import { scopeDecisionOrg } from '../../model/org-scope.js';
import { parseRequestContext } from '../../model/request-context.js';
import { callerOf } from '../auth-guard.js';
import { bodyOf } from '../body.js';
import { EMPTY_DECISION_BODY_MESSAGE } from '../decide-body.js';

const DECISIONS: readonly Operation[] = ['check', 'refund', 'acquire', 'release'];

/**
 * POST /rl/v1/explain?decision=check: a RequestContext in, which policy of each layer would decide it
 * out (decision/explainer.ts). Read access; a caller limited to organisations is held to them as for a
 * decision, and sees only the policies it may read.
 */
export function explainRoutes(explainer: Explainer): Router {
  const router = new Router({ prefix: '/rl/v1' });
  router.post('/explain', (ctx) => {
    const decision = ctx.query.decision ?? 'check';
    if (typeof decision !== 'string' || !(DECISIONS as readonly string[]).includes(decision)) {
      throw invalidField('decision', `must be one of ${DECISIONS.join(', ')}, got ${JSON.stringify(decision)}`);
    }
    const body = bodyOf(ctx);
    if (body === undefined) throw new RlError('invalid_argument', EMPTY_DECISION_BODY_MESSAGE, 'body');
    const caller = callerOf(ctx);
    ctx.body = explainer.explain(scopeDecisionOrg(caller.orgs, parseRequestContext(body)), decision as Operation, caller);
  });
  return router;
}
