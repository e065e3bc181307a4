/**
 * Koa middleware: `rateLimit`, `concurrency`, `tokenBudget`. Typed structurally (no import of koa),
 * so the package needs no Koa at run time or for its types.
 *
 *   app.use(rateLimit({ client }));                       // the decision: ctx.state.rateLimit
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  checkWithDelay,
  defaultContext,
  headersFor,
  once,
  quantityOf,
  refusalOf,
  stateOf,
  type CommonOptions,
  type ConcurrencyOptions,
  type RateLimitOptions,
  type TokenBudgetOptions,
} from './middleware.js';
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

async function setHeadersOrRefuse<C extends KoaContextLike>(options: CommonOptions<C>, ctx: C, decision: Decision): Promise<boolean> {
  for (const [name, value] of headersFor(decision, options.headers)) ctx.set(name, value);
  if (decision.allowed) return true;
  if (options.onLimited) {
    await options.onLimited(ctx, decision);
    return false;
  }
  const refusal = refusalOf(decision);
  ctx.status = refusal.status;
  ctx.body = refusal.body;
  ctx.type = refusal.contentType;
  return false;
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
    const base = defaultContext(options, ctx, facts(ctx));
    // Each request is its own lease unless the caller chose an id.
    const lease = { ...base, request_id: base.request_id ?? randomUUID() };
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
 * after it (errors too): the LLM token pattern. The decision: `ctx.state.rateLimit`.
 */
export function tokenBudget<C extends KoaContextLike = KoaContextLike>(options: TokenBudgetOptions<C>): KoaMiddleware<C> {
  return async (ctx, next) => {
    if (await options.skip?.(ctx)) return void (await next());
    const reserved = options.estimate(ctx);
    const request = { ...defaultContext(options, ctx, facts(ctx)), quantity: reserved };
    const decision = await options.client.check(request);
    ctx.state.rateLimit = stateOf(decision);
    if (!(await setHeadersOrRefuse(options, ctx, decision))) return;
    try {
      await next();
    } finally {
      const used = options.used(ctx);
      const unused = used === undefined ? 0 : reserved - Math.max(0, used);
      if (unused > 0 && decision.reason !== 'service_unavailable') await once(() => options.client.refund({ ...request, quantity: unused }))();
    }
  };
}
