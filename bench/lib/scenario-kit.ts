/**
 * What every scenario shares: the run's settings and context, the result shapes, starting children and
 * measuring them, and the checks. Apart from scenarios.ts so that scenarios in files of their own use it without
 * importing the list of scenarios (and the list, them).
 */
import type { ChildProcess } from 'node:child_process';
import type { GrpcLoadResult } from './grpc-load.js';
import { httpLoad, type HttpLoadResult } from './http-load.js';
import { loadFields } from './load-fields.js';
import { pacedHttpLoad, type PacedLoadResult } from './paced-load.js';
import { nextMessage, request, spawnChild, type PrivateRedis } from './proc.js';
import { round } from './stats.js';
import { generateWorkload } from './workload.js';

/** How long and how hard each scenario runs: `full` for the record, `quick` under a minute, `smoke` for the test. */
export interface Settings {
  mode: 'full' | 'quick' | 'smoke';
  /**
   * Closed-loop throughput runs alternate subject and baseline `rounds` times, `durationSec` each; each
   * side reports its median round (slow drifts in the machine's background load hit both sides alike).
   * Paced (open-loop) latency runs last `pacedDurationSec`.
   */
  http: { connections: number; durationSec: number; rounds: number; pacedDurationSec: number; warmupSec: number; distinctBodies: number };
  grpc: { channels: number; concurrency: number; durationSec: number; rounds: number; warmupSec: number };
  engine: { roundMs: number; rounds: number; warmupMs: number; latencyCalls: number };
  scaling: { policyCounts: number[] };
  /** `idleTimeoutMs`: how long the child may idle after expiry waiting for V8's memory reducer (0: not measured). */
  memory: { keys: number; idleTimeoutMs: number };
  /** Extra measurements that explain a result but are not a target (rl decision on bare node:http, engine without recorder). */
  breakdowns: boolean;
}

export const SETTINGS: Record<Settings['mode'], Settings> = {
  full: {
    mode: 'full',
    http: { connections: 10, durationSec: 4, rounds: 3, pacedDurationSec: 10, warmupSec: 3, distinctBodies: 100 },
    grpc: { channels: 2, concurrency: 16, durationSec: 4, rounds: 3, warmupSec: 3 },
    engine: { roundMs: 1000, rounds: 5, warmupMs: 1000, latencyCalls: 300_000 },
    scaling: { policyCounts: [10, 1_000, 100_000] },
    memory: { keys: 1_000_000, idleTimeoutMs: 150_000 },
    breakdowns: true,
  },
  quick: {
    mode: 'quick',
    http: { connections: 10, durationSec: 2, rounds: 1, pacedDurationSec: 2, warmupSec: 0.5, distinctBodies: 100 },
    grpc: { channels: 2, concurrency: 16, durationSec: 2, rounds: 1, warmupSec: 0.5 },
    engine: { roundMs: 300, rounds: 3, warmupMs: 300, latencyCalls: 50_000 },
    scaling: { policyCounts: [10, 1_000, 100_000] },
    memory: { keys: 100_000, idleTimeoutMs: 0 },
    breakdowns: false,
  },
  smoke: {
    mode: 'smoke',
    // autocannon stops on its one-second tick: a run lasts at least a second whatever the duration.
    http: { connections: 4, durationSec: 1, rounds: 1, pacedDurationSec: 1, warmupSec: 0, distinctBodies: 10 },
    grpc: { channels: 1, concurrency: 4, durationSec: 0.5, rounds: 1, warmupSec: 0 },
    engine: { roundMs: 100, rounds: 2, warmupMs: 100, latencyCalls: 5_000 },
    scaling: { policyCounts: [10, 100, 1_000] },
    memory: { keys: 20_000, idleTimeoutMs: 0 },
    breakdowns: false,
  },
};

/** One measured side (the service or its baseline). Throughput in operations per second; latencies in ms. */
export interface Side {
  name: string;
  throughput_per_s: number | null;
  p50_ms: number | null;
  p99_ms: number | null;
  [extra: string]: unknown;
}

export interface Check {
  target: string;
  value: number;
  unit: string;
  op: '>=' | '<=';
  limit: number;
  pass: boolean;
}

export interface ScenarioResult {
  id: number;
  key: string;
  name: string;
  subject: Side;
  baseline: Side;
  ratio: number | null;
  /** What the ratio divides, so a reader knows whether higher is better. */
  ratio_meaning: string;
  target: string;
  checks: Check[];
  pass: boolean;
  notes: string[];
  details: Record<string, unknown>;
}

