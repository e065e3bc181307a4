import * as grpc from '@grpc/grpc-js';
import { CounterStoreUnavailableError, RlError, type ErrorKind } from '../errors.js';
import { countInternalError } from '../observability/internal-errors.js';
import { log } from '../util/log.js';

/**
 * The one mapping from errors to gRPC statuses (the gRPC twin of http/errors.ts): typed RlErrors by
 * kind, a few transport conditions by their own status, and anything else as a logged INTERNAL (on
 * this side, INTERNAL always means a bug).
 */
export const GRPC_STATUS: Record<ErrorKind, grpc.status> = {
  invalid_argument: grpc.status.INVALID_ARGUMENT,
  unauthenticated: grpc.status.UNAUTHENTICATED,
  permission_denied: grpc.status.PERMISSION_DENIED,
  not_found: grpc.status.NOT_FOUND,
  method_not_allowed: grpc.status.UNIMPLEMENTED,
  conflict: grpc.status.ABORTED,
  payload_too_large: grpc.status.RESOURCE_EXHAUSTED,
  unsupported_media_type: grpc.status.INVALID_ARGUMENT,
  failed_validation: grpc.status.INVALID_ARGUMENT,
  unavailable: grpc.status.UNAVAILABLE,
};

/** Trailing metadata key naming the offending input field of an INVALID_ARGUMENT. */
export const INVALID_FIELD_METADATA_KEY = 'rl-invalid-field';

/** A condition that already is a gRPC status (an expired deadline, a cancelled call). */
export class GrpcStatusError extends Error {
  constructor(
    readonly code: grpc.status,
    message: string,
  ) {
    super(message);
    this.name = 'GrpcStatusError';
  }
}

/** The status object a unary callback (or a stream's error) sends for `error`. */
export function toGrpcStatus(error: unknown, method: string): grpc.ServerErrorResponse {
  if (error instanceof RlError) {
    const metadata = new grpc.Metadata();
    if (error.field !== undefined) metadata.set(INVALID_FIELD_METADATA_KEY, error.field);
    return statusError(GRPC_STATUS[error.kind], error.message, metadata);
  }
  if (error instanceof GrpcStatusError) return statusError(error.code, error.message);
  if (error instanceof CounterStoreUnavailableError) {
    // DecisionService applies failure modes itself; one escaping here is still "try again later".
    return statusError(grpc.status.UNAVAILABLE, 'counter store unavailable');
  }
  log.error('unhandled gRPC error', { method, error: String((error as Error)?.stack ?? error) });
  countInternalError('grpc');
  return statusError(grpc.status.INTERNAL, 'internal error');
}

function statusError(code: grpc.status, details: string, metadata = new grpc.Metadata()): grpc.ServerErrorResponse {
  return Object.assign(new Error(details), { code, details, metadata });
}
