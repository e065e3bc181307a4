import Koa from 'koa';
import Router from '@koa/router';
import type { CounterResult, CounterStore } from '../counters/counter-store.js';
import { DecisionService, unmatchedDecision } from '../decision/decision-service.js';
import { CounterStoreUnavailableError } from '../errors.js';
import { bodyOf, jsonBody } from '../http/body.js';
import { errorHandler, sendError } from '../http/errors.js';
import { responseHeaders } from '../http/headers.js';
import { decisionContextOf } from '../http/decide-body.js';
import { withIgnoredFields, type RequestContext } from '../model/request-context.js';
import type { PolicyFamily } from '../matching/matcher.js';
import { log } from '../util/log.js';
import { matchesSecret, secretDigest } from '../util/secrets.js';
import type { PolicySync } from './policy-sync.js';
import type { DecisionOperation, UpstreamClient } from './upstream.js';

/**
 * The sidecar's HTTP front-end (README "Sidecar agent"):
 *
 * - `POST /rl/v1/check` (and `/acquire`, `/release`, `/refund`, the same way): the RequestContext is validated
 *   here (400 naming the field). Once the policy set has been synced:
 *   - no policy can match → answered locally, `no_matching_policy`, no hop;
 *   - with a local DecisionService (the agent has RL_COUNTERSTORE_ADDR) → decided here against the
 *     shared Redis with the servers' scripts and keys;
 *   - else forwarded to the upstream server. When that gives no answer (unreachable, timeout, 5xx,
 *     breaker open), the matched policy's failure_mode answers (reason counter_store_unavailable),
 *     computed by a DecisionService over a counter store that is always unavailable: the very code
 *     the server uses when its Redis is down, so the shapes are identical.
 *   Before the first successful sync the agent knows no policy: every call is forwarded, and without
 *   an answer it is allowed (fail_open, the default failure_mode) with counter_store_unavailable.
 * - `GET /healthz`: `ok` while the process lives.
 * - `GET /rl/v1/agent/status`: `{upstream, policies, last_sync_at, last_sync_ok, sync_interval_secs,
 *   invalidations, …}`.
 * - `POST /rl/v1/agent/invalidate`: 202 `{"accepted": true}` and a sync at once (coalesced). With
 *   `invalidateToken` set it needs `Authorization: Bearer <token>` (compared in constant time), else 401.
 */

export interface AgentAppDeps {
  sync: PolicySync;
  /** Forward mode: the server to ask. */
  upstream: UpstreamClient;
  /** Shown in the status (no credentials in it). */
  upstreamUrl: string;
  /** Redis-direct mode: decide here. */
  local?: DecisionService;
  invalidateToken?: string;
  maxBodyBytes: number;
}

export interface AgentCounters {
  invalidations: number;
  forwarded: number;
  local: number;
  failureMode: number;
}

export interface AgentApp {
  app: Koa;
  counters: AgentCounters;
}

const FAMILY: Record<DecisionOperation, PolicyFamily> = { check: 'rate', acquire: 'concurrency', release: 'concurrency', refund: 'rate' };

type Decide = (operation: DecisionOperation, rc: RequestContext, requestId: string, koa: Koa.Context) => Promise<unknown>;

export function createAgentApp(deps: AgentAppDeps): AgentApp {
  const counters: AgentCounters = { invalidations: 0, forwarded: 0, local: 0, failureMode: 0 };
  const tokenDigest = deps.invalidateToken === undefined ? undefined : secretDigest(deps.invalidateToken);
  const router = agentRouter(deps, counters, agentDecide(deps, counters));

  const app = new Koa();
  app.proxy = false;
  app.silent = true;
  app.use(responseHeaders());
  app.use(errorHandler());
  if (tokenDigest) app.use(invalidateGuard(tokenDigest));
  app.use(jsonBody(deps.maxBodyBytes));
  app.use(router.routes());
  app.use(router.allowedMethods());
  return { app, counters };
}

