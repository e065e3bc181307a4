import { CircuitBreaker, type BreakerState } from '../redis/circuit-breaker.js';
import type { Decision } from '../model/decision.js';
import type { RequestContext } from '../model/request-context.js';
import { describeFetchError, redactUrl } from '../util/fetch.js';
import { log } from '../util/log.js';

export type DecisionOperation = 'check' | 'acquire' | 'release' | 'refund';

/** What a forwarded decision call came back with. */
export type ForwardResult =
  /** The server decided. */
  | { kind: 'decision'; decision: Decision }
  /** The server refused the input (400, 413, 415, 422): the caller's error, passed through as is. */
  | { kind: 'rejected'; status: number; body: unknown }
  /** No usable answer (unreachable, timeout, 5xx, auth misconfigured, breaker open): failure_mode decides. */
  | { kind: 'unavailable'; error: string };

export interface UpstreamClientOptions {
  /** Base URL, no trailing slash. */
  upstream: string;
  /** Credential headers. */
  headers?: Record<string, string>;
  /** Deadline of one call, ms. */
  timeoutMs: number;
  /** Breaker over the upstream: consecutive failures before it opens (default 3). */
  failureThreshold?: number;
  /** How long an open breaker answers "unavailable" at once before a trial call, ms (default 1000). */
  coolDownMs?: number;
}

/** Statuses that mean "your input is wrong": the agent's caller gets them unchanged. */
const PASS_THROUGH = new Set([400, 413, 415, 422]);

/**
 * Forwards decision calls to a server, each bounded by a timeout and guarded by a circuit breaker, so
 * an unreachable or hung server costs one timeout per cool-down instead of one per decision.
 */
export class UpstreamClient {
  readonly breaker: CircuitBreaker;
  private lastWarning = 0;

  constructor(private readonly options: UpstreamClientOptions) {
    this.breaker = new CircuitBreaker({
      failureThreshold: options.failureThreshold ?? 3,
      coolDownMs: options.coolDownMs ?? 1000,
      onStateChange: (to: BreakerState, from: BreakerState) => {
        if (to === 'open' && from === 'closed') log.warn('upstream unavailable: answering by failure_mode', { upstream: redactUrl(options.upstream) });
        if (to === 'closed') log.info('upstream available again', { upstream: redactUrl(options.upstream) });
      },
    });
  }

  async forward(operation: DecisionOperation, ctx: RequestContext, requestId?: string): Promise<ForwardResult> {
    if (!this.breaker.tryAcquire()) return { kind: 'unavailable', error: 'upstream circuit breaker open' };
    const result = await this.call(operation, ctx, requestId);
    if (result.kind === 'unavailable') this.breaker.recordFailure();
    else this.breaker.recordSuccess();
    return result;
  }

  private async call(operation: DecisionOperation, ctx: RequestContext, requestId?: string): Promise<ForwardResult> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json',
      ...this.options.headers,
    };
    if (requestId) headers['x-request-id'] = requestId;
    let response: Response;
    let body: unknown;
    try {
      response = await fetch(`${this.options.upstream}/rl/v1/${operation}`, {
        method: 'POST',
        headers,
        body: JSON.stringify(ctx),
        redirect: 'manual',
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
      const text = await response.text();
      body = text === '' ? undefined : JSON.parse(text);
    } catch (error) {
      return { kind: 'unavailable', error: describeFetchError(error) };
    }
    if (response.status === 200 && isDecision(body)) return { kind: 'decision', decision: body };
    if (PASS_THROUGH.has(response.status) || isOrgRefusal(response.status, body)) return { kind: 'rejected', status: response.status, body };
    if (response.status === 401 || response.status === 403) {
      this.warnRarely('upstream refused the agent credential (RL_AGENT_API_KEY / RL_AGENT_TOKEN)', response.status);
    }
    return { kind: 'unavailable', error: `HTTP ${response.status}` };
  }

  private warnRarely(message: string, status: number): void {
    const now = Date.now();
    if (now - this.lastWarning < 60_000) return;
    this.lastWarning = now;
    log.error(message, { upstream: redactUrl(this.options.upstream), status });
  }
}

/**
 * A 403 naming `org_id`: the agent's credential is limited to organisations and this request's is not
 * one of them (docs/tenants.md). An answer about the request, passed on; not an unreachable server.
 */
function isOrgRefusal(status: number, body: unknown): boolean {
  return status === 403 && typeof body === 'object' && body !== null && (body as { field?: unknown }).field === 'org_id';
}

function isDecision(body: unknown): body is Decision {
  return (
    typeof body === 'object' &&
    body !== null &&
    typeof (body as Decision).allowed === 'boolean' &&
    typeof (body as Decision).reason === 'string'
  );
}
