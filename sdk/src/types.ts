/**
 * The wire shapes of the rate-limit service (README "The request", "What a decision means"), as a client sees
 * them. Field names are the JSON and proto names; durations are integer milliseconds.
 */

export const SIGNAL_TYPES = ['http', 'grpc', 'log', 'trace', 'event', 'auth', 'job', 'custom'] as const;
export type SignalType = (typeof SIGNAL_TYPES)[number];

/**
 * Every string field of a RequestContext, in the spec's order (the proto's field order too); policy
 * scope fields are these minus request_id. The server's schema (src/schema/request-context.ts) uses
 * this list and SIGNAL_TYPES, so client and server cannot disagree on them.
 */
export const CONTEXT_STRING_FIELDS = [
  'request_id', 'org_id', 'tenant_id', 'application', 'service', 'environment', 'signal_type',
  'operation', 'endpoint', 'method', 'user_id', 'api_key', 'client_id', 'source_ip', 'region',
  'resource', 'severity', 'span_name', 'topic', 'consumer_group', 'job_type',
] as const;
export type ContextStringField = (typeof CONTEXT_STRING_FIELDS)[number];

/** What a decision is asked about. Every field is optional; `quantity` defaults to 1 (0 is a peek). */
export type RequestContext = { [K in Exclude<ContextStringField, 'signal_type'>]?: string } & {
  signal_type?: SignalType;
  quantity?: number;
  tags?: Record<string, string>;
};

/** The reasons the service gives (README "The request"); clients switch on them. The server's schema uses this list. */
export const DECISION_REASONS = [
  'within_limit',
  'limit_exceeded',
  'no_matching_policy',
  'lease_acquired',
  'lease_released',
  'lease_not_found',
  'refunded',
  'counter_store_unavailable',
  'lease_wait_timeout',
  /** The request's cost exceeds what the policy ever admits at once (limit, quota or burst): retrying will not help. */
  'quantity_exceeds_limit',
] as const;

export type DecisionReason =
  | (typeof DECISION_REASONS)[number]
  /** Set by this client, never by the server: the service could not be asked and `failMode` answered. */
  | 'service_unavailable';

export type DecisionAction =
  | 'allow'
  | 'deny'
  | 'delay'
  | 'drop'
  | 'sample'
  | 'downgrade'
  | 'drop_low_priority'
  | 'shadow_only';

/** The answer of check, acquire, release, refund and peek. */
export interface Decision {
  allowed: boolean;
  /** One of DecisionAction; typed as string so a newer server's action does not break older clients. */
  action: string;
  reason: DecisionReason;
  /** The policy that decided; '' when none matched. */
  matched_policy_id: string;
  remaining: number;
  /** Milliseconds until a retry can succeed; 0 when none. */
  retry_after: number;
  /** Milliseconds until the window or bucket is whole again. */
  reset_after: number;
  limit: number;
  /** Milliseconds the limit applies to; 0 for concurrency and when no policy matched. */
  window: number;
  shadow_mode: boolean;
  metadata: Record<string, string>;
  /** Every layer with an enforcing policy, in layer-name order; only when two or more layers decided. */
  layers?: LayerVerdict[];
}

/** One layer's verdict in a decision over several layers of policies (the top-level fields are the deciding layer's). */
export interface LayerVerdict {
  layer: string;
  policy_id: string;
  allowed: boolean;
  action: string;
  reason: DecisionReason;
  remaining: number;
  limit: number;
  window: number;
  reset_after: number;
  retry_after: number;
}

export type Operation = 'check' | 'acquire' | 'release' | 'refund';

/**
 * What a client of the service offers; the HTTP and gRPC clients of this package and the server's
 * embedded mode all implement it, so code written against it does not care which one it holds.
 */
export interface RateLimitClient {
  /** Counts `quantity` (default 1) against the best matching rate or quota policy. */
  check(ctx: RequestContext): Promise<Decision>;
  /** Evaluates without consuming (`check` with quantity 0): what would a request of 1 get now? */
  peek(ctx: RequestContext): Promise<Decision>;
  /** Takes a concurrency lease (lease id: `request_id`, else a digest of the fields). */
  acquire(ctx: RequestContext): Promise<Decision>;
  /** Returns a lease taken by `acquire` with the same context. */
  release(ctx: RequestContext): Promise<Decision>;
  /** Gives back `quantity` (required, ≥ 1) units the same context consumed and did not use. */
  refund(ctx: RequestContext): Promise<Decision>;
  /** Closes connections; calls after close answer like an unreachable service. */
  close(): Promise<void>;
}
