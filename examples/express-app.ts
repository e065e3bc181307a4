/**
 * An Express application limited by the rate-limit service through the SDK middleware (sdk/README.md).
 *
 *   npm start                                   # the service on :8080 with examples/policies.json
 *   npx tsx examples/express-app.ts             # this app on :3000
 *   curl -i -H 'x-user-id: alice' localhost:3000/hello
 *
 * Environment: RL_URL (default http://127.0.0.1:8080), RL_API_KEY (when the service has auth on),
 * RL_TIMEOUT_MS (default 50: slower answers fail open), PORT (default 3000; 0 picks a free port). Routes use policies of examples/policies.json:
 *   GET  /hello     acme-api-per-user: 100 requests per user per minute, then 429
 *   POST /reports   report-export-concurrency: 3 exports per tenant at once (x-tenant-id)
 *   POST /complete  llm-token-budget: reserves ?max_tokens, refunds what the "model" did not use
 */
import { pathToFileURL } from 'node:url';
import express from 'express';
import type { RateLimitClient } from '@rl/client';
import { concurrency, rateLimit, tokenBudget } from '@rl/client/express';
import { serveExample } from './serve.js';

export function createApp(client: RateLimitClient): express.Express {
  const app = express();

  app.get('/hello', rateLimit({ client, fields: { org_id: 'acme' }, user: (req) => req.get('x-user-id') || 'anonymous' }), (req, res) => {
    res.json({ hello: req.get('x-user-id') || 'anonymous', remaining: req.rateLimit?.remaining });
  });

  app.post(
    '/reports',
    concurrency({ client, context: (req) => ({ signal_type: 'job', job_type: 'report_export', tenant_id: req.get('x-tenant-id') || 'demo' }) }),
    async (_req, res) => {
      await new Promise((resolve) => setTimeout(resolve, 100)); // the "export"
      res.json({ exported: true });
    },
  );

  app.post(
    '/complete',
    tokenBudget({
      client,
      context: (req) => ({ resource: 'llm-completions', org_id: req.get('x-org-id') || 'demo' }),
      estimate: (req) => Number(req.query.max_tokens ?? 256),
      used: (req) => req.res?.locals.tokensUsed as number | undefined,
    }),
    (req, res) => {
      res.locals.tokensUsed = Math.ceil(Number(req.query.max_tokens ?? 256) / 4); // the "model" answered briefly
      res.json({ completion: '...', tokens: res.locals.tokensUsed });
    },
  );

  return app;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) serveExample('express', createApp);
