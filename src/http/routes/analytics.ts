import Router from '@koa/router';
import { invalidField } from '../../errors.js';
import { requireUnrestricted } from '../../model/org-scope.js';
import type { Analytics, AnalyticsView } from '../../analytics/analytics.js';
import { callerOf } from '../auth-guard.js';

export const MAX_TOP = 10_000;

/**
 * GET /rl/v1/analytics/summary?top=N: the summary of README "Observability"; `top` cuts by_policy and top_tags. A
 * caller limited to organisations gets its view (`viewOf`, analytics/org-view.ts); without one, a 403.
 */
export function analyticsRoutes(analytics: Analytics, viewOf?: (orgs: readonly string[]) => AnalyticsView): Router {
  const router = new Router({ prefix: '/rl/v1' });
  router.get('/analytics/summary', (ctx) => {
    const top = parseTop(ctx.query.top);
    const orgs = callerOf(ctx).orgs;
    if (orgs === undefined) {
      ctx.body = analytics.summary(top);
    } else {
      if (viewOf === undefined) requireUnrestricted(orgs, 'the analytics summary');
      ctx.body = analytics.summary(top, viewOf!(orgs));
    }
  });
  return router;
}

/** Absent → undefined (everything tracked); otherwise a positive decimal integer ≤ MAX_TOP, else a 400 naming `top`. */
export function parseTop(raw: string | string[] | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const problem = `must be a positive integer no greater than ${MAX_TOP}`;
  if (Array.isArray(raw)) throw invalidField('top', `${problem}, given once; got ${raw.length} values`);
  if (!/^[0-9]{1,6}$/.test(raw)) throw invalidField('top', `${problem}, got ${JSON.stringify(raw.length > 40 ? raw.slice(0, 40) + '…' : raw)}`);
  const top = Number(raw);
  if (top < 1 || top > MAX_TOP) throw invalidField('top', `${problem}, got ${top}`);
  return top;
}
