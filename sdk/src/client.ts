import { CircuitBreaker, type CircuitBreakerOptions } from './circuit-breaker.js';
import { DenyCache, denyCacheKey, type DenyCacheOptions } from './deny-cache.js';
import { RateLimitUnavailableError } from './errors.js';
import { GrpcTransport } from './grpc-transport.js';
import { HttpTransport } from './http-transport.js';
import { IgnoredFieldWarnings, consoleLogger, type ClientLogger } from './ignored-fields.js';
import { ServiceUnavailable, type Transport } from './transport.js';
import type { Decision, Operation, RateLimitClient, RequestContext } from './types.js';

/**
 * `open` (default): an unanswered call is allowed; `closed`: refused. Either way the Decision says
 * `reason: 'service_unavailable'`. `throw`: a RateLimitUnavailableError instead (for tools, not for a
 * request path).
 */
export type FailMode = 'open' | 'closed' | 'throw';

export interface ClientOptions {
  /** Base URL of the service's HTTP API, e.g. `http://rl.internal:8080`. One of `url` / `grpcTarget`. */
  url?: string;
  /** `host:port` of the service's gRPC listener (needs @grpc/grpc-js and @grpc/proto-loader installed). */
  grpcTarget?: string;
  /** Sent as `X-Api-Key` (HTTP) / `x-api-key` (gRPC metadata). */
  apiKey?: string;
  /** A bearer token (JWT or API key), sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** Upper bound of one call, connection included, ms (default 50). */
  timeoutMs?: number;
  /** What an unreachable, slow or failing service answers (default `open`). */
  failMode?: FailMode;
  /** The exact local deny cache (on by default); `false` turns it off. */
  denyCache?: DenyCacheOptions | false;
  /** The circuit breaker in front of the service. */
  breaker?: CircuitBreakerOptions;
  /** TLS: a CA bundle to trust (https URL, or gRPC with `grpcTls`). */
  ca?: string | Buffer;
  /** Connect to `grpcTarget` over TLS. */
  grpcTls?: boolean;
  /** HTTP sockets kept open to the service (default 64). */
  maxSockets?: number;
  /**
   * Where warnings go (default `console`; `false`: nowhere). Today one kind: a request field the service
   * ignored (`metadata.ignored_fields`, usually a misspelt field), warned about once per name.
   */
  logger?: ClientLogger | false;
}

/** What every client of this package offers beyond the interface: its deny cache and breaker state. */
export interface Client extends RateLimitClient {
  /** Entries in the deny cache now. */
  readonly denyCacheSize: number;
  /** True while the circuit is open (calls answered by failMode without a network call). */
  readonly circuitOpen: boolean;
}

/**
 * A client of the rate-limit service, over HTTP (keep-alive) or gRPC. Availability problems never
 * throw (unless `failMode: 'throw'`): they are answered by `failMode` within `timeoutMs`, and after a
 * few in a row the circuit opens so a dead service costs microseconds. Auth and input problems do
 * throw (RateLimitAuthError, RateLimitInputError): they are bugs to fix, not weather.
 */
export function createClient(options: ClientOptions): Client {
  const timeoutMs = options.timeoutMs ?? 50;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new TypeError(`timeoutMs: must be a positive number, got ${options.timeoutMs}`);
  const failMode = options.failMode ?? 'open';
  if (!['open', 'closed', 'throw'].includes(failMode)) throw new TypeError(`failMode: must be "open", "closed" or "throw", got ${JSON.stringify(failMode)}`);
  return new ServiceClient(transportFor(options), {
    timeoutMs,
    failMode,
    denyCache: options.denyCache === false ? undefined : new DenyCache(options.denyCache),
    breaker: new CircuitBreaker(options.breaker),
    ignoredFields: new IgnoredFieldWarnings(options.logger === false ? undefined : (options.logger ?? consoleLogger)),
  });
}

