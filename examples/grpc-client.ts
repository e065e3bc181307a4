/**
 * A small gRPC client of the rate-limit service: loads proto/rl/v1/rate_limit.proto with
 * @grpc/proto-loader (no generated code) and calls CheckLimit, Acquire and Release, printing each
 * decision.
 *
 *   npx tsx examples/grpc-client.ts
 *
 * Environment:
 *   RL_GRPC_TARGET   host:port of the server (default 127.0.0.1:9090)
 *   RL_API_KEY       sent as `x-api-key` metadata when the server has authentication on
 *   RL_GRPC_TLS      "true" to connect over TLS (RL_GRPC_CA_FILE: a CA bundle to trust, e.g. a
 *                    self-signed test certificate)
 *
 * The requests match policies of examples/policies.json ("acme-api-per-user" and
 * "report-export-concurrency").
 */
import { readFileSync } from 'node:fs';
import { pathToFileURL, fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** The Decision fields, flat, as the server returns them (durations in milliseconds). */
export interface Decision {
  allowed: boolean;
  action: string;
  reason: string;
  matched_policy_id: string;
  remaining: number;
  retry_after: number;
  reset_after: number;
  limit: number;
  shadow_mode: boolean;
  metadata: Record<string, string>;
}

/** The RequestContext fields, all optional (see proto/rl/v1/rate_limit.proto). */
export interface RequestContext {
  request_id?: string;
  org_id?: string;
  tenant_id?: string;
  application?: string;
  service?: string;
  environment?: string;
  signal_type?: string;
  operation?: string;
  endpoint?: string;
  method?: string;
  user_id?: string;
  api_key?: string;
  client_id?: string;
  source_ip?: string;
  region?: string;
  resource?: string;
  severity?: string;
  span_name?: string;
  topic?: string;
  consumer_group?: string;
  job_type?: string;
  /** Cost of the request, an int64; default 1. */
  quantity?: number;
  tags?: Record<string, string>;
}

export interface ExampleOptions {
  credentials?: grpc.ChannelCredentials;
  apiKey?: string;
  /** Where each decision is printed; default console.log. */
  print?: (line: string) => void;
}

const PROTO_DIR = fileURLToPath(new URL('../proto/', import.meta.url));

type Unary = (request: RequestContext, metadata: grpc.Metadata, options: grpc.CallOptions, callback: (error: grpc.ServiceError | null, response: Decision) => void) => void;
type RateLimitClient = grpc.Client & { CheckLimit: Unary; Acquire: Unary; Release: Unary };

/** A client of rl.v1.RateLimitService. int64 fields arrive as JS numbers and every field is present. */
export function createClient(target: string, credentials = grpc.credentials.createInsecure()): RateLimitClient {
  const definition = protoLoader.loadSync('rl/v1/rate_limit.proto', {
    includeDirs: [PROTO_DIR],
    keepCase: true, // field names stay snake_case, exactly as in the .proto and the HTTP JSON
    longs: Number, // decisions never exceed 2^53
    enums: String,
    defaults: true, // proto3 leaves false/0/"" off the wire: fill them in
  });
  const proto = grpc.loadPackageDefinition(definition) as unknown as {
    rl: { v1: { RateLimitService: new (target: string, credentials: grpc.ChannelCredentials) => RateLimitClient } };
  };
  return new proto.rl.v1.RateLimitService(target, credentials);
}

function call(client: RateLimitClient, method: 'CheckLimit' | 'Acquire' | 'Release', request: RequestContext, apiKey?: string): Promise<Decision> {
  const metadata = new grpc.Metadata();
  if (apiKey) metadata.set('x-api-key', apiKey);
  // Always set a deadline: a decision is only useful while the caller still waits for it.
  const deadline = Date.now() + 2_000;
  return new Promise((resolve, reject) => {
    client[method](request, metadata, { deadline }, (error, response) => (error ? reject(error) : resolve(response)));
  });
}

/** Runs the example against `target` and returns the decisions in call order. */
export async function runExample(target: string, options: ExampleOptions = {}): Promise<Decision[]> {
  const print = options.print ?? ((line: string) => console.log(line));
  const client = createClient(target, options.credentials);
  const decisions: Decision[] = [];
  const run = async (method: 'CheckLimit' | 'Acquire' | 'Release', request: RequestContext) => {
    const decision = await call(client, method, request, options.apiKey);
    decisions.push(decision);
    print(`${method} ${JSON.stringify(request)}\n  -> ${JSON.stringify(decision)}`);
    return decision;
  };
  try {
    // A rate decision: 100 requests per minute per ACME user (policy acme-api-per-user).
    await run('CheckLimit', {
      request_id: 'example-check-1',
      org_id: 'acme',
      signal_type: 'http',
      user_id: 'alice',
      endpoint: '/v1/orders',
      method: 'GET',
      quantity: 1,
      tags: { example: 'grpc-client' },
    });
    // A concurrency lease: at most 3 report exports per tenant (policy report-export-concurrency).
    const job = { request_id: 'example-export-42', signal_type: 'job', job_type: 'report_export', tenant_id: 'acme' };
    const lease = await run('Acquire', job);
    if (lease.allowed) {
      // ... do the work, then give the slot back with the same identifying fields.
      await run('Release', job);
    }
    return decisions;
  } finally {
    client.close();
  }
}

function credentialsFromEnv(env: NodeJS.ProcessEnv): grpc.ChannelCredentials {
  if (env.RL_GRPC_TLS !== 'true') return grpc.credentials.createInsecure();
  return grpc.credentials.createSsl(env.RL_GRPC_CA_FILE ? readFileSync(env.RL_GRPC_CA_FILE) : undefined);
}

// Run only when invoked directly (`npx tsx examples/grpc-client.ts`), not when a test imports it.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const target = process.env.RL_GRPC_TARGET || '127.0.0.1:9090';
  runExample(target, { credentials: credentialsFromEnv(process.env), apiKey: process.env.RL_API_KEY }).catch((error: grpc.ServiceError) => {
    console.error(`grpc-client: ${error.code !== undefined ? `${grpc.status[error.code]}: ${error.details}` : error}`);
    process.exit(1);
  });
}
