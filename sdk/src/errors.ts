/**
 * Typed errors of the client. Only problems the caller must fix are thrown (bad credentials, bad
 * input, a wrong URL); an unreachable or failing service is answered by `failMode` instead, unless
 * `failMode: 'throw'` asks for RateLimitUnavailableError (tools such as a CLI want to know).
 */

export class RateLimitError extends Error {
  override name = 'RateLimitError';
  constructor(
    message: string,
    /** HTTP status, or the gRPC status code's HTTP equivalent; 0 when no answer came. */
    readonly status: number,
  ) {
    super(message);
  }
}

/** 401/403, gRPC UNAUTHENTICATED/PERMISSION_DENIED: the apiKey or token is missing, wrong or not allowed. */
export class RateLimitAuthError extends RateLimitError {
  override name = 'RateLimitAuthError';
}

/** 400/413/415/422, gRPC INVALID_ARGUMENT: the request context is not valid. `field` names the culprit. */
export class RateLimitInputError extends RateLimitError {
  override name = 'RateLimitInputError';
  constructor(
    message: string,
    status: number,
    /** The field the service named (e.g. `quantity`, `signal_type`), when it named one. */
    readonly field?: string,
  ) {
    super(message, status);
  }
}

/** Unreachable, timed out, 5xx, or the circuit is open: thrown only with `failMode: 'throw'`. */
export class RateLimitUnavailableError extends RateLimitError {
  override name = 'RateLimitUnavailableError';
}

/** The field named in an error message of the form `<field>: <problem>` (the service's convention). */
export function fieldOf(message: string): string | undefined {
  const match = /^([A-Za-z_][\w.]*): /.exec(message);
  return match?.[1];
}