export interface Context {
  settings: Settings;
  /** The private Redis shared by the Redis scenarios, started on first use. */
  redis(): Promise<PrivateRedis>;
  log(message: string): void;
}


export function check(target: string, value: number, op: '>=' | '<=', limit: number, unit = ''): Check {
  const pass = Number.isFinite(value) && (op === '>=' ? value >= limit : value <= limit);
  return { target, value: round(value), unit, op, limit, pass };
}

export function finish(r: Omit<ScenarioResult, 'pass'>): ScenarioResult {
  return { ...r, ratio: r.ratio === null ? null : round(r.ratio), pass: r.checks.every((c) => c.pass) };
}

export async function startServer(kind: string, args: string[] = [], nodeFlags: string[] = [], env?: Record<string, string>): Promise<{ child: ChildProcess; port: number }> {
  const child = spawnChild('server.ts', ['--kind', kind, ...args], { nodeFlags, env });
  const ready = await nextMessage<{ port: number }>(child, 'ready', 60_000);
  return { child, port: ready.port };
}

interface Usage {
  cpu: NodeJS.CpuUsage;
  memory: NodeJS.MemoryUsage;
  hrtime_ms: number;
  gc: { count: number; total_ms: number; max_ms: number; major_count: number; major_ms: number };
  stats?: Record<string, number>;
}

/** Server CPU over a measured run: percent of one core, and µs of CPU per answered request. */
export async function withServerCpu<T extends { requests: number }>(child: ChildProcess, run: () => Promise<T>) {
  const before = await request<Usage>(child, { type: 'usage' }, 'usage');
  const result = await run();
  const after = await request<Usage>(child, { type: 'usage' }, 'usage');
  const cpuUs = after.cpu.user + after.cpu.system - before.cpu.user - before.cpu.system;
  const wallMs = after.hrtime_ms - before.hrtime_ms;
  let service: Record<string, number> | undefined;
  if (after.stats) {
    service = {};
    for (const [name, value] of Object.entries(after.stats)) service[name] = value - (before.stats?.[name] ?? 0);
  }
  return {
    result,
    /** The service's own counters over the run (decisions, counter-store errors, failure-mode decisions). */
    service,
    server_cpu_pct: round((cpuUs / 1000 / wallMs) * 100),
    server_cpu_us_per_request: round(cpuUs / Math.max(1, result.requests)),
    server_rss_mib: round(after.memory.rss / 2 ** 20),
    /** GC in the server during the run (the `after` answer covers the time since `before`). */
    server_gc: {
      pct: round((after.gc.total_ms / wallMs) * 100),
      max_pause_ms: round(after.gc.max_ms),
      major_count: after.gc.major_count,
    },
  };
}

export function httpBodies(settings: Settings): string[] {
  return generateWorkload(10).bodies.slice(0, settings.http.distinctBodies).map((b) => JSON.stringify(b));
}

/**
 * Subject and baseline measured alternately `rounds` times; each side's median round (by throughput)
 * is reported, with every round's throughput beside it.
 */
export async function alternate<T extends { result: { throughput_rps: number } }>(rounds: number, a: () => Promise<T>, b: () => Promise<T>) {
  const as: T[] = [];
  const bs: T[] = [];
  for (let r = 0; r < rounds; r++) {
    as.push(await a());
    bs.push(await b());
  }
  const medianRound = (xs: T[]) => [...xs].sort((x, y) => x.result.throughput_rps - y.result.throughput_rps)[Math.floor((xs.length - 1) / 2)];
  const all = (xs: T[]) => xs.map((x) => round(x.result.throughput_rps));
  return { a: medianRound(as), b: medianRound(bs), aRounds: all(as), bRounds: all(bs) };
}

/** `alternate` for any number of sides: each side's median round, and every round's throughput. */
export async function alternateMany<T extends { result: { throughput_rps: number } }>(rounds: number, sides: (() => Promise<T>)[]) {
  const runs: T[][] = sides.map(() => []);
  for (let r = 0; r < rounds; r++) for (const [i, side] of sides.entries()) runs[i].push(await side());
  return runs.map((xs) => ({
    median: [...xs].sort((x, y) => x.result.throughput_rps - y.result.throughput_rps)[Math.floor((xs.length - 1) / 2)],
    rounds: xs.map((x) => round(x.result.throughput_rps)),
    all: xs,
  }));
}

