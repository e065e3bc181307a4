import type Koa from 'koa';
import { ANONYMOUS, type Access, type Authenticator } from '../auth/authenticator.js';
import type { AuthConfig } from '../config.js';
import { RlError } from '../errors.js';
import { log } from '../util/log.js';

/** Decision calls: any valid credential. Case-insensitive and with an optional trailing slash, as the router matches. */
const DECISION_CALL = /^\/rl\/v1\/(?:check|acquire|release)\/?$/i;
/** Policy validation changes nothing, so read-only callers may use it (the contract is silent; decided here). */
const READ_ONLY_POST = /^\/rl\/v1\/policies\/validate\/?$/i;
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * What an HTTP call needs. Anything not recognised as a decision call or a read is a write (admin),
 * so a route added later is protected by default.
 */
export function accessOf(method: string, path: string): Access {
  const m = method.toUpperCase();
  if (READ_METHODS.has(m)) return 'read';
  if (m === 'POST' && DECISION_CALL.test(path)) return 'decide';
  if (m === 'POST' && READ_ONLY_POST.test(path)) return 'read';
  return 'write';
}

/**
 * Koa guard (mounted through `createApp({ guards: [...] })`, after headers and error handling, before
 * the body parser and the routes): authenticates, authorises, and leaves the caller on
 * `ctx.state.principal` (the policy routes record its `subject` as the audit's `changed_by`).
 *
 * - auth disabled: every call is `anonymous` with the admin role;
 * - exempt paths (RL_AUTH_EXEMPT_PATHS, exact match): pass without credentials, principal unset;
 * - no/invalid credential: 401 with `WWW-Authenticate`; known caller without the role: 403.
 *
 * Only outcomes are logged (at debug): method, path, reason, the principal's subject — never a header value.
 */
export function authGuard(authenticator: Authenticator, config: AuthConfig): Koa.Middleware {
  const exempt = new Set(config.exemptPaths);
  return async (ctx, next) => {
    if (!config.enabled) {
      ctx.state.principal = ANONYMOUS;
      return next();
    }
    if (exempt.has(ctx.path)) return next();

    const apiKey = ctx.get('X-Api-Key');
    const authorization = ctx.get('Authorization');
    let principal;
    try {
      principal = authenticator.authenticate({ apiKey, authorization });
    } catch (error) {
      if (error instanceof RlError && error.kind === 'unauthenticated') {
        ctx.set('WWW-Authenticate', authenticator.challenge(apiKey !== '' || authorization !== ''));
        log.debug('authentication failed', { request_id: ctx.state.requestId, method: ctx.method, path: ctx.path, reason: error.message });
      }
      throw error;
    }

    const access = accessOf(ctx.method, ctx.path);
    try {
      authenticator.authorize(principal, access);
    } catch (error) {
      log.debug('permission denied', {
        request_id: ctx.state.requestId,
        method: ctx.method,
        path: ctx.path,
        subject: principal.subject,
        role: principal.role,
        access,
      });
      throw error;
    }
    ctx.state.principal = principal;
    return next();
  };
}
