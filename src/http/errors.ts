import type Koa from 'koa';
import { CounterStoreUnavailableError, RlError, type ErrorKind } from '../errors.js';
import { countInternalError } from '../observability/internal-errors.js';
import { log } from '../util/log.js';

/** The one mapping from error kinds to HTTP statuses. */
export const HTTP_STATUS: Record<ErrorKind, number> = {
  invalid_argument: 400,
  unauthenticated: 401,
  permission_denied: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  failed_validation: 422,
  unavailable: 503,
};

export function sendError(ctx: Koa.Context, status: number, message: string, extra?: Record<string, unknown>): void {
  ctx.status = status;
  ctx.type = 'application/json';
  ctx.body = { error: message, status, ...extra };
}

/**
 * Turns every failure into the JSON error body of docs/reference.md "Statuses": typed RlErrors by kind, errors
 * carrying an HTTP status from Koa or its body parser as that status, anything else as a logged 500
 * (a 5xx always means a bug here). Responses nobody wrote (unknown route, wrong method) become JSON too.
 */
export function errorHandler(): Koa.Middleware {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.body === undefined || ctx.body === null) {
        if (ctx.status === 404) sendError(ctx, 404, `no route for ${ctx.method} ${ctx.path}`);
        else if (ctx.status === 405 || ctx.status === 501) methodNotAllowed(ctx);
      }
    } catch (error) {
      const { status, body } = errorResponse(error, { method: ctx.method, path: ctx.path });
      ctx.status = status;
      ctx.type = 'application/json';
      ctx.body = body;
    }
  };
}

/**
 * The JSON error answer for anything thrown while serving a request, shared by every HTTP path:
 * typed RlErrors by kind, errors carrying a 4xx status (Koa, the body parser) as that status,
 * anything else as a logged 500 with no detail (a 5xx always means a bug here).
 */
export function errorResponse(error: unknown, where: { method: string; path: string }): { status: number; body: ErrorBody } {
  if (error instanceof RlError) {
    const status = HTTP_STATUS[error.kind];
    return { status, body: { error: error.message, status, ...error.details } };
  }
  if (error instanceof CounterStoreUnavailableError) {
    // DecisionService applies failure modes itself; one escaping here is still "try again later" (as gRPC's UNAVAILABLE).
    return { status: 503, body: { error: 'counter store unavailable', status: 503 } };
  }
  const status = httpStatusOf(error);
  if (status !== undefined && status >= 400 && status < 500) {
    return { status, body: { error: (error as Error).message || 'bad request', status } };
  }
  log.error('unhandled error', { ...where, error: String((error as Error)?.stack ?? error) });
  countInternalError('http');
  return { status: 500, body: { error: 'internal error', status: 500 } };
}

export interface ErrorBody {
  error: string;
  status: number;
  [extra: string]: unknown;
}

function methodNotAllowed(ctx: Koa.Context): void {
  const allow = ctx.response.get('Allow');
  sendError(ctx, 405, `method ${ctx.method} is not allowed on ${ctx.path}${allow ? `; allowed: ${allow}` : ''}`);
}

function httpStatusOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const e = error as { status?: unknown; statusCode?: unknown };
  const status = e.status ?? e.statusCode;
  return typeof status === 'number' ? status : undefined;
}