/** Warms several HTTP servers at once (warm-up results are thrown away, so sharing the cores is harmless). */
export async function warmHttp(ctx: Context, ports: number[]): Promise<void> {
  const { http } = ctx.settings;
  if (http.warmupSec <= 0) return;
  const bodies = httpBodies(ctx.settings);
  await Promise.all(
    ports.map((port) => httpLoad({ port, path: '/rl/v1/check', bodies, connections: http.connections, durationSec: http.warmupSec, warmupSec: 0 })),
  );
}

/**
 * Sockets of the paced (open-loop) generator: enough that a burst from its 1 ms timer never waits for a
 * free socket on the client side (which would be latency the server did not cause); many callers.
 */
export const PACED_CONNECTIONS = 64;

/**
 * A warm-up run (thrown away), then the measured run; `beforeMeasured` runs between the two. Closed loop
 * with autocannon (as fast as the server answers; `overallRate` caps it autocannon's way), or, with
 * `pacedRate`, the open-loop evenly paced generator (latency at a given offered load).
 */
export async function measureHttp(
  ctx: Context,
  child: ChildProcess,
  port: number,
  options: { overallRate?: number; pacedRate?: number; warm?: boolean; beforeMeasured?: () => void } = {},
) {
  const { http } = ctx.settings;
  const { overallRate, beforeMeasured } = options;
  const base = { port, path: '/rl/v1/check', bodies: httpBodies(ctx.settings), connections: http.connections, overallRate };
  // `warm`: this server has just been under load, its JIT is warm already.
  if (http.warmupSec > 0 && !options.warm) await httpLoad({ ...base, durationSec: http.warmupSec, warmupSec: 0 });
  beforeMeasured?.();
  const rate = options.pacedRate;
  if (rate !== undefined) {
    return withServerCpu(child, () => pacedHttpLoad({ ...base, connections: PACED_CONNECTIONS, rate, durationSec: http.pacedDurationSec }));
  }
  return withServerCpu(child, () => httpLoad({ ...base, durationSec: http.durationSec, warmupSec: 0 }));
}

export function httpSide(
  name: string,
  m: {
    result: HttpLoadResult | GrpcLoadResult | PacedLoadResult;
    server_cpu_pct: number;
    server_cpu_us_per_request: number;
    server_rss_mib: number;
    server_gc: { pct: number; max_pause_ms: number; major_count: number };
    service?: Record<string, number>;
  },
): Side {
  return {
    name,
    ...loadFields(m.result),
    server_cpu_pct: m.server_cpu_pct,
    server_cpu_us_per_request: m.server_cpu_us_per_request,
    server_rss_mib: m.server_rss_mib,
    server_gc_pct: m.server_gc.pct,
    server_gc_max_pause_ms: m.server_gc.max_pause_ms,
    server_gc_major_count: m.server_gc.major_count,
    ...(m.service
      ? {
          service_decisions: m.service.rl_decisions_total,
          service_counter_store_errors: m.service.rl_counter_store_errors_total,
          service_failure_mode_decisions: m.service.rl_failure_mode_decisions_total,
        }
      : {}),
  };
}

export function loadNotes(...sides: Side[]): string[] {
  const notes: string[] = [];
  for (const s of sides) {
    if (typeof s.loadgen_cpu_pct === 'number' && s.loadgen_cpu_pct > 90) {
      notes.push(`${s.name}: the load generator used ${s.loadgen_cpu_pct}% of its core, so it may have capped that throughput.`);
    }
    if (typeof s.server_cpu_pct === 'number' && s.server_cpu_pct < 85 && s.throughput_per_s !== null) {
      notes.push(`${s.name}: the server used only ${s.server_cpu_pct}% of its core (not the bottleneck at this load).`);
    }
    if (typeof s.service_failure_mode_decisions === 'number' && s.service_failure_mode_decisions > 0) {
      notes.push(
        `${s.name}: ${s.service_failure_mode_decisions} of ${s.service_decisions} decisions were made by failure_mode ` +
          `(${s.service_counter_store_errors} counter-store errors: timeouts or an open breaker).`,
      );
    }
  }
  return notes;
}

/**
 * Server CPU per request, baseline over subject: the throughput ratio the two servers would show if
 * each had its core to itself and saturated it. It holds when the throughput ratio cannot: when the load
 * generator caps both (gRPC) or other work on the machine takes a share of the server's core.
 */
export function cpuCapacityRatio(subject: Side, baseline: Side): number | null {
  const s = subject.server_cpu_us_per_request;
  const b = baseline.server_cpu_us_per_request;
  return typeof s === 'number' && typeof b === 'number' && s > 0 ? round(b / s) : null;
}
