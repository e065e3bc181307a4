import type http from 'node:http';
import type Koa from 'koa';
import { koaBody } from 'koa-body';
import { RlError, invalidField } from '../errors.js';

/** Both are JSON (CONTRACT.md); merge-patch is what PATCH sends. */
export const JSON_TYPES = ['application/json', 'application/merge-patch+json'];
const METHODS_WITH_BODY = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Reads JSON bodies with a byte limit counted after gzip/deflate inflation (co-body counts decoded
 * bytes), so a small compressed body cannot expand past RL_MAX_BODY_BYTES. Non-JSON bodies are a 415,
 * malformed JSON a 400, oversized bodies a 413. A request without a body gets `undefined`.
 */
export function jsonBody(maxBytes: number): Koa.Middleware {
  const parse = koaBody({
    json: true,
    jsonStrict: true,
    jsonLimit: maxBytes,
    jsonTypes: JSON_TYPES,
    urlencoded: false,
    text: false,
    multipart: false,
    parsedMethods: ['POST', 'PUT', 'PATCH', 'DELETE'] as never,
    onError: (error: Error & { type?: string; status?: number }) => {
      throw bodyError(error, maxBytes);
    },
  });
  return async (ctx, next) => {
    if (METHODS_WITH_BODY.has(ctx.method) && hasBody(ctx.req.headers) && !ctx.is(JSON_TYPES)) {
      throw new RlError(
        'unsupported_media_type',
        `body must be JSON (Content-Type: application/json), got ${ctx.get('Content-Type') || 'no Content-Type'}`,
      );
    }
    return parse(ctx, next);
  };
}

/** Whether the request declares a body (chunked, or a non-zero Content-Length). */
export function hasBody(headers: http.IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** The errors a body is refused with, shared with the decision fast path so both answer alike. */
export const bodyErrors = {
  tooLarge: (maxBytes: number) => new RlError('payload_too_large', `body exceeds the limit of ${maxBytes} bytes (RL_MAX_BODY_BYTES)`),
  malformed: (problem: string) => invalidField('body', `malformed JSON: ${problem}`),
  protoKey: () => invalidField('body', 'must not contain "__proto__" keys'),
};

function bodyError(error: Error & { type?: string; status?: number }, maxBytes: number): Error {
  if (error.type === 'entity.too.large' || error.status === 413) {
    return bodyErrors.tooLarge(maxBytes);
  }
  if (error.status === 415) return new RlError('unsupported_media_type', error.message);
  // co-body parses with bourne, which refuses prototype-poisoning keys outright instead of dropping them.
  if (/forbidden prototype property/i.test(error.message)) {
    return bodyErrors.protoKey();
  }
  if (error instanceof SyntaxError || error.type === 'entity.parse.failed' || error.status === 400) {
    return bodyErrors.malformed(error.message);
  }
  return error;
}

/** The parsed body of this request, or undefined when it had none. */
export function bodyOf(ctx: Koa.Context): unknown {
  return (ctx.request as unknown as { body?: unknown }).body;
}
