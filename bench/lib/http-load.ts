import autocannon from 'autocannon';
import { Samples, cpuPercentSince, emptyLatency, type LatencySummary } from './stats.js';

/** With auth on in the server under test (RL_BENCH_AUTH_API_KEYS, bench/child/server.ts), its key. */
const BENCH_HEADERS: Record<string, string> = process.env.RL_BENCH_API_KEY
  ? { 'content-type': 'application/json', 'x-api-key': process.env.RL_BENCH_API_KEY }
  : { 'content-type': 'application/json' };

/**
 * One autocannon run against 127.0.0.1, in this (load generator) process. Latencies are taken from
 * autocannon's per-response event with sub-millisecond resolution (its own histogram keeps whole
 * milliseconds, too coarse for a 2 ms target). A warm-up run precedes the measured one and is thrown away.
 */

export interface HttpLoadOptions {
  port: number;
  path: string;
  /** JSON bodies; each connection cycles through them (pre-built by autocannon, no per-request work). */
  bodies: string[];
  connections: number;
  durationSec: number;
  warmupSec: number;
  /** Requests per second over all connections (autocannon overallRate); undefined = as fast as possible. */
  overallRate?: number;
}

export interface HttpLoadResult extends LatencySummary {
  /** 2xx responses per second over the measured run. */
  throughput_rps: number;
  requests: number;
  non2xx: number;
  errors: number;
  duration_s: number;
  /** CPU time the load generator (this process) used per wall second, percent of one core. */
  loadgen_cpu_pct: number;
}

export async function httpLoad(options: HttpLoadOptions): Promise<HttpLoadResult> {
  if (options.warmupSec > 0) await once({ ...options, durationSec: options.warmupSec }, undefined);
  const samples = new Samples(1 << 18);
  return once(options, samples);
}

async function once(options: HttpLoadOptions, samples: Samples | undefined): Promise<HttpLoadResult> {
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: `http://127.0.0.1:${options.port}`,
        connections: options.connections,
        pipelining: 1,
        duration: options.durationSec,
        overallRate: options.overallRate,
        timeout: 10,
        requests: options.bodies.map((body) => ({
          method: 'POST' as const,
          path: options.path,
          headers: BENCH_HEADERS,
          body,
        })),
      },
      (error, result) => (error ? reject(error) : resolve(result)),
    );
    if (samples) {
      instance.on('response', (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
        if (statusCode >= 200 && statusCode < 300) samples.add(responseTime);
      });
    }
  });
  const wallMs = performance.now() - started;
  return {
    ...(samples?.summary() ?? emptyLatency()),
    throughput_rps: result['2xx'] / result.duration,
    requests: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    duration_s: result.duration,
    loadgen_cpu_pct: cpuPercentSince(cpuBefore, wallMs),
  };
}
