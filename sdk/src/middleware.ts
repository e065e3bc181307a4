/**
 * What the Koa and Express middleware share: options, the default request context, the `delay`
 * re-check, how a decision is answered (headers, onLimited, the refusal), the lease id and the refund
 * of unused units. Framework-free; koa.ts and express.ts only adapt it to their request and response
 * objects and to when their handler is done.
 */
import { randomUUID } from 'node:crypto';
import { PROBLEM_CONTENT_TYPE, problemDetails, renderRateLimitHeaders, type RateLimitHeaderStyle } from './headers.js';
import type { Decision, RateLimitClient, RequestContext } from './types.js';

/** The decision a middleware leaves for the handler (`ctx.state.rateLimit`, `req.rateLimit`). */
export interface RateLimitState extends Decision {
  /** True when the limit was exceeded under a `downgrade` policy: serve a cheaper answer. */
  downgraded: boolean;
}

/** Options of every middleware; `C` is what the framework hands a middleware (Koa ctx, Express req). */
export interface CommonOptions<C> {
  /** The client to ask: `createClient(...)` of this package, or the server package's embedded client. */
  client: RateLimitClient;
  /**
   * The RequestContext of a request. Default: signal_type http, method, endpoint (the route path when
   * the router knows it, else the path), source_ip, user_id from `user`, plus `fields`.
   */
  context?: (c: C) => RequestContext;
  /** The user id for the default context (e.g. from a session or a verified token). */
  user?: (c: C) => string | undefined;
  /** Fixed fields added to the default context (e.g. `{ service: 'checkout', tenant_id: 'acme' }`). */
  fields?: RequestContext;
  /** Requests for which it returns true pass without a decision. */
  skip?: (c: C) => boolean | Promise<boolean>;
  /** Response headers: README "SDK" `RateLimit`/`RateLimit-Policy` (`ietf`, default), `X-RateLimit-*` (`legacy`), none (`false`). */
  headers?: RateLimitHeaderStyle | false;
  /**
   * Answers a refused request instead of the default 429 problem+json (headers are set already).
   * It must respond; the handler is not run.
   */
  onLimited?: (c: C, decision: Decision) => void | Promise<void>;
}

export interface RateLimitOptions<C> extends CommonOptions<C> {
  /** Units this request costs (default 1). */
  quantity?: number | ((c: C) => number);
  /** Longest wait for a `delay` action before re-checking once (default 1000 ms); longer ones are refused. */
  maxDelayMs?: number;
}

export type ConcurrencyOptions<C> = CommonOptions<C>;

export interface TokenBudgetOptions<C> extends CommonOptions<C> {
  /** Units to reserve before the handler runs (e.g. max tokens of an LLM call). */
  estimate: (c: C) => number;
  /**
   * Units actually used, read after the handler (errors included). The reservation minus this is
   * refunded; `undefined` (unknown) keeps the whole reservation.
   */
  used: (c: C) => number | undefined;
}

/** The parts of a request the default context reads, as each adapter finds them. */
export interface RequestFacts {
  method: string;
  endpoint: string;
  sourceIp?: string;
}

export function defaultContext<C>(options: CommonOptions<C>, c: C, facts: RequestFacts): RequestContext {
  if (options.context) return options.context(c);
  const ctx: RequestContext = { signal_type: 'http', method: facts.method, endpoint: facts.endpoint };
  if (facts.sourceIp) ctx.source_ip = facts.sourceIp;
  const user = options.user?.(c);
  if (user !== undefined && user !== '') ctx.user_id = user;
  return { ...ctx, ...options.fields };
}

export function quantityOf<C>(options: RateLimitOptions<C>, c: C): number {
  const q = typeof options.quantity === 'function' ? options.quantity(c) : options.quantity;
  return q ?? 1;
}

/**
 * `check`, and for a `delay` answer that asks for at most `maxDelayMs`: wait it out, then check once
 * more (the second answer stands, whatever it is).
 */
