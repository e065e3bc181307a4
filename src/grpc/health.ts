import * as grpc from '@grpc/grpc-js';
import type { Readiness, ReadinessState } from '../lifecycle/readiness.js';

/**
 * The standard grpc.health.v1.Health service, fed by the same Readiness as /readyz: SERVING while
 * ready, NOT_SERVING while starting or draining. Known service names: "" (the whole server) and every
 * service this server hosts. Exempt from authentication, like /healthz and /readyz.
 */

export type ServingStatus = 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';

interface HealthCheckRequest {
  service?: string;
}
interface HealthCheckResponse {
  status: ServingStatus;
}

export interface HealthService {
  implementation: grpc.UntypedServiceImplementation;
  /** Ends every open Watch stream (at shutdown, so they do not hold the server open). */
  endWatches(): void;
}

export function createHealthService(readiness: Readiness, services: readonly string[]): HealthService {
  const known = new Set(['', ...services]);
  const watchers = new Set<grpc.ServerWritableStream<HealthCheckRequest, HealthCheckResponse>>();
  const statusOf = (service: string, state: ReadinessState = readiness.state): ServingStatus =>
    !known.has(service) ? 'SERVICE_UNKNOWN' : state === 'ready' ? 'SERVING' : 'NOT_SERVING';

  readiness.onChange((state) => {
    for (const call of watchers) {
      const service = call.request.service ?? '';
      if (known.has(service)) call.write({ status: statusOf(service, state) });
    }
  });

  const check: grpc.handleUnaryCall<HealthCheckRequest, HealthCheckResponse> = (call, callback) => {
    const service = call.request.service ?? '';
    if (!known.has(service)) {
      callback({ code: grpc.status.NOT_FOUND, details: `unknown service "${service}"` });
      return;
    }
    callback(null, { status: statusOf(service) });
  };

  const watch: grpc.handleServerStreamingCall<HealthCheckRequest, HealthCheckResponse> = (call) => {
    watchers.add(call);
    const forget = () => watchers.delete(call);
    call.on('cancelled', forget);
    call.on('close', forget);
    call.on('finish', forget);
    call.on('error', forget);
    call.write({ status: statusOf(call.request.service ?? '') });
  };

  return {
    implementation: { Check: check, Watch: watch },
    endWatches() {
      for (const call of watchers) call.end();
      watchers.clear();
    },
  };
}
