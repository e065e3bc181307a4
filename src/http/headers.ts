import { randomUUID } from 'node:crypto';
import type Koa from 'koa';

const VALID_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Security headers and X-Request-Id, set before anything else runs so that every response carries
 * them, errors included. A well-formed incoming request id is echoed for correlation; anything else
 * (too long, odd characters that could forge log lines) is replaced by a fresh UUID.
 */
export function responseHeaders(options: { hsts: boolean }): Koa.Middleware {
  return async (ctx, next) => {
    const incoming = ctx.get('X-Request-Id');
    const requestId = VALID_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set('Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'");
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set('Cache-Control', 'no-store');
    // HSTS is only meaningful over TLS, but the spec applies it unconditionally; browsers ignore it on http.
    if (options.hsts) ctx.set('Strict-Transport-Security', 'max-age=31536000; includeSubDomains');
    await next();
  };
}
