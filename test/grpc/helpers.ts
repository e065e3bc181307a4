/**
 * Shared fixtures of the gRPC tests: a bound server on 127.0.0.1:0 over a real DecisionService, and
 * real grpc-js clients built from the .proto files with client-side loader options (defaults on,
 * int64 as numbers), as an application would build them.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { createGrpcServer, bindGrpcServer, shutdownGrpcServer, type GrpcAuthenticate } from '../../src/grpc/server.js';
import { PROTO_DIR, PROTO_FILES } from '../../src/grpc/protos.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import type { Policy } from '../../src/policy/types.js';
import { setLogLevel } from '../../src/util/log.js';

/** A whole-day instant in the future: every window that divides a day starts here. */
export const T0 = Date.UTC(2031, 0, 1);

export interface Clock {
  now: number;
}

export interface GrpcFixture {
  target: string;
  port: number;
  server: grpc.Server;
  readiness: Readiness;
  decisions: DecisionService;
  matcher: LiveMatcher;
  clock: Clock;
  close(): Promise<void>;
}

export interface FixtureOptions {
  decisions?: DecisionService;
  authenticate?: GrpcAuthenticate;
  maxMessageBytes?: number;
  /** Leave readiness in 'starting'. */
  notReady?: boolean;
  random?: () => number;
  envoyHeaders?: 'ietf' | 'legacy' | 'off';
  envoyHeaderDescriptors?: 'limiting' | 'all';
  envoyConsumeAll?: boolean;
}

/** A DecisionService over fresh in-memory counters and a controllable clock. */
export function makeDecisions(policies: Policy[], clock: Clock, random: () => number = () => 0.5) {
  const matcher = new LiveMatcher(policies);
  const counters = new MemoryCounterStore({ now: () => clock.now, sweepIntervalMs: 0 });
  const decisions = new DecisionService({ policies: matcher, counters, keyPrefix: 'grpc-test:', now: () => clock.now, random });
  return { decisions, matcher };
}

export async function startGrpc(policies: Policy[], options: FixtureOptions = {}): Promise<GrpcFixture> {
  const clock: Clock = { now: T0 };
  const built = makeDecisions(policies, clock, options.random);
  const decisions = options.decisions ?? built.decisions;
  const readiness = new Readiness();
  if (!options.notReady) readiness.markReady();
  const server = createGrpcServer({
    decisions,
    readiness,
    maxMessageBytes: options.maxMessageBytes ?? 1024 * 1024,
    authenticate: options.authenticate,
    policies: built.matcher,
    envoyHeaders: options.envoyHeaders,
    envoyHeaderDescriptors: options.envoyHeaderDescriptors,
    envoyConsumeAll: options.envoyConsumeAll,
  });
  const { port, target } = await bindLocal(server);
  return {
    target,
    port,
    server,
    readiness,
    decisions,
    matcher: built.matcher,
    clock,
    close: () => shutdownGrpcServer(server, 1000),
  };
}

const CLIENT_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

function clientConstructor(file: string, service: string): grpc.ServiceClientConstructor {
  const definition = protoLoader.loadSync(file, CLIENT_OPTIONS);
  return grpc.makeClientConstructor(definition[service] as grpc.ServiceDefinition, service);
}

/** Binds `server` insecurely on 127.0.0.1 with a free port. */
export async function bindLocal(server: grpc.Server): Promise<{ port: number; target: string }> {
  const port = await bindGrpcServer(server, { host: '127.0.0.1', port: 0 }, grpc.ServerCredentials.createInsecure());
  return { port, target: `127.0.0.1:${port}` };
}

export function rateLimitClient(target: string, credentials = grpc.credentials.createInsecure()): grpc.Client {
  const Client = clientConstructor(PROTO_FILES.rateLimit, 'rl.v1.RateLimitService');
  return new Client(target, credentials);
}

export function envoyClient(target: string, credentials = grpc.credentials.createInsecure()): grpc.Client {
  const Client = clientConstructor(PROTO_FILES.envoy, 'envoy.service.ratelimit.v3.RateLimitService');
  return new Client(target, credentials);
}

export function healthClient(target: string, credentials = grpc.credentials.createInsecure()): grpc.Client {
  const Client = clientConstructor(PROTO_FILES.health, 'grpc.health.v1.Health');
  return new Client(target, credentials);
}

export interface CallOptions {
  metadata?: Record<string, string>;
  /** Milliseconds from now. */
  timeoutMs?: number;
}

/** One unary call as a promise; rejects with the grpc.ServiceError. */
export function unary<Res = any>(client: grpc.Client, method: string, request: unknown, options: CallOptions = {}): Promise<Res> {
  const metadata = new grpc.Metadata();
  for (const [key, value] of Object.entries(options.metadata ?? {})) metadata.set(key, value);
  const callOptions: grpc.CallOptions = options.timeoutMs !== undefined ? { deadline: Date.now() + options.timeoutMs } : {};
  const fn = (client as unknown as Record<string, Function>)[method];
  if (typeof fn !== 'function') throw new Error(`no method ${method}`);
  return new Promise((resolve, reject) => {
    fn.call(client, request, metadata, callOptions, (error: grpc.ServiceError | null, response: Res) =>
      error ? reject(error) : resolve(response),
    );
  });
}

/** The ServiceError a call fails with (fails the test when the call succeeds). */
export async function callError(client: grpc.Client, method: string, request: unknown, options?: CallOptions): Promise<grpc.ServiceError> {
  try {
    const response = await unary(client, method, request, options);
    throw new Error(`expected ${method} to fail, got ${JSON.stringify(response)}`);
  } catch (error) {
    if ((error as grpc.ServiceError).code === undefined) throw error;
    return error as grpc.ServiceError;
  }
}

export interface GrpcSuite {
  /** The fixture and client of the running test; set by start(). */
  readonly fixture: GrpcFixture;
  readonly client: grpc.Client;
  /** Starts a fixture over `policies` (default the suite's) with a client on it; both closed after the test. */
  start(options?: FixtureOptions, policies?: Policy[]): Promise<GrpcFixture>;
}

/** One fixture and client per test of the enclosing describe(), with logging silenced for the block. */
export function grpcSuite(policies: Policy[], connect: (target: string) => grpc.Client): GrpcSuite {
  let fixture: GrpcFixture | undefined;
  let client: grpc.Client | undefined;
  before(() => setLogLevel('silent'));
  after(() => setLogLevel('info'));
  afterEach(async () => {
    client?.close();
    await fixture?.close();
  });
  return {
    get fixture() {
      if (fixture === undefined) throw new Error('grpcSuite: fixture read before start()');
      return fixture;
    },
    get client() {
      if (client === undefined) throw new Error('grpcSuite: client read before start()');
      return client;
    },
    async start(options = {}, own = policies) {
      fixture = await startGrpc(own, options);
      client = connect(fixture.target);
      return fixture;
    },
  };
}
