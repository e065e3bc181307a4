import type * as grpc from '@grpc/grpc-js';

/**
 * Authentication hook of the gRPC front-end. The authenticator itself (src/auth) is transport-free;
 * this module only reads its inputs from call metadata, with the same rules as HTTP (CONTRACT.md:
 * "gRPC takes the same credentials in metadata (`x-api-key` or `authorization`)").
 */

/**
 * The authenticated caller (structurally the same as src/auth's Principal; `role` null = a valid
 * credential without a known role, which may still make decision calls).
 */
export interface Principal {
  subject: string;
  role: 'admin' | 'read-only' | null;
}

/** The credentials a request carries, as the authenticator takes them. */
export interface GrpcCredentials {
  apiKey?: string;
  authorization?: string;
}

/**
 * Authenticates (and authorizes) one call; throws RlError 'unauthenticated' or 'permission_denied'.
 * `method` is the full gRPC path, e.g. `/rl.v1.RateLimitService/CheckLimit`. Not called for health.
 */
export type GrpcAuthenticate = (metadata: grpc.Metadata, method: string) => Principal;

/** What src/auth's Authenticator offers (structural, so this module does not depend on it). */
export interface AuthenticatorLike {
  authenticate(credentials: GrpcCredentials): Principal;
  authorize(principal: Principal, access: 'read' | 'decide' | 'write'): void;
}

/** `x-api-key` and `authorization` from call metadata (first value of each; empty = absent). */
export function credentialsFromMetadata(metadata: grpc.Metadata): GrpcCredentials {
  const credentials: GrpcCredentials = {};
  const apiKey = firstString(metadata, 'x-api-key');
  if (apiKey !== undefined) credentials.apiKey = apiKey;
  const authorization = firstString(metadata, 'authorization');
  if (authorization !== undefined) credentials.authorization = authorization;
  return credentials;
}

/**
 * Adapts an Authenticator to GrpcAuthenticate: every RPC of this server (CheckLimit, Acquire, Release,
 * ShouldRateLimit) is a decision call, i.e. 'decide' access (any valid credential, admin not needed).
 */
export function grpcAuthenticate(authenticator: AuthenticatorLike): GrpcAuthenticate {
  return (metadata) => {
    const principal = authenticator.authenticate(credentialsFromMetadata(metadata));
    authenticator.authorize(principal, 'decide');
    return principal;
  };
}

function firstString(metadata: grpc.Metadata, key: string): string | undefined {
  const [value] = metadata.get(key);
  if (typeof value !== 'string' || value === '') return undefined;
  return value;
}
