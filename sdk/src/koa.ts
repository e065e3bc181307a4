/**
 * Koa middleware: `rateLimit`, `concurrency`, `tokenBudget`. Typed structurally (no import of koa),
 * so the package needs no Koa at run time or for its types.
 *
 *   app.use(rateLimit({ client }));                       // the decision: ctx.state.rateLimit
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { admitOrRefuse, checkWithDelay, defaultContext, headersAfterRefund, leaseContext, once, quantityOf, refunderOf, stateOf } from './middleware.js';
import type { CommonOptions, ConcurrencyOptions, RateLimitOptions, TokenBudgetOptions } from './middleware.js';
import type { Decision } from './types.js';

export type { ConcurrencyOptions, RateLimitOptions, RateLimitState, TokenBudgetOptions } from './middleware.js';

/** The parts of a Koa context the middleware uses. */
export interface KoaContextLike {
  method: string;
  path: string;
  ip: string;
  state: Record<string, unknown>;
  status: number;
  body: unknown;
  type: string;
  req: IncomingMessage;
  res: ServerResponse;
  set(field: string, value: string): void;
  /** A request header ('' when absent). */
  get(field: string): string;
  /** Set by @koa/router: the matched route's path pattern. */
  _matchedRoute?: string | RegExp;
  /** Everything else Koa and its plugins put on the context (ctx.query, ctx.params...). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  [key: string]: any;
}

export type KoaMiddleware<C> = (ctx: C, next: () => Promise<unknown>) => Promise<void>;

function facts(ctx: KoaContextLike) {
  const route = ctx._matchedRoute;
  return { method: ctx.method, endpoint: typeof route === 'string' ? route : ctx.path, sourceIp: ctx.ip };
}

function setHeadersOrRefuse<C extends KoaContextLike>(options: CommonOptions<C>, ctx: C, decision: Decision): Promise<boolean> {
  return admitOrRefuse(options, ctx, decision, {
    setHeader: (name, value) => ctx.set(name, value),
    refuse: (refusal) => {
      ctx.status = refusal.status;
      ctx.body = refusal.body;
      ctx.type = refusal.contentType;
    },
  });
}

/** Checks each request against the service; refused ones get 429 (see the package README for actions). */
export function rateLimit<C extends KoaContextLike = KoaContextLike>(options: RateLimitOptions<C>): KoaMiddleware<C> {
  return async (ctx, next) => {
    if (await options.skip?.(ctx)) return void (await next());
    const request = { ...defaultContext(options, ctx, facts(ctx)), quantity: quantityOf(options, ctx) };
    const decision = await checkWithDelay(options.client, request, options.maxDelayMs);
    ctx.state.rateLimit = stateOf(decision);
    if (await setHeadersOrRefuse(options, ctx, decision)) await next();
  };
}

/**
 * Holds a concurrency lease while the handler runs: acquired before, released in `finally` (handler
 * errors too) or as soon as the client goes away, whichever comes first. The decision:
 * `ctx.state.concurrency`.
 */
export function concurrency<C extends KoaContextLike = KoaContextLike>(options: ConcurrencyOptions<C>): KoaMiddleware<C> {
  return async (ctx, next) => {
    if (await options.skip?.(ctx)) return void (await next());
    const lease = leaseContext(defaultContext(options, ctx, facts(ctx)));
    const decision = await options.client.acquire(lease);
    ctx.state.concurrency = stateOf(decision);
    if (!(await setHeadersOrRefuse(options, ctx, decision))) return;
    const release = once(() => options.client.release(lease));
    const onClose = () => void release();
    ctx.res.once('close', onClose);
    try {
      await next();
    } finally {
      ctx.res.off('close', onClose);
      await release();
    }
  };
}

/**
 * Reserves `estimate(ctx)` units before the handler and refunds what `used(ctx)` says was not used
 * after it (errors too): the LLM token pattern. The decision: `ctx.state.rateLimit`; the headers, the
 * counter after the refund.
 */
export function tokenBudget<C extends KoaContextLike = KoaContextLike>(options: TokenBudgetOptions<C>): KoaMiddleware<C> {
  return async (ctx, next) => {
    if (await options.skip?.(ctx)) return void (await next());
    const request = { ...defaultContext(options, ctx, facts(ctx)), quantity: options.estimate(ctx) };
    const decision = await options.client.check(request);
    ctx.state.rateLimit = stateOf(decision);
    if (!(await setHeadersOrRefuse(options, ctx, decision))) return;
    const refund = refunderOf(options.client, request, decision, () => options.used(ctx));
    try {
      await next();
    } finally {
      // Koa sends the response after this: its headers show the counter after the refund.
      headersAfterRefund(options, await refund(), (name, value) => ctx.set(name, value));
    }
  };
}
