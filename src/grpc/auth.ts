import type * as grpc from '@grpc/grpc-js';
import { credentialsFromMetadata, type Authenticator, type Principal } from '../auth/authenticator.js';

/**
 * Authentication hook of the gRPC front-end. The authenticator (src/auth) is transport-free and reads
 * the same credentials as HTTP from call metadata (`x-api-key` or `authorization`, README "Authentication and TLS").
 */
export { credentialsFromMetadata, type Principal };

/**
 * Authenticates (and authorizes) one call; throws RlError 'unauthenticated' or 'permission_denied'.
 * `method` is the full gRPC path, e.g. `/rl.v1.RateLimitService/CheckLimit`. Not called for health.
 */
export type GrpcAuthenticate = (metadata: grpc.Metadata, method: string) => Principal;

/**
 * Adapts an Authenticator to GrpcAuthenticate: every RPC of this server (CheckLimit, Acquire, Release,
 * ShouldRateLimit) is a decision call, i.e. 'decide' access (any valid credential, admin not needed).
 */
export function grpcAuthenticate(authenticator: Pick<Authenticator, 'authenticate' | 'authorize'>): GrpcAuthenticate {
  return (metadata) => {
    const principal = authenticator.authenticate(credentialsFromMetadata(metadata));
    authenticator.authorize(principal, 'decide');
    return principal;
  };
}