/** Local answer, forward, or failure_mode: the order the header comment gives. */
function agentDecide(deps: AgentAppDeps, counters: AgentCounters): Decide {
  // Failure-mode answers: the server's own DecisionService logic over a store that never answers.
  const fallback = new DecisionService({ policies: deps.sync.matcher, counters: new UnavailableCounterStore(), keyPrefix: '' });
  return async (operation, rc, requestId, koa) => {
    const synced = deps.sync.status().synced;
    if (synced) {
      if (deps.local) {
        counters.local++;
        return deps.local[operation](rc);
      }
      const { enforce, shadow } = deps.sync.matcher.current().match(rc, FAMILY[operation], Date.now());
      if (!enforce && !shadow) {
        counters.local++;
        return fallback[operation](rc); // no candidate: no_matching_policy, the store is never asked
      }
    }
    counters.forwarded++;
    const result = await deps.upstream.forward(operation, rc, requestId);
    // The server saw only the fields the agent forwards: the ones it ignored are the agent's to name.
    if (result.kind === 'decision') return withIgnoredFields(result.decision, rc);
    if (result.kind === 'rejected') {
      if (!isErrorBody(result.body)) {
        sendError(koa, result.status, `the server refused the request (HTTP ${result.status})`);
        return koa.body;
      }
      koa.status = result.status;
      return result.body;
    }
    counters.failureMode++;
    log.debug('upstream gave no answer: failure_mode decides', { request_id: requestId, error: result.error });
    // No policy known yet and no server answer: allowed, as fail_open (the default failure_mode) would.
    if (!synced) return withIgnoredFields(unmatchedDecision('counter_store_unavailable'), rc);
    return fallback[operation](rc);
  };
}

function agentRouter(deps: AgentAppDeps, counters: AgentCounters, decide: Decide): Router {
  const router = new Router();
  router.get('/healthz', (ctx) => {
    ctx.type = 'text/plain';
    ctx.body = 'ok';
  });
  for (const operation of ['check', 'acquire', 'release', 'refund'] as const) {
    router.post(`/rl/v1/${operation}`, async (ctx) => {
      const rc = decisionContextOf(operation, bodyOf(ctx));
      const body = await decide(operation, rc, String(ctx.state.requestId ?? ''), ctx);
      ctx.body = body;
    });
  }
  router.get('/rl/v1/agent/status', (ctx) => {
    const status = deps.sync.status();
    ctx.body = {
      upstream: deps.upstreamUrl,
      policies: status.policies,
      last_sync_at: status.last_sync_at,
      last_sync_ok: status.last_sync_ok,
      sync_interval_secs: deps.sync.intervalSecs,
      invalidations: counters.invalidations,
      mode: deps.local ? 'redis' : 'forward',
      last_success_at: status.last_success_at,
      last_sync_error: status.last_error,
      upstream_breaker: deps.upstream.breaker.state,
      decisions: { local: counters.local, forwarded: counters.forwarded, failure_mode: counters.failureMode },
    };
  });
  router.post('/rl/v1/agent/invalidate', (ctx) => {
    counters.invalidations++;
    const body = bodyOf(ctx) as { policy_id?: unknown; change?: unknown; version?: unknown } | undefined;
    log.debug('invalidation received', {
      policy_id: typeof body?.policy_id === 'string' ? body.policy_id.slice(0, 128) : undefined,
      change: typeof body?.change === 'string' ? body.change.slice(0, 32) : undefined,
    });
    void deps.sync.invalidate(body);
    ctx.status = 202;
    ctx.body = { accepted: true };
  });
  return router;
}

/** Requires `Authorization: Bearer <token>` on the invalidate endpoint, before its body is read. */
function invalidateGuard(expected: Buffer): Koa.Middleware {
  return async (ctx, next) => {
    if (!/^\/rl\/v1\/agent\/invalidate\/?$/i.test(ctx.path)) return next();
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(ctx.get('Authorization'));
    if (!match || !matchesSecret(match[1], expected)) {
      ctx.set('WWW-Authenticate', match ? 'Bearer realm="rl-agent", error="invalid_token"' : 'Bearer realm="rl-agent"');
      sendError(ctx, 401, match ? 'invalid invalidation token' : 'invalidation needs Authorization: Bearer <token>');
      return;
    }
    return next();
  };
}

function isErrorBody(body: unknown): boolean {
  return typeof body === 'object' && body !== null && typeof (body as { error?: unknown }).error === 'string';
}

/** A counter store that is always down: makes DecisionService answer by each policy's failure_mode. */
class UnavailableCounterStore implements CounterStore {
  private fail(): Promise<CounterResult> {
    return Promise.reject(new CounterStoreUnavailableError('upstream server unavailable'));
  }
  consume(): Promise<CounterResult> {
    return this.fail();
  }
  peek(): Promise<CounterResult> {
    return this.fail();
  }
  refund(): Promise<CounterResult> {
    return this.fail();
  }
  acquire(): Promise<CounterResult> {
    return this.fail();
  }
  release(): Promise<CounterResult> {
    return this.fail();
  }
  isHealthy(): boolean {
    return false;
  }
  async close(): Promise<void> {}
}