export async function checkWithDelay(client: RateLimitClient, ctx: RequestContext, maxDelayMs = 1000): Promise<Decision> {
  const first = await client.check(ctx);
  if (first.allowed || first.action !== 'delay' || first.retry_after > maxDelayMs) return first;
  await new Promise((resolve) => setTimeout(resolve, first.retry_after));
  return client.check(ctx);
}

export function stateOf(decision: Decision): RateLimitState {
  return { ...decision, downgraded: decision.allowed && decision.action === 'downgrade' };
}

/** The headers to set for `decision` under the `headers` option. */
function headersFor(decision: Decision, style: RateLimitHeaderStyle | false | undefined): [string, string][] {
  return style === false ? [] : renderRateLimitHeaders(decision, style ?? 'ietf');
}

export interface Refusal {
  status: number;
  contentType: string;
  body: object;
}

/**
 * The answer to a refused request: 429 with the problem body of README "SDK"; 503 when the service could
 * not be asked and the client fails closed (not a quota the caller exceeded, so not a 429).
 */
function refusalOf(decision: Decision): Refusal {
  if (decision.reason === 'service_unavailable') {
    return {
      status: 503,
      contentType: PROBLEM_CONTENT_TYPE,
      body: { type: 'about:blank', title: 'Service Unavailable', status: 503, detail: 'The rate-limit service could not be reached; requests are refused until it answers.' },
    };
  }
  return { status: 429, contentType: PROBLEM_CONTENT_TYPE, body: problemDetails(decision) };
}

/** How an adapter writes to its framework's response. */
export interface ResponseWriter {
  setHeader(name: string, value: string): void;
  refuse(refusal: Refusal): void;
}

/**
 * Sets the rate-limit headers; a refused request is then answered by `onLimited` if given, else with
 * the refusal. True when the request goes on to the handler.
 */
export async function admitOrRefuse<C>(options: CommonOptions<C>, c: C, decision: Decision, response: ResponseWriter): Promise<boolean> {
  for (const [name, value] of headersFor(decision, options.headers)) response.setHeader(name, value);
  if (decision.allowed) return true;
  if (options.onLimited) await options.onLimited(c, decision);
  else response.refuse(refusalOf(decision));
  return false;
}

/** The context a concurrency lease is taken and returned with: each request its own lease unless the caller chose an id. */
export function leaseContext(base: RequestContext): RequestContext {
  return { ...base, request_id: base.request_id ?? randomUUID() };
}

/**
 * Gives back, once however many of `finally`, the response's end and `close` ask, what a tokenBudget
 * request reserved (`request.quantity`) and did not use (`used()`, read at the first call). Nothing when
 * `used` is unknown, or when failMode answered (the service never counted the reservation). Resolves to
 * the refund's decision (undefined when nothing was refunded or the refund failed).
 */
export function refunderOf(client: RateLimitClient, request: RequestContext & { quantity: number }, decision: Decision, used: () => number | undefined): () => Promise<Decision | undefined> {
  let done: Promise<Decision | undefined> | undefined;
  return () => {
    done ??= (async () => {
      const spent = used();
      const unused = spent === undefined ? 0 : request.quantity - Math.max(0, spent);
      if (unused <= 0 || decision.reason === 'service_unavailable') return undefined;
      // A refund that fails is the service's problem, never the response's.
      return client.refund({ ...request, quantity: unused }).catch(() => undefined);
    })();
    return done;
  };
}

/**
 * After a tokenBudget refund: the rate-limit headers say where the counter stands now, not what the
 * reservation left (a refund the service could not count speaks for no limit and changes nothing).
 */
export function headersAfterRefund<C>(options: CommonOptions<C>, refunded: Decision | undefined, setHeader: (name: string, value: string) => void): void {
  if (refunded === undefined) return;
  for (const [name, value] of headersFor(refunded, options.headers)) setHeader(name, value);
}

/** Calls `fn` at most once, however many of `finally`, `close` and errors ask for it. */
export function once(fn: () => Promise<unknown>): () => Promise<void> {
  let done: Promise<void> | undefined;
  return () => {
    done ??= fn().then(
      () => undefined,
      () => undefined, // a release/refund that fails is the service's problem, never the response's
    );
    return done;
  };
}
