/**
 * Typed errors shared by every layer. Each transport maps them to a status in exactly one place
 * (HTTP: http/errors.ts, gRPC: grpc/status.ts), so domain code never knows about status codes of a transport.
 */
export type ErrorKind =
  | 'invalid_argument' // 400: malformed input, bad field type or value
  | 'unauthenticated' // 401
  | 'permission_denied' // 403
  | 'not_found' // 404
  | 'method_not_allowed' // 405
  | 'conflict' // 409: duplicate id, stale version
  | 'payload_too_large' // 413
  | 'unsupported_media_type' // 415
  | 'failed_validation' // 422: a policy that does not validate
  | 'unavailable'; // 503: draining, dependency down

export class RlError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
    /** The offending input field, when there is one; always named in the message too. */
    readonly field?: string,
    /** Extra members of the JSON error body (e.g. the field errors of a 422). */
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'RlError';
  }
}

/** Bad input: a 400 whose message names the field. */
export function invalidField(field: string, problem: string): RlError {
  return new RlError('invalid_argument', `${field}: ${problem}`, field);
}

export function notFound(message: string): RlError {
  return new RlError('not_found', message);
}

/**
 * The counter store cannot answer (down, timed out, breaker open). Decisions apply failure_mode.
 *
 * An expected outage signal, raised on every decision while Redis is down: it carries no stack trace,
 * whose capture through the async chain would cost more than the decision (BENCHMARKS.md, scenario 7).
 */
/**
 * A decision waited RL_LEASE_MAX_WAIT_MS for its lease holder's refill and is refused (docs/reference.md "Two kinds of
 * lease": reason lease_wait_timeout). Not a store failure: a slow parent is not a failed one, so the
 * failure mode does not answer and never-over holds. No stack trace, as for CounterStoreUnavailableError.
 */
export class LeaseWaitTimeoutError extends Error {
  constructor(
    /** What the refusal's retry_after says: at most the policy's max_hold. */
    readonly retryAfterMs: number,
  ) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super('no lease refill within RL_LEASE_MAX_WAIT_MS');
    Error.stackTraceLimit = limit;
    this.name = 'LeaseWaitTimeoutError';
  }
}

export class CounterStoreUnavailableError extends Error {
  override readonly cause?: unknown;

  constructor(message: string, cause?: unknown) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
    this.name = 'CounterStoreUnavailableError';
    this.cause = cause;
  }
}
