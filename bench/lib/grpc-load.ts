import * as grpc from '@grpc/grpc-js';
import { SERVICE_NAMES, serviceDefinition } from '../../src/grpc/protos.js';
import { Samples, cpuPercentSince, emptyLatency, type LatencySummary } from './stats.js';

/**
 * A bounded-concurrency unary load loop with grpc-js clients (the same loop for the service and its
 * baseline): `channels` separate HTTP/2 connections, `concurrency` calls in flight at any time, each
 * worker sending its next call as soon as the previous one answered, for `durationSec`.
 */

export interface GrpcLoadOptions {
  port: number;
  messages: Record<string, string>[];
  channels: number;
  concurrency: number;
  durationSec: number;
  warmupSec: number;
}

export interface GrpcLoadResult extends LatencySummary {
  throughput_rps: number;
  requests: number;
  errors: number;
  duration_s: number;
  loadgen_cpu_pct: number;
}

type CheckLimit = (request: unknown, callback: (error: grpc.ServiceError | null, response?: unknown) => void) => grpc.ClientUnaryCall;

export async function grpcLoad(options: GrpcLoadOptions): Promise<GrpcLoadResult> {
  const Client = grpc.makeClientConstructor(serviceDefinition(SERVICE_NAMES.rateLimit), SERVICE_NAMES.rateLimit);
  const clients = Array.from({ length: options.channels }, () => {
    // A local subchannel pool gives every client its own connection instead of one shared one.
    return new Client(`127.0.0.1:${options.port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
  });
  try {
    await Promise.all(clients.map((c) => new Promise<void>((resolve, reject) => c.waitForReady(Date.now() + 10_000, (e?: Error) => (e ? reject(e) : resolve())))));
    if (options.warmupSec > 0) await run(clients, options, options.warmupSec, undefined);
    return await run(clients, options, options.durationSec, new Samples(1 << 18));
  } finally {
    for (const c of clients) c.close();
  }
}

async function run(clients: grpc.Client[], options: GrpcLoadOptions, durationSec: number, samples: Samples | undefined): Promise<GrpcLoadResult> {
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const endAt = started + durationSec * 1000;
  let requests = 0;
  let errors = 0;
  let next = 0;
  const worker = async (w: number) => {
    const client = clients[w % clients.length] as unknown as { CheckLimit: CheckLimit };
    while (performance.now() < endAt) {
      const message = options.messages[next++ % options.messages.length];
      const t0 = performance.now();
      const ok = await new Promise<boolean>((resolve) => {
        client.CheckLimit(message, (error) => resolve(error === null));
      });
      if (ok) {
        requests++;
        samples?.add(performance.now() - t0);
      } else errors++;
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, (_, w) => worker(w)));
  const wallMs = performance.now() - started;
  return {
    ...(samples?.summary() ?? emptyLatency()),
    throughput_rps: requests / (wallMs / 1000),
    requests,
    errors,
    duration_s: wallMs / 1000,
    loadgen_cpu_pct: cpuPercentSince(cpuBefore, wallMs),
  };
}
