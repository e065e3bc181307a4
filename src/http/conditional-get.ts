import { createHash } from 'node:crypto';
import { Stream } from 'node:stream';
import type Koa from 'koa';

/**
 * Cheap conditional GETs for JSON bodies (RFC 9110 §13.1.2, §8.8.3).
 *
 * After the route has answered a GET or HEAD with 200 and a JSON body, this middleware serialises the
 * body once, gives it a strong ETag (`"<sha1 of the bytes, base64url>"`, unless the route set an ETag of
 * its own, which is then kept) and answers `304 Not Modified` with no body when `If-None-Match` names
 * that tag (weak comparison, `*` included, as the RFC requires for If-None-Match).
 *
 * This is what makes the sidecar's periodic `GET /rl/v1/policies` cost no body when nothing changed.
 * Mount it after authentication (a 304 must not reveal anything an unauthenticated caller could not
 * see) and before the routers, so it wraps them.
 *
 * Bodies that are not JSON (text, buffers, streams) and non-200 answers pass through untouched.
 */
export function conditionalGet(): Koa.Middleware {
  return async (ctx, next) => {
    await next();
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return;
    if (ctx.status !== 200) return;
    const body: unknown = ctx.body;
    if (body === null || body === undefined) return;

    let serialized: string;
    if (typeof body === 'string') {
      if (!ctx.response.is('json')) return;
      serialized = body;
    } else if (typeof body === 'object' && !Buffer.isBuffer(body) && !(body instanceof Stream) && !isWebBody(body)) {
      serialized = JSON.stringify(body);
      // Serialise once: Koa would otherwise stringify the object a second time when responding.
      ctx.body = serialized;
      ctx.type = 'application/json';
    } else {
      return;
    }

    let etag = String(ctx.response.get('ETag') ?? '');
    if (etag === '') {
      etag = strongEtag(serialized);
      ctx.set('ETag', etag);
    }
    if (ifNoneMatchMatches(ctx.get('If-None-Match') ?? '', etag)) {
      ctx.status = 304; // Koa drops the body and its Content-* headers for 304.
    }
  };
}

/** `"<base64url of sha1(text)>"`: a strong validator of the exact bytes sent. */
export function strongEtag(text: string): string {
  return `"${createHash('sha1').update(text, 'utf8').digest('base64url')}"`;
}

/**
 * Does an If-None-Match header value match the current entity tag? `*` matches any current
 * representation; otherwise weak comparison (a `W/` prefix on either side is ignored).
 */
export function ifNoneMatchMatches(header: string, etag: string): boolean {
  if (header.trim() === '') return false;
  if (header.trim() === '*') return true;
  const current = opaqueTag(etag);
  return splitTags(header).some((tag) => opaqueTag(tag) === current);
}

function opaqueTag(tag: string): string {
  const t = tag.trim();
  return t.startsWith('W/') ? t.slice(2) : t;
}

/** Entity tags are quoted and may contain commas only inside quotes (they may not, per the grammar; be lenient). */
function splitTags(header: string): string[] {
  const tags: string[] = [];
  const re = /\s*((?:W\/)?"[^"]*"|[^,\s]+)\s*(?:,|$)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(header)) !== null) {
    if (m[0] === '') {
      re.lastIndex++;
      if (re.lastIndex > header.length) break;
      continue;
    }
    tags.push(m[1]);
  }
  return tags;
}

function isWebBody(body: object): boolean {
  return (
    (typeof Blob !== 'undefined' && body instanceof Blob) ||
    (typeof ReadableStream !== 'undefined' && body instanceof ReadableStream) ||
    (typeof Response !== 'undefined' && body instanceof Response)
  );
}
