/**
 * A Koa application limited by the rate-limit service through the SDK middleware (sdk/README.md).
 *
 *   npm start                                   # the service on :8080 with examples/policies.json
 *   npx tsx examples/koa-app.ts                 # this app on :3000
 *   curl -i -H 'x-user-id: alice' localhost:3000/hello
 *
 * Environment: RL_URL (default http://127.0.0.1:8080), RL_API_KEY (when the service has auth on),
 * RL_TIMEOUT_MS (default 50: slower answers fail open), PORT (default 3000; 0 picks a free port). Routes use policies of examples/policies.json:
 *   GET  /hello     acme-api-per-user: 100 requests per user per minute, then 429
 *   POST /reports   report-export-concurrency: 3 exports per tenant at once (x-tenant-id)
 *   POST /complete  llm-token-budget: reserves ?max_tokens, refunds what the "model" did not use
 */
import { pathToFileURL } from 'node:url';
import Router from '@koa/router';
import Koa from 'koa';
import type { RateLimitClient } from '@rl/client';
import { concurrency, rateLimit, tokenBudget } from '@rl/client/koa';
import { serveExample } from './serve.js';

export function createApp(client: RateLimitClient): Koa {
  const router = new Router();

  router.get(
    '/hello',
    rateLimit({ client, fields: { org_id: 'acme' }, user: (ctx) => ctx.get('x-user-id') || 'anonymous' }),
    (ctx) => {
      ctx.body = { hello: ctx.get('x-user-id') || 'anonymous', remaining: ctx.state.rateLimit.remaining };
    },
  );

  router.post(
    '/reports',
    concurrency({ client, context: (ctx) => ({ signal_type: 'job', job_type: 'report_export', tenant_id: ctx.get('x-tenant-id') || 'demo' }) }),
    async (ctx) => {
      await new Promise((resolve) => setTimeout(resolve, 100)); // the "export"
      ctx.body = { exported: true };
    },
  );

  router.post(
    '/complete',
    tokenBudget({
      client,
      context: (ctx) => ({ resource: 'llm-completions', org_id: ctx.get('x-org-id') || 'demo' }),
      estimate: (ctx) => Number(ctx.query.max_tokens ?? 256),
      used: (ctx) => ctx.state.tokensUsed as number | undefined,
    }),
    (ctx) => {
      ctx.state.tokensUsed = Math.ceil(Number(ctx.query.max_tokens ?? 256) / 4); // the "model" answered briefly
      ctx.body = { completion: '...', tokens: ctx.state.tokensUsed };
    },
  );

  const app = new Koa();
  app.use(router.routes());
  app.use(router.allowedMethods());
  return app;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) serveExample('koa', createApp);
