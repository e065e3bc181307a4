import { randomBytes } from 'node:crypto';
import type Koa from 'koa';

const VALID_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Security headers of every response (README "Authentication and TLS" lists them: HSTS, X-Content-Type-Options,
 * X-Frame-Options, Content-Security-Policy). HSTS only matters over TLS; browsers ignore it on http.
 */
export const SECURITY_HEADERS: readonly (readonly [string, string])[] = [
  ['X-Content-Type-Options', 'nosniff'],
  ['X-Frame-Options', 'DENY'],
  ['Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'"],
  ['Strict-Transport-Security', 'max-age=31536000; includeSubDomains'],
];

/**
 * Our own additions beyond the documented headers, on answers to GET and HEAD only: the responses caches store
 * and browsers keep by default. Answers to POST (every decision call), PUT, PATCH and DELETE are never
 * stored by a cache without explicit freshness information and a matching Content-Location (RFC 9110
 * §9.3.3, RFC 9111 §3), which this service never sends, so `no-store` adds nothing there; and a JSON
 * answer that its CSP forbids from loading anything makes no request whose Referer the policy governs.
 * Two headers less on every decision answer save CPU (header validation) and bytes on the hot path
 * (BENCHMARKS.md).
 */
export const READ_RESPONSE_HEADERS: readonly (readonly [string, string])[] = [
  ['Referrer-Policy', 'no-referrer'],
  ['Cache-Control', 'no-store'],
];

const READ_HEADERS = [...SECURITY_HEADERS, ...READ_RESPONSE_HEADERS];

/** The headers besides X-Request-Id that every answer to a request with this method carries. */
export function headersForMethod(method: string): readonly (readonly [string, string])[] {
  return method === 'GET' || method === 'HEAD' ? READ_HEADERS : SECURITY_HEADERS;
}

/**
 * Request ids this process generates: a random prefix drawn once per process (64 bits, so two
 * processes practically never share one) and a counter, e.g. `3f9a1c0b7d2e4a65-1k2`. Unique per
 * process and across processes, valid by VALID_REQUEST_ID (so a caller may pass it on and have it
 * echoed), about 14 bytes shorter than a UUID and a fraction of `randomUUID`'s cost, which was measurable
 * per request on the decision path (BENCHMARKS.md). The ids are for correlation, not secrets; the
 * counter does reveal how many requests this process has answered, as any sequential id would.
 */
const REQUEST_ID_PREFIX = `${randomBytes(8).toString('hex')}-`;
let requestCount = 0;

/** A fresh request id (see REQUEST_ID_PREFIX). The counter stays exact: 2^53 requests take centuries. */
export function newRequestId(): string {
  return REQUEST_ID_PREFIX + (++requestCount).toString(36);
}

/**
 * A well-formed incoming request id is echoed for correlation; anything else (absent, too long, odd
 * characters that could forge log lines) is replaced by a fresh one.
 */
export function requestIdFor(incoming: string | undefined): string {
  return incoming !== undefined && VALID_REQUEST_ID.test(incoming) ? incoming : newRequestId();
}

/**
 * Security headers (headersForMethod) and X-Request-Id, set before anything else runs so that every
 * response carries them, errors included.
 */
export function responseHeaders(): Koa.Middleware {
  return async (ctx, next) => {
    const requestId = requestIdFor(ctx.get('X-Request-Id'));
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    for (const [name, value] of headersForMethod(ctx.method)) ctx.set(name, value);
    await next();
  };
}
