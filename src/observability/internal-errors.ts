/**
 * Requests answered with an internal error — HTTP 500, gRPC INTERNAL — each one a bug, logged with its
 * stack where it is answered (http/errors.ts, grpc/status.ts). Those two error mappers are pure
 * functions every path shares, so the count is process-wide, like the process metrics: every Metrics
 * registry of the process reports it as rl_internal_errors_total{transport}.
 */
export const INTERNAL_ERROR_TRANSPORTS = ['http', 'grpc'] as const;
export type InternalErrorTransport = (typeof INTERNAL_ERROR_TRANSPORTS)[number];

const counts: Record<InternalErrorTransport, number> = { http: 0, grpc: 0 };

export function countInternalError(transport: InternalErrorTransport): void {
  counts[transport]++;
}

export function internalErrorCount(transport: InternalErrorTransport): number {
  return counts[transport];
}
