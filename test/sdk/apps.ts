/**
 * The same small application built twice, on Koa (with @koa/router) and on Express, each using the
 * SDK middleware the way its README shows. Routes match the policies of service.ts; the user is the
 * `x-user` header; every handler answers the decisions the middleware left for it.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Router from '@koa/router';
import express from 'express';
import Koa from 'koa';
import * as koaLimits from '@rl/client/koa';
import * as expressLimits from '@rl/client/express';
import type { Decision, RateLimitClient, RequestContext } from '@rl/client';

/** Lets a test hold handlers open (/slow) and know when they are running. */
export class Gate {
  entered = 0;
  private opened!: () => void;
  private readonly open = new Promise<void>((resolve) => (this.opened = resolve));
  private waiters: (() => void)[] = [];

  /** Called by a handler: counts it, then waits for `release()`. */
  async pass(): Promise<void> {
    this.entered++;
    for (const w of this.waiters.splice(0)) w();
    await this.open;
  }

  release(): void {
    this.opened();
  }

  /** Resolves once `n` handlers have entered. */
  async untilEntered(n: number): Promise<void> {
    while (this.entered < n) await new Promise<void>((resolve) => this.waiters.push(resolve));
  }
}

/** A client that counts releases and refunds, so tests wait for them by count, never by time. */
export class CountingClient implements RateLimitClient {
  releases = 0;
  refunds = 0;
  private waiters: (() => void)[] = [];

  constructor(private readonly inner: RateLimitClient) {}

  check(ctx: RequestContext) {
    return this.inner.check(ctx);
  }
  peek(ctx: RequestContext) {
    return this.inner.peek(ctx);
  }
  acquire(ctx: RequestContext) {
    return this.inner.acquire(ctx);
  }
  async release(ctx: RequestContext) {
    const d = await this.inner.release(ctx);
    this.releases++;
    this.wake();
    return d;
  }
  async refund(ctx: RequestContext) {
    const d = await this.inner.refund(ctx);
    this.refunds++;
    this.wake();
    return d;
  }
  close() {
    return this.inner.close();
  }

  async until(what: 'releases' | 'refunds', n: number): Promise<void> {
    while (this[what] < n) await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }
}

export interface AppHandle {
  url: string;
  gate: Gate;
  close(): Promise<void>;
}

export type Framework = 'koa' | 'express';

export function startApp(framework: Framework, client: RateLimitClient, gate = new Gate()): Promise<AppHandle> {
  const listener = framework === 'koa' ? koaApp(client, gate).callback() : expressApp(client, gate);
  return listen(http.createServer(listener), gate);
}

function koaApp(client: RateLimitClient, gate: Gate): Koa {
  const { rateLimit, concurrency, tokenBudget } = koaLimits;
  const user = (ctx: Koa.Context) => ctx.get('x-user') || undefined;
  const answer = (ctx: Koa.Context) => {
    ctx.body = { rateLimit: ctx.state.rateLimit ?? null, concurrency: ctx.state.concurrency ?? null };
  };
  const router = new Router();
  for (const path of ['/deny', '/drop', '/sample', '/downgrade', '/shadow', '/delay', '/delay-long']) {
    router.get(path, rateLimit({ client, user }), answer);
  }
  router.get('/legacy', rateLimit({ client, user, headers: 'legacy', context: (ctx) => ({ endpoint: '/deny', user_id: ctx.get('x-user') }) }), answer);
  router.get('/quiet', rateLimit({ client, user, headers: false, context: (ctx) => ({ endpoint: '/deny', user_id: ctx.get('x-user') }) }), answer);
  router.get('/skip', rateLimit({ client, skip: (ctx) => ctx.get('x-skip') === '1', context: (ctx) => ({ endpoint: '/deny', user_id: ctx.get('x-user') }) }), answer);
  router.get(
    '/custom',
    rateLimit({
      client,
      context: (ctx) => ({ endpoint: '/drop', user_id: ctx.get('x-user') }),
      onLimited: (ctx, decision: Decision) => {
        ctx.status = 503;
        ctx.body = { custom: decision.action };
      },
    }),
    answer,
  );
  router.get(
    '/low-priority',
    rateLimit({ client, context: (ctx) => ({ signal_type: 'http', endpoint: '/low-priority', user_id: ctx.get('x-user'), severity: ctx.get('x-severity') }) }),
    answer,
  );
  router.get('/slow', concurrency({ client, user }), async (ctx) => {
    await gate.pass();
    answer(ctx);
  });
  router.get('/fails', concurrency({ client, user }), () => {
    throw new Error('handler failed');
  });
  router.get(
    '/llm',
    tokenBudget({ client, user, estimate: (ctx) => Number(ctx.get('x-estimate')), used: (ctx) => ctx.state.used as number | undefined }),
    (ctx) => {
      ctx.state.used = Number(ctx.get('x-used'));
      answer(ctx);
    },
  );
  const app = new Koa();
  app.silent = true; // the /fails handler errors on purpose
  app.use(router.routes());
  return app;
}

function expressApp(client: RateLimitClient, gate: Gate): express.Express {
  const { rateLimit, concurrency, tokenBudget } = expressLimits;
  const user = (req: express.Request) => req.get('x-user') || undefined;
  const answer = (req: express.Request, res: express.Response) => {
    res.json({ rateLimit: req.rateLimit ?? null, concurrency: req.concurrency ?? null });
  };
  const app = express();
  for (const path of ['/deny', '/drop', '/sample', '/downgrade', '/shadow', '/delay', '/delay-long']) {
    app.get(path, rateLimit({ client, user }), answer);
  }
  app.get('/legacy', rateLimit({ client, headers: 'legacy', context: (req) => ({ endpoint: '/deny', user_id: req.get('x-user') }) }), answer);
  app.get('/quiet', rateLimit({ client, headers: false, context: (req) => ({ endpoint: '/deny', user_id: req.get('x-user') }) }), answer);
  app.get('/skip', rateLimit({ client, skip: (req) => req.get('x-skip') === '1', context: (req) => ({ endpoint: '/deny', user_id: req.get('x-user') }) }), answer);
  app.get(
    '/custom',
    rateLimit({
      client,
      context: (req) => ({ endpoint: '/drop', user_id: req.get('x-user') }),
      onLimited: (req, decision) => {
        req.res!.status(503).json({ custom: decision.action });
      },
    }),
    answer,
  );
  app.get(
    '/low-priority',
    rateLimit({ client, context: (req) => ({ signal_type: 'http', endpoint: '/low-priority', user_id: req.get('x-user'), severity: req.get('x-severity') }) }),
    answer,
  );
  app.get('/slow', concurrency({ client, user }), async (req, res) => {
    await gate.pass();
    answer(req, res);
  });
  app.get('/fails', concurrency({ client, user }), () => {
    throw new Error('handler failed');
  });
  app.get(
    '/llm',
    tokenBudget({ client, user, estimate: (req) => Number(req.get('x-estimate')), used: (req) => req.res!.locals.used as number | undefined }),
    (req, res) => {
      res.locals.used = Number(req.get('x-used'));
      answer(req, res);
    },
  );
  // Express's default error handler logs the stack; the /fails handler errors on purpose.
  app.use((_error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(500).json({ error: 'handler failed' });
  });
  return app;
}

async function listen(server: http.Server, gate: Gate): Promise<AppHandle> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    gate,
    close: () =>
      new Promise<void>((resolve) => {
        gate.release();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
