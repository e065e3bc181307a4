import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type * as GrpcJs from '@grpc/grpc-js';
import type * as ProtoLoader from '@grpc/proto-loader';
import { RateLimitAuthError, RateLimitError, RateLimitInputError } from './errors.js';
import { decisionFrom, ServiceUnavailable, type Transport } from './transport.js';
import type { Decision, Operation, RequestContext } from './types.js';

/**
 * rl/v1/rate_limit.proto: the repository's own (proto/) when this file runs inside the repository's sdk/
 * (tests, examples), else the copy the SDK's build puts in the package (sdk/proto/, published with it).
 */
export const PROTO_FILE = protoFile();

function protoFile(): string {
  const inRepository = existsSync(fileURLToPath(new URL('../../sdk/package.json', import.meta.url)));
  const repository = fileURLToPath(new URL('../../proto/rl/v1/rate_limit.proto', import.meta.url));
  return inRepository && existsSync(repository) ? repository : fileURLToPath(new URL('../proto/rl/v1/rate_limit.proto', import.meta.url));
}

export interface GrpcTransportOptions {
  /** `host:port` of the service's gRPC listener. */
  target: string;
  /** Metadata sent with every call (credentials). */
  metadata: Record<string, string>;
  /** Connect over TLS (`ca`: a CA bundle to trust, e.g. for a private certificate). */
  tls?: boolean;
  ca?: string | Buffer;
}

const METHODS: Record<Operation, string> = { check: 'CheckLimit', acquire: 'Acquire', release: 'Release', refund: 'Refund' };

/** gRPC status codes (numbers, so this module needs grpc-js only when a gRPC client is made). */
const Status = { INVALID_ARGUMENT: 3, NOT_FOUND: 5, PERMISSION_DENIED: 7, RESOURCE_EXHAUSTED: 8, UNIMPLEMENTED: 12, UNAUTHENTICATED: 16 } as const;

type UnaryMethod = (request: unknown, metadata: GrpcJs.Metadata, options: GrpcJs.CallOptions, callback: (error: GrpcJs.ServiceError | null, response?: unknown) => void) => void;

/**
 * rl.v1.RateLimitService over one HTTP/2 channel. @grpc/grpc-js and @grpc/proto-loader are optional
 * peer dependencies: loaded (synchronously, so the first call pays no import) only when a gRPC
 * client is created.
 */
export class GrpcTransport implements Transport {
  private readonly grpc: typeof GrpcJs;
  private readonly client: GrpcJs.Client;
  private readonly metadata: GrpcJs.Metadata;

  constructor(options: GrpcTransportOptions) {
    const require = createRequire(import.meta.url);
    let loader: typeof ProtoLoader;
    try {
      this.grpc = require('@grpc/grpc-js') as typeof GrpcJs;
      loader = require('@grpc/proto-loader') as typeof ProtoLoader;
    } catch {
      throw new TypeError('grpcTarget: needs the optional peer dependencies @grpc/grpc-js and @grpc/proto-loader (npm install @grpc/grpc-js @grpc/proto-loader)');
    }
    const definition = loader.loadSync(PROTO_FILE, { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true });
    const service = definition['rl.v1.RateLimitService'] as GrpcJs.ServiceDefinition;
    const Client = this.grpc.makeGenericClientConstructor(service, 'RateLimitService');
    const credentials = options.tls ? this.grpc.credentials.createSsl(options.ca === undefined ? null : Buffer.from(options.ca)) : this.grpc.credentials.createInsecure();
    this.client = new Client(options.target, credentials);
    this.metadata = new this.grpc.Metadata();
    for (const [key, value] of Object.entries(options.metadata)) this.metadata.set(key, value);
  }

  call(operation: Operation, ctx: RequestContext, timeoutMs: number): Promise<Decision> {
    const method = (this.client as unknown as Record<string, UnaryMethod>)[METHODS[operation]].bind(this.client);
    return new Promise<Decision>((resolve, reject) => {
      method(ctx, this.metadata, { deadline: Date.now() + timeoutMs }, (error, response) => {
        if (error) reject(errorOf(error));
        else {
          try {
            resolve(decisionFrom(response));
          } catch (e) {
            reject(e);
          }
        }
      });
    });
  }

  async close(): Promise<void> {
    this.client.close();
  }
}

function errorOf(error: GrpcJs.ServiceError): Error {
  const message = error.details || error.message;
  switch (error.code) {
    case Status.INVALID_ARGUMENT: {
      const field = error.metadata?.get('rl-invalid-field')[0];
      return new RateLimitInputError(message, 400, typeof field === 'string' ? field : undefined);
    }
    case Status.RESOURCE_EXHAUSTED:
      return new RateLimitInputError(message, 413);
    case Status.UNAUTHENTICATED:
      return new RateLimitAuthError(message, 401);
    case Status.PERMISSION_DENIED:
      return new RateLimitAuthError(message, 403);
    case Status.UNIMPLEMENTED:
    case Status.NOT_FOUND:
      return new RateLimitError(`${message} (is grpcTarget the rate-limit service?)`, 404);
    default:
      // UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, UNKNOWN, CANCELLED...: failMode answers.
      return new ServiceUnavailable(`${error.code}: ${message}`);
  }
}
