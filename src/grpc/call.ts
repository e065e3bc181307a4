import * as grpc from '@grpc/grpc-js';
import { RlError, invalidField } from '../errors.js';
import type { Readiness } from '../lifecycle/readiness.js';
import type { Actor } from '../model/org-scope.js';
import type { GrpcAuthenticate } from './auth.js';
import { MalformedRequest } from './protos.js';
import { GrpcStatusError, toGrpcStatus } from './status.js';

export interface CallGuards {
  readiness: Readiness;
  authenticate?: GrpcAuthenticate;
}

/**
 * Wraps the body of a decision RPC with what every one of them needs, in this order: UNAVAILABLE
 * unless the server is ready (starting or draining), nothing done for a call already cancelled or past
 * its deadline, authentication, a request that did not decode (INVALID_ARGUMENT), the body (given the
 * authenticated caller; undefined without authentication: unrestricted), and one error mapping
 * (status.ts). A call cancelled while the body ran gets no answer (there is nobody to send it to).
 */
export function guardedUnary<Req, Res>(
  guards: CallGuards,
  body: (request: Req, call: grpc.ServerUnaryCall<Req, Res>, caller: Actor | undefined) => Promise<Res>,
): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    const method = call.getPath();
    const run = async (): Promise<Res> => {
      // Draining still answers: load balancers keep sending for a while after SIGTERM (RL_SHUTDOWN_DELAY_SECS).
      if (guards.readiness.state === 'starting') throw new RlError('unavailable', 'server is starting');
      ensureLive(call);
      const caller = guards.authenticate?.(call.metadata, method);
      if (call.request instanceof MalformedRequest) {
        throw invalidField('request', `is not a valid protobuf message: ${call.request.problem}`);
      }
      return body(call.request, call, caller);
    };
    run().then(
      (response) => {
        if (!call.cancelled) callback(null, response);
      },
      (error: unknown) => {
        if (!call.cancelled) callback(toGrpcStatus(error, method));
      },
    );
  };
}

/** Throws when the call is cancelled or its deadline has passed: the work would be wasted. */
export function ensureLive(call: Pick<grpc.ServerUnaryCall<unknown, unknown>, 'cancelled' | 'getDeadline'>): void {
  if (call.cancelled) throw new GrpcStatusError(grpc.status.CANCELLED, 'call cancelled by the client');
  const deadline = call.getDeadline();
  const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
  if (Number.isFinite(deadlineMs) && Date.now() >= deadlineMs) {
    throw new GrpcStatusError(grpc.status.DEADLINE_EXCEEDED, 'deadline exceeded before the decision was made');
  }
}
