/**
 * Express middleware: `rateLimit`, `concurrency`, `tokenBudget`. Typed structurally (no import of
 * express). Hooks receive the request; `req.res` is its response.
 *
 *   app.use(rateLimit({ client }));                       // the decision: req.rateLimit
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { admitOrRefuse, checkWithDelay, defaultContext, headersAfterRefund, leaseContext, once, quantityOf, refunderOf, stateOf } from './middleware.js';
import type { CommonOptions, ConcurrencyOptions, RateLimitOptions, RateLimitState, TokenBudgetOptions } from './middleware.js';
import type { Decision } from './types.js';

export type { ConcurrencyOptions, RateLimitOptions, RateLimitState, TokenBudgetOptions } from './middleware.js';

/** The parts of an Express request the middleware uses; the decisions land on it. */
export interface ExpressRequestLike extends IncomingMessage {
  path: string;
  baseUrl: string;
  ip?: string;
  /** A request header. */
  get(name: string): string | undefined;
  route?: { path: unknown };
  res?: ExpressResponseLike;
  rateLimit?: RateLimitState;
  concurrency?: RateLimitState;
  /** Everything else Express and its plugins put on the request (req.query, req.params, req.user...). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  [key: string]: any;
}

/** An Express response: `locals` is where handlers leave what hooks read afterwards (e.g. tokens used). */
export interface ExpressResponseLike extends ServerResponse {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  locals: Record<string, any>;
}

// Express's own Request type learns the two fields (the usual augmentation of the global namespace
// that @types/express declares; harmless where it is not installed).
declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** The decision of `rateLimit` or `tokenBudget`. */
      rateLimit?: RateLimitState;
      /** The decision of `concurrency`. */
      concurrency?: RateLimitState;
    }
  }
}

export type ExpressMiddleware<R> = (req: R, res: ServerResponse, next: (error?: unknown) => void) => void;

function facts(req: ExpressRequestLike) {
  const route = req.route?.path;
  const endpoint = typeof route === 'string' ? req.baseUrl + route : req.baseUrl + req.path;
  return { method: req.method ?? 'GET', endpoint, sourceIp: req.ip };
}

function setHeadersOrRefuse<R extends ExpressRequestLike>(options: CommonOptions<R>, req: R, res: ServerResponse, decision: Decision): Promise<boolean> {
  return admitOrRefuse(options, req, decision, {
    setHeader: (name, value) => res.setHeader(name, value),
    refuse: (refusal) => {
      res.statusCode = refusal.status;
      res.setHeader('Content-Type', refusal.contentType);
      res.end(JSON.stringify(refusal.body));
    },
  });
}

/** An async body as an Express middleware: a thrown error goes to `next(error)`. */
function express<R>(body: (req: R, res: ServerResponse, next: (error?: unknown) => void) => Promise<void>): ExpressMiddleware<R> {
  return (req, res, next) => {
    body(req, res, next).catch(next);
  };
}

/** Checks each request against the service; refused ones get 429 (see the package README for actions). */
export function rateLimit<R extends ExpressRequestLike = ExpressRequestLike>(options: RateLimitOptions<R>): ExpressMiddleware<R> {
  return express(async (req, res, next) => {
    if (await options.skip?.(req)) return next();
    const request = { ...defaultContext(options, req, facts(req)), quantity: quantityOf(options, req) };
    const decision = await checkWithDelay(options.client, request, options.maxDelayMs);
    req.rateLimit = stateOf(decision);
    if (await setHeadersOrRefuse(options, req, res, decision)) next();
  });
}

/**
 * Holds a concurrency lease until the response is finished or the connection is gone (handler errors
 * end in a response too). The decision: `req.concurrency`.
 */
export function concurrency<R extends ExpressRequestLike = ExpressRequestLike>(options: ConcurrencyOptions<R>): ExpressMiddleware<R> {
  return express(async (req, res, next) => {
    if (await options.skip?.(req)) return next();
    const lease = leaseContext(defaultContext(options, req, facts(req)));
    const decision = await options.client.acquire(lease);
    req.concurrency = stateOf(decision);
    if (!(await setHeadersOrRefuse(options, req, res, decision))) return;
    const release = once(() => options.client.release(lease));
    // 'close' comes after 'finish' and after an abort alike.
    res.once('close', () => void release());
    next();
  });
}

/**
 * Reserves `estimate(req)` units before the handler and refunds what `used(req)` says was not used
 * when the handler ends the response (or the connection closes first): the LLM token pattern. The
 * decision: `req.rateLimit`; the headers, the counter after the refund (unless the handler streamed,
 * so the headers left before the end).
 */
export function tokenBudget<R extends ExpressRequestLike = ExpressRequestLike>(options: TokenBudgetOptions<R>): ExpressMiddleware<R> {
  return express(async (req, res, next) => {
    if (await options.skip?.(req)) return next();
    const request = { ...defaultContext(options, req, facts(req)), quantity: options.estimate(req) };
    const decision = await options.client.check(request);
    req.rateLimit = stateOf(decision);
    if (!(await setHeadersOrRefuse(options, req, res, decision))) return;
    const refund = refunderOf(options.client, request, decision, () => options.used(req));
    holdEnd(res, async () => headersAfterRefund(options, await refund(), (name, value) => !res.headersSent && res.setHeader(name, value)));
    res.once('close', () => void refund());
    next();
  });
}

/** Runs `before` when the handler ends the response, and ends it once `before` has settled. */
function holdEnd(res: ServerResponse, before: () => Promise<void>): void {
  const end = res.end;
  res.end = function (this: ServerResponse, ...args: unknown[]) {
    res.end = end;
    const finish = () => (end as (...a: unknown[]) => ServerResponse).apply(res, args);
    before().then(finish, finish);
    return res;
  } as ServerResponse['end'];
}
