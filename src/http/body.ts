import type Koa from 'koa';
import { RlError } from '../errors.js';
import { JSON_TYPES, hasBody, readJsonBody } from './json-body.js';

export { JSON_TYPES, bodyErrors, hasBody } from './json-body.js';

const METHODS_WITH_BODY = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * The Koa app's body parser: the shared reader of json-body.ts (the decision fast path uses the same
 * one), behind a Content-Type check. Non-JSON bodies are a 415; a request without a body gets
 * `undefined`.
 */
export function jsonBody(maxBytes: number): Koa.Middleware {
  return async (ctx, next) => {
    if (METHODS_WITH_BODY.has(ctx.method) && hasBody(ctx.req.headers)) {
      if (!ctx.is(JSON_TYPES)) {
        throw new RlError(
          'unsupported_media_type',
          `body must be JSON (Content-Type: application/json), got ${ctx.get('Content-Type') || 'no Content-Type'}`,
        );
      }
      (ctx.request as unknown as { body?: unknown }).body = await new Promise((resolve, reject) => {
        readJsonBody(ctx.req, maxBytes, (error, value) => {
          if (error === undefined) return resolve(value);
          if (error.closeConnection) ctx.set('Connection', 'close');
          reject(error);
        });
      });
    }
    return next();
  };
}

/** The parsed body of this request, or undefined when it had none. */
export function bodyOf(ctx: Koa.Context): unknown {
  return (ctx.request as unknown as { body?: unknown }).body;
}