function transportFor(options: ClientOptions): Transport {
  if ((options.url === undefined) === (options.grpcTarget === undefined)) {
    throw new TypeError('url / grpcTarget: give exactly one of them');
  }
  if (options.apiKey !== undefined && options.token !== undefined) throw new TypeError('apiKey / token: give at most one of them');
  const credentials: Record<string, string> = {};
  if (options.apiKey !== undefined) credentials['x-api-key'] = options.apiKey;
  if (options.token !== undefined) credentials.authorization = `Bearer ${options.token}`;
  if (options.url !== undefined) return new HttpTransport({ url: options.url, headers: credentials, ca: options.ca, maxSockets: options.maxSockets });
  return new GrpcTransport({ target: options.grpcTarget!, metadata: credentials, tls: options.grpcTls, ca: options.ca });
}

interface Policy {
  timeoutMs: number;
  failMode: FailMode;
  denyCache?: DenyCache;
  breaker: CircuitBreaker;
  ignoredFields: IgnoredFieldWarnings;
}

class ServiceClient implements Client {
  private closed = false;

  constructor(
    private readonly transport: Transport,
    private readonly policy: Policy,
  ) {}

  get denyCacheSize(): number {
    return this.policy.denyCache?.size ?? 0;
  }

  get circuitOpen(): boolean {
    return this.policy.breaker.isOpen;
  }

  async check(ctx: RequestContext): Promise<Decision> {
    const cache = this.policy.denyCache;
    if (cache === undefined || ctx.quantity === 0) return this.call('check', ctx);
    const key = denyCacheKey(ctx);
    const cached = cache.get(key);
    if (cached) return cached;
    const askedAt = performance.now();
    const decision = await this.call('check', ctx);
    cache.offer(key, decision, askedAt);
    return decision;
  }

  peek(ctx: RequestContext): Promise<Decision> {
    return this.call('check', { ...ctx, quantity: 0 });
  }

  acquire(ctx: RequestContext): Promise<Decision> {
    return this.call('acquire', ctx);
  }

  release(ctx: RequestContext): Promise<Decision> {
    return this.call('release', ctx);
  }

  async refund(ctx: RequestContext): Promise<Decision> {
    const decision = await this.call('refund', ctx);
    // Room was made: a cached refusal may no longer be the service's answer (which counter it was is
    // the server's knowledge, so all of them go).
    if (decision.reason === 'refunded') this.policy.denyCache?.clear();
    return decision;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.policy.denyCache?.clear();
    await this.transport.close();
  }

  private async call(operation: Operation, ctx: RequestContext): Promise<Decision> {
    const { breaker } = this.policy;
    if (this.closed) return this.unavailable(operation, 'the client is closed');
    if (!breaker.tryAcquire()) return this.unavailable(operation, 'circuit open after repeated failures');
    try {
      const decision = await this.transport.call(operation, ctx, this.policy.timeoutMs);
      breaker.recordSuccess();
      return this.policy.ignoredFields.note(decision);
    } catch (error) {
      if (!(error instanceof ServiceUnavailable)) {
        breaker.recordSuccess(); // the service answered (with a complaint about the request)
        throw error;
      }
      breaker.recordFailure();
      return this.unavailable(operation, error.message);
    }
  }

  private unavailable(operation: Operation, why: string): Decision {
    if (this.policy.failMode === 'throw') throw new RateLimitUnavailableError(`rate-limit service unavailable: ${why}`, 0);
    return failModeDecision(operation, this.policy.failMode === 'open');
  }
}

/**
 * The answer when the service could not be asked. Releases and refunds are always "allowed": they
 * give something back, and refusing them would only hold a slot longer.
 */
export function failModeDecision(operation: Operation, open: boolean): Decision {
  const allowed = open || operation === 'release' || operation === 'refund';
  return {
    allowed,
    action: allowed ? 'allow' : 'deny',
    reason: 'service_unavailable',
    matched_policy_id: '',
    remaining: 0,
    retry_after: 0,
    reset_after: 0,
    limit: 0,
    window: 0,
    shadow_mode: false,
    metadata: {},
  };
}
