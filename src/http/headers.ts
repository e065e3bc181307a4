import { randomUUID } from 'node:crypto';
import type Koa from 'koa';

const VALID_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Security headers of every response (spec §1; HSTS only matters over TLS, browsers ignore it on http). */
export const SECURITY_HEADERS: readonly (readonly [string, string])[] = [
  ['X-Content-Type-Options', 'nosniff'],
  ['X-Frame-Options', 'DENY'],
  ['Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'"],
  ['Referrer-Policy', 'no-referrer'],
  ['Cache-Control', 'no-store'],
  ['Strict-Transport-Security', 'max-age=31536000; includeSubDomains'],
];

/**
 * A well-formed incoming request id is echoed for correlation; anything else (absent, too long, odd
 * characters that could forge log lines) is replaced by a fresh UUID.
 */
export function requestIdFor(incoming: string | undefined): string {
  return incoming !== undefined && VALID_REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/**
 * Security headers and X-Request-Id, set before anything else runs so that every response carries
 * them, errors included.
 */
export function responseHeaders(): Koa.Middleware {
  return async (ctx, next) => {
    const requestId = requestIdFor(ctx.get('X-Request-Id'));
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    for (const [name, value] of SECURITY_HEADERS) ctx.set(name, value);
    await next();
  };
}
