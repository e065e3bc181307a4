import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/**
 * The .proto files this server serves, loaded at run time with @grpc/proto-loader (no generated
 * code). `proto/` sits at the repository root: two levels above both src/grpc and dist/grpc.
 * google/protobuf/{duration,wrappers,timestamp}.proto are built into protobufjs and need no copy.
 */
export const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));

export const PROTO_FILES = {
  rateLimit: 'rl/v1/rate_limit.proto',
  envoy: 'envoy/service/ratelimit/v3/rls.proto',
  rlqs: 'envoy/service/rate_limit_quota/v3/rlqs.proto',
  health: 'grpc/health/v1/health.proto',
} as const;

export const SERVICE_NAMES = {
  rateLimit: 'rl.v1.RateLimitService',
  envoy: 'envoy.service.ratelimit.v3.RateLimitService',
  rlqs: 'envoy.service.rate_limit_quota.v3.RateLimitQuotaService',
  health: 'grpc.health.v1.Health',
} as const;

/**
 * Decoding options. keepCase: field names stay snake_case like the HTTP JSON. longs as decimal
 * strings: int64/uint64 never lose precision (parseRequestContext accepts a decimal quantity, and
 * rejects what does not fit). defaults false: fields absent on the wire stay absent.
 */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: false,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

let cached: protoLoader.PackageDefinition | undefined;

/** Every message and service of the four protocols (loaded once per process). */
export function loadPackageDefinition(): protoLoader.PackageDefinition {
  cached ??= protoLoader.loadSync(Object.values(PROTO_FILES), LOADER_OPTIONS);
  return cached;
}

/** The service definition of one of SERVICE_NAMES, for `server.addService` or a client constructor. */
export function serviceDefinition(name: (typeof SERVICE_NAMES)[keyof typeof SERVICE_NAMES]): grpc.ServiceDefinition {
  const definition = loadPackageDefinition()[name];
  if (definition === undefined || 'format' in definition || !isService(definition)) {
    throw new Error(`${name} is not a service in ${Object.values(PROTO_FILES).join(', ')}`);
  }
  return tolerantDeserializers(definition as grpc.ServiceDefinition);
}

/** What a request that is not a valid message of its type decodes to (see tolerantDeserializers). */
export class MalformedRequest {
  constructor(readonly problem: string) {}
}

/**
 * grpc-js answers a request its deserializer throws on with INTERNAL, which reads as a bug of ours.
 * Each method's deserializer here returns a MalformedRequest instead, which guardedUnary answers with
 * INVALID_ARGUMENT like any other bad input.
 */
function tolerantDeserializers(definition: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const tolerant: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const [name, method] of Object.entries(definition)) {
    const deserialize = method.requestDeserialize;
    tolerant[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer) => {
        try {
          return deserialize(bytes);
        } catch (error) {
          return new MalformedRequest((error as Error).message);
        }
      },
    };
  }
  return tolerant;
}

function isService(definition: object): boolean {
  return Object.values(definition).every((m) => typeof m === 'object' && m !== null && 'path' in m);
}
