import type Koa from 'koa';
import { ANONYMOUS, type Access, type Authenticator, type Principal } from '../auth/authenticator.js';
import type { AuthConfig } from '../config.js';
import type { Actor } from '../model/org-scope.js';
import { RlError } from '../errors.js';
import { log } from '../util/log.js';

/** Decision calls: any valid credential. Case-insensitive and with an optional trailing slash, as the router matches. */
const DECISION_CALL = /^\/rl\/v1\/(?:check|acquire|release|refund)\/?$/i;
/** Policy validation and explain change nothing, so read-only callers may use them. */
const READ_ONLY_POST = /^\/rl\/v1\/(?:policies\/validate|explain)\/?$/i;
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
 * The authentication decision of one HTTP call, shared by the Koa guard and the decision fast path
 * (http/decision-fast-path.ts), so both transports of HTTP apply exactly the same rules:
 *
 * - auth disabled: every call is `anonymous` with the admin role;
 * - exempt paths (RL_AUTH_EXEMPT_PATHS, exact match): pass without credentials, no principal;
 * - no/invalid credential: RlError 'unauthenticated' (401) after `setHeader('WWW-Authenticate', …)`;
 *   known caller without the role: RlError 'permission_denied' (403).
 *
 * Only outcomes are logged (at debug): method, path, reason, the principal's subject — never a header value.
 */
export class HttpAuth {
  private readonly exempt: Set<string>;

  constructor(
    private readonly authenticator: Authenticator,
    private readonly config: AuthConfig,
  ) {
    this.exempt = new Set(config.exemptPaths);
  }

  check(call: {
    method: string;
    path: string;
    apiKey: string;
    authorization: string;
    requestId: string | undefined;
    setHeader: (name: string, value: string) => void;
  }): Principal | undefined {
    if (!this.config.enabled) return ANONYMOUS;
    if (this.exempt.has(call.path)) return undefined;

    let principal: Principal;
    try {
      principal = this.authenticator.authenticate({ apiKey: call.apiKey, authorization: call.authorization });
    } catch (error) {
      if (error instanceof RlError && error.kind === 'unauthenticated') {
        call.setHeader('WWW-Authenticate', this.authenticator.challenge(call.apiKey !== '' || call.authorization !== ''));
        log.debug('authentication failed', { request_id: call.requestId, method: call.method, path: call.path, reason: error.message });
      }
      throw error;
    }

    const access = accessOf(call.method, call.path);
    try {
      this.authenticator.authorize(principal, access);
    } catch (error) {
      log.debug('permission denied', {
        request_id: call.requestId,
        method: call.method,
        path: call.path,
        subject: principal.subject,
        role: principal.role,
        access,
      });
      throw error;
    }
    return principal;
  }
}

/**
 * Koa guard (mounted through `createApp({ guards: [...] })`, after headers and error handling, before
 * the body parser and the routes): authenticates and authorises by an HttpAuth shared with the decision
 * fast path, and leaves the caller on `ctx.state.principal` (the policy routes record its `subject` as
 * the audit's `changed_by`).
 */
export function httpAuthGuard(auth: HttpAuth): Koa.Middleware {
  return async (ctx, next) => {
    const principal = auth.check({
      method: ctx.method,
      path: ctx.path,
      apiKey: ctx.get('X-Api-Key'),
      authorization: ctx.get('Authorization'),
      requestId: ctx.state.requestId,
      setHeader: (name, value) => ctx.set(name, value),
    });
    if (principal) ctx.state.principal = principal;
    return next();
  };
}

/**
 * The caller the guard left on `ctx.state.principal` (its subject is the audit's `changed_by`, its
 * organisations limit what it reaches), else an unrestricted `anonymous` (an exempt path, a test app
 * without the guard).
 */
export function callerOf(ctx: Koa.Context): Actor {
  return (ctx.state as { principal?: Actor }).principal ?? ANONYMOUS_CALLER;
}

const ANONYMOUS_CALLER: Actor = Object.freeze({ subject: 'anonymous' });
