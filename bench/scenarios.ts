import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { grpcLoad } from './lib/grpc-load.js';
import { httpLoad } from './lib/http-load.js';
import { pacedHttpLoad } from './lib/paced-load.js';
import {
  LOAD_CORE,
  REPO_DIR,
  commandStats,
  nextMessage,
  sleep,
  spawnChild,
  startPrivateRedis,
  stopChild,
  type PrivateRedis,
} from './lib/proc.js';
import { round } from './lib/stats.js';
import {
  HOT_KEY_BODY,
  LEASE_CAPPED_BODY,
  LEASE_CAPPED_LIMIT,
  LEASE_HOT_BODY,
  REGION_CAPPED_BODY,
  REGION_CAPPED_LIMIT,
  REGION_HOT_BODY,
  generateWorkload,
} from './lib/workload.js';
import {
  alternate,
  alternateMany,
  check,
  cpuCapacityRatio,
  finish,
  httpBodies,
  httpSide,
  loadNotes,
  measureHttp,
  PACED_CONNECTIONS,
  startServer,
  warmHttp,
  withServerCpu,
  type Context,
  type ScenarioResult,
  type Side,
} from './lib/scenario-kit.js';
import { workersCapacity } from './workers-capacity.js';
import { policyChanges } from './policy-changes.js';
import { tracingCost } from './tracing-cost.js';
import { linkFaults, refillAhead } from './region-faults.js';

type Scenario = (ctx: Context) => Promise<ScenarioResult>;

export const SCENARIOS: Record<number, { key: string; run: Scenario }> = {
  1: { key: 'http_memory', run: httpMemory },
  2: { key: 'http_redis', run: httpRedis },
  3: { key: 'grpc_memory', run: grpcMemory },
  4: { key: 'engine_memory', run: engineMemory },
  5: { key: 'policy_scaling', run: policyScaling },
  6: { key: 'memory_per_key', run: memoryPerKey },
  7: { key: 'redis_down', run: redisDown },
  8: { key: 'workers_capacity', run: (ctx) => workersCapacity(ctx, 8) },
  9: { key: 'hot_key_attack', run: hotKeyAttack },
  10: { key: 'policy_changes', run: (ctx) => policyChanges(ctx, 10) },
  11: { key: 'tracing_cost', run: (ctx) => tracingCost(ctx, 11) },
  12: { key: 'lease_hot_key', run: leaseHotKey },
  13: { key: 'regions', run: twoRegions },
  14: { key: 'link_faults', run: (ctx) => linkFaults(ctx, 14) },
  15: { key: 'refill_ahead', run: (ctx) => refillAhead(ctx, 15) },
  16: { key: 'calendar_cost', run: calendarCost },
  17: { key: 'stacked_layers', run: stackedLayers },
  18: { key: 'layers_at_scale', run: layersAtScale },
};

// ---------------------------------------------------------------------------------------------------
// 1. HTTP check, memory mode vs bare node:http

async function httpMemory(ctx: Context): Promise<ScenarioResult> {
  const [rl, bare, ceiling] = await Promise.all([startServer('rl-http'), startServer('bare-http'), startServer('ceiling-http')]);
  try {
    ctx.log(`  rl-http (memory), bare node:http and the minimal node:http ceiling at full load, alternately (${ctx.settings.http.rounds} rounds)`);
    await warmHttp(ctx, [rl.port, bare.port, ceiling.port]);
    const [rlRuns, bareRuns, ceilingRuns] = await alternateMany(ctx.settings.http.rounds, [
      () => measureHttp(ctx, rl.child, rl.port, { warm: true }),
      () => measureHttp(ctx, bare.child, bare.port, { warm: true }),
      () => measureHttp(ctx, ceiling.child, ceiling.port, { warm: true }),
    ]);
    const max = { aRounds: rlRuns.rounds, bRounds: bareRuns.rounds };
    const rlMax = rlRuns.median;
    const bareMax = bareRuns.median;
    const half = Math.max(1, Math.round(rlMax.result.throughput_rps / 2));
    // The target's figure, measured as the issue prescribes: autocannon with overallRate, same connections.
    // autocannon paces per second (each connection sends its quota, then waits for the next second), so
    // this is the p99 of a closed loop of 10 callers running at full speed for about half of each second.
    ctx.log(`  rl-http at half its maximum (${half} req/s, autocannon overallRate) and bare node:http at the same rate`);
    const rlHalf = await measureHttp(ctx, rl.child, rl.port, { overallRate: half, warm: true });
    const bareHalf = await measureHttp(ctx, bare.child, bare.port, { overallRate: half, warm: true });
    let paced: { subject: Side; baseline: Side } | undefined;
    if (ctx.settings.breakdowns) {
      // Stricter: an open loop of many callers, evenly paced, where a stall of the server's core builds a
      // queue that the closed loop above cannot (it never has more than 10 requests outstanding).
      ctx.log(`  rl-http and bare node:http at ${half} req/s, open loop evenly paced over ${PACED_CONNECTIONS} connections`);
      const rlPaced = await measureHttp(ctx, rl.child, rl.port, { pacedRate: half, warm: true });
      const barePaced = await measureHttp(ctx, bare.child, bare.port, { pacedRate: half, warm: true });
      paced = { subject: httpSide('rl at half rate, open loop', rlPaced), baseline: httpSide('bare at half rate, open loop', barePaced) };
    }
    const subject = { ...httpSide('rl HTTP /rl/v1/check (fast path, memory, recorder on)', rlMax), rounds_throughput_per_s: max.aRounds };
    const baseline = { ...httpSide('bare node:http (read, JSON.parse, fixed decision)', bareMax), rounds_throughput_per_s: max.bRounds };
    const ratio = rlMax.result.throughput_rps / bareMax.result.throughput_rps;
    const ceilingSide = {
      ...httpSide('minimal node:http ceiling (read, JSON.parse, six headers, fixed decision, synchronous)', ceilingRuns.median),
      rounds_throughput_per_s: ceilingRuns.rounds,
    };
    const ceilingCpuRatio = cpuCapacityRatio(subject, ceilingSide);
    const details: Record<string, unknown> = {
      cpu_capacity_ratio: cpuCapacityRatio(subject, baseline),
      // Issue 15, target 1: the ratio against Node's ceiling, beside the one against the bench's bare server.
      ceiling: {
        ...ceilingSide,
        throughput_ratio: round(rlMax.result.throughput_rps / ceilingRuns.median.result.throughput_rps),
        cpu_capacity_ratio: ceilingCpuRatio,
        bare_cpu_capacity_ratio_to_ceiling: cpuCapacityRatio(baseline, ceilingSide),
      },
      half_rate: {
        generator: `autocannon overallRate ${half}/s over ${ctx.settings.http.connections} connections (closed loop, paced per second)`,
        subject: httpSide('rl at half rate', rlHalf),
        baseline: httpSide('bare at half rate', bareHalf),
        open_loop: paced
          ? { generator: `open loop, evenly paced on a 1 ms timer over ${PACED_CONNECTIONS} connections (bench/lib/paced-load.ts)`, ...paced }
          : null,
      },
    };
    if (ctx.settings.breakdowns) {
      // What the decision fast path saves (the same service behind the Koa app alone), and how much of
      // the gap the documented response headers are (the bare server answering with them).
      const variants = [
        ['rl-koa-http', 'breakdown_koa_only', 'rl HTTP check through Koa only (createApp, no fast path)'],
        ['bare-http-headers', 'breakdown_bare_with_headers', 'bare node:http answering with the documented headers'],
      ] as const;
      for (const [kind, key, name] of variants) {
        const server = await startServer(kind);
        try {
          ctx.log(`  breakdown: ${name}`);
          const run = await measureHttp(ctx, server.child, server.port);
          details[key] = { ...httpSide(name, run), ratio_to_bare: round(run.result.throughput_rps / bareMax.result.throughput_rps) };
        } finally {
          await stopChild(server.child);
        }
      }
    }
    return finish({
      id: 1,
      key: 'http_memory',
      name: 'HTTP check, memory mode',
      subject: { ...subject, half_rate_rps: half, half_rate_p50_ms: round(rlHalf.result.p50_ms), half_rate_p99_ms: round(rlHalf.result.p99_ms) },
      baseline: { ...baseline, half_rate_rps: half, half_rate_p50_ms: round(bareHalf.result.p50_ms), half_rate_p99_ms: round(bareHalf.result.p99_ms) },
      ratio,
      ratio_meaning: 'throughput(rl) / throughput(bare node:http), median rounds of alternating runs; higher is better',
      target: '>= 0.80 of bare node:http; >= 0.85 of the minimal node:http ceiling in server CPU per request; p99 <= 2 ms at half the max throughput',
      checks: [
        check('throughput vs bare node:http', ratio, '>=', 0.8, 'x'),
        check('server CPU per request vs minimal node:http ceiling (ceiling µs / rl µs)', ceilingCpuRatio ?? NaN, '>=', 0.85, 'x'),
        check(`p99 at half max (${half} req/s, autocannon overallRate)`, rlHalf.result.p99_ms, '<=', 2, 'ms'),
      ],
      notes: loadNotes(subject, baseline, ceilingSide),
      details,
    });
  } finally {
    await Promise.all([stopChild(rl.child), stopChild(bare.child), stopChild(ceiling.child)]);
  }
}

// ---------------------------------------------------------------------------------------------------
// 2. HTTP check, Redis mode vs rate-limiter-flexible RateLimiterRedis

const SCRIPT_COMMANDS = new Set(['eval', 'evalsha', 'eval_ro', 'evalsha_ro', 'fcall', 'fcall_ro']);

/** Commands the Lua scripts run inside Redis (lua/**.lua and rate-limiter-flexible's script): counted apart. */
function inScriptCommands(): Set<string> {
  const names = new Set(['set', 'incrby', 'pttl', 'expire']); // rate-limiter-flexible's incrTtl script
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.lua')) {
        for (const m of readFileSync(path, 'utf8').matchAll(/redis\.p?call\(\s*['"]([A-Za-z]+)['"]/g)) names.add(m[1].toLowerCase());
      }
    }
  };
  walk(join(REPO_DIR, 'lua'));
  return names;
}

function commandDelta(before: Map<string, number>, after: Map<string, number>, decisions: number) {
  const inScript = inScriptCommands();
  const byCommand: Record<string, number> = {};
  let total = 0;
  let scripts = 0;
  let client = 0;
  for (const [name, calls] of after) {
    const delta = calls - (before.get(name) ?? 0);
    if (delta <= 0 || name === 'info') continue; // INFO: this benchmark's own probes
    byCommand[name] = delta;
    total += delta;
    if (SCRIPT_COMMANDS.has(name)) scripts += delta;
    if (!inScript.has(name)) client += delta;
  }
  const per = (n: number) => round(n / Math.max(1, decisions), 4);
  return {
    decisions,
    client_commands_per_decision: per(client),
    scripts_per_decision: per(scripts),
    all_commands_per_decision_incl_in_script: per(total),
    by_command: byCommand,
  };
}

async function httpRedis(ctx: Context): Promise<ScenarioResult> {
  const redis = await ctx.redis();
  const [rl, rlf] = await Promise.all([startServer('rl-http', ['--redis', redis.addr]), startServer('rlf-http', ['--redis', redis.addr])]);
  try {
    ctx.log(`  rl-http (Redis) and rate-limiter-flexible RateLimiterRedis on node:http at full load, alternately (${ctx.settings.http.rounds} rounds)`);
    await warmHttp(ctx, [rl.port, rlf.port]);
    // Each run counts the Redis commands it caused: `before` is taken after any warm-up, and the
    // service's own decision count (rl_decisions_total) includes the requests in flight when the load
    // stopped, whose scripts Redis did run (autocannon counts only the answers it received).
    const withCommands = async (child: ChildProcess, port: number, decisionsOf: (m: Awaited<ReturnType<typeof measureHttp>>) => number) => {
      let before = new Map<string, number>();
      const run = await measureHttp(ctx, child, port, { warm: true, beforeMeasured: () => (before = commandStats(redis)) });
      return { ...run, commands: commandDelta(before, commandStats(redis), decisionsOf(run)) };
    };
    const runs = await alternate(
      ctx.settings.http.rounds,
      () => withCommands(rl.child, rl.port, (m) => m.service?.rl_decisions_total ?? m.result.requests),
      () => withCommands(rlf.child, rlf.port, (m) => m.result.requests),
    );
    const rlRun = runs.a;
    const rlfRun = runs.b;
    const rlCommands = rlRun.commands;
    const rlfCommands = rlfRun.commands;
    const subject = { ...httpSide('rl HTTP /rl/v1/check (fast path, Redis, batched EVALSHA)', rlRun), rounds_throughput_per_s: runs.aRounds, redis: rlCommands };
    const baseline = { ...httpSide('rate-limiter-flexible RateLimiterRedis on node:http', rlfRun), rounds_throughput_per_s: runs.bRounds, redis: rlfCommands };
    const ratio = rlRun.result.throughput_rps / rlfRun.result.throughput_rps;
    return finish({
      id: 2,
      key: 'http_redis',
      name: 'HTTP check, Redis mode',
      subject,
      baseline,
      ratio,
      ratio_meaning: 'throughput(rl) / throughput(rate-limiter-flexible), median rounds of alternating runs; higher is better',
      // Issue 15, target 2 (was 1.5x throughput and <= 1 command in issue 6): capacity is server CPU per request.
      target: '>= 1.2x rate-limiter-flexible in capacity (server CPU per request); <= 0.3 Redis commands per decision',
      checks: [
        check('capacity vs RateLimiterRedis (rlf µs / rl µs of server CPU per request)', cpuCapacityRatio(subject, baseline) ?? NaN, '>=', 1.2, 'x'),
        check('client Redis commands per decision', round(rlCommands.client_commands_per_decision, 2), '<=', 0.3, ''),
      ],
      notes: [
        ...loadNotes(subject, baseline),
        'Redis and the load generator share core 1. Commands per decision come from INFO commandstats deltas over the measured run; ' +
          'commands that Redis runs inside a Lua script (TIME, GET, SET, PEXPIRE, ...) are counted apart from the commands clients send.',
      ],
      details: { cpu_capacity_ratio: cpuCapacityRatio(subject, baseline) },
    });
  } finally {
    await Promise.all([stopChild(rl.child), stopChild(rlf.child)]);
  }
}

// ---------------------------------------------------------------------------------------------------
// 3. gRPC CheckLimit vs bare grpc-js

async function grpcMemory(ctx: Context): Promise<ScenarioResult> {
  const [rl, bare] = await Promise.all([startServer('rl-grpc'), startServer('bare-grpc')]);
  const { grpc } = ctx.settings;
  const messages = generateWorkload(10).bodies.slice(0, ctx.settings.http.distinctBodies);
  const load = (port: number, durationSec: number) =>
    grpcLoad({ port, messages, channels: grpc.channels, concurrency: grpc.concurrency, durationSec, warmupSec: 0 });
  const measure = (child: ChildProcess, port: number) => withServerCpu(child, () => load(port, grpc.durationSec));
  try {
    if (grpc.warmupSec > 0) await Promise.all([load(rl.port, grpc.warmupSec), load(bare.port, grpc.warmupSec)]);
    ctx.log(`  rl gRPC CheckLimit and bare grpc-js unary, alternately (${grpc.rounds} rounds)`);
    const runs = await alternate(grpc.rounds, () => measure(rl.child, rl.port), () => measure(bare.child, bare.port));
    const rlRun = runs.a;
    const bareRun = runs.b;
    const subject = { ...httpSide('rl gRPC CheckLimit (memory, recorder on)', rlRun), rounds_throughput_per_s: runs.aRounds };
    const baseline = { ...httpSide('bare grpc-js unary, fixed message (same .proto)', bareRun), rounds_throughput_per_s: runs.bRounds };
    const ratio = rlRun.result.throughput_rps / bareRun.result.throughput_rps;
    return finish({
      id: 3,
      key: 'grpc_memory',
      name: 'gRPC CheckLimit, memory mode',
      subject,
      baseline,
      ratio,
      ratio_meaning: 'throughput(rl) / throughput(bare grpc-js), median rounds of alternating runs; higher is better',
      // Issue 15, target 7 (issue 6 asked 0.70).
      target: '>= 0.90 of bare grpc-js',
      checks: [check('throughput vs bare grpc-js', ratio, '>=', 0.9, 'x')],
      notes: [
        ...loadNotes(subject, baseline),
        `load: ${grpc.channels} HTTP/2 connections, ${grpc.concurrency} unary calls in flight (grpc-js clients in the load-generator process).`,
      ],
      details: { cpu_capacity_ratio: cpuCapacityRatio(subject, baseline) },
    });
  } finally {
    await Promise.all([stopChild(rl.child), stopChild(bare.child)]);
  }
}

// ---------------------------------------------------------------------------------------------------
// 4. Engine in-process vs RateLimiterMemory

interface EngineResult {
  ns_per_op: number;
  median_ns_per_op: number;
  ops_per_sec: number;
  p50_ms: number;
  p99_ms: number;
  rounds_ns_per_op: number[];
  heap_used_bytes: number;
  gc_pct: number;
  gc: { minor_ms: number; major_ms: number; minor_count: number; major_count: number };
}

async function runEngineChild(ctx: Context, args: string[], nodeFlags: string[] = []): Promise<EngineResult & Record<string, unknown>> {
  const e = ctx.settings.engine;
  const child = spawnChild(
    'engine.ts',
    [...args, '--round-ms', String(e.roundMs), '--rounds', String(e.rounds), '--warmup-ms', String(e.warmupMs), '--latency-calls', String(e.latencyCalls)],
    { nodeFlags },
  );
  try {
    return await nextMessage<EngineResult & Record<string, unknown>>(child, 'result', 300_000);
  } finally {
    await stopChild(child);
  }
}

function engineSide(name: string, r: EngineResult): Side {
  return {
    name,
    throughput_per_s: round(r.ops_per_sec),
    p50_ms: round(r.p50_ms),
    p99_ms: round(r.p99_ms),
    ns_per_decision: round(r.ns_per_op),
    median_ns_per_decision: round(r.median_ns_per_op),
    rounds_ns_per_decision: r.rounds_ns_per_op.map((v) => round(v)),
    gc_pct: round(r.gc_pct),
    gc_major_count: r.gc.major_count,
    gc_major_ms: round(r.gc.major_ms),
    heap_used_mib: round(r.heap_used_bytes / 2 ** 20),
  };
}

async function engineMemory(ctx: Context): Promise<ScenarioResult> {
  ctx.log('  DecisionService.check (recorder on)');
  const rl = await runEngineChild(ctx, ['--mode', 'engine', '--impl', 'rl']);
  ctx.log('  RateLimiterMemory.consume');
  const rlf = await runEngineChild(ctx, ['--mode', 'engine', '--impl', 'rlf']);
  let bare: EngineResult | undefined;
  if (ctx.settings.breakdowns) {
    ctx.log('  breakdown: DecisionService.check (no recorder)');
    bare = await runEngineChild(ctx, ['--mode', 'engine', '--impl', 'rl-no-recorder']);
  }
  const ratio = rl.ops_per_sec / rlf.ops_per_sec;
  return finish({
    id: 4,
    key: 'engine_memory',
    name: 'Engine in-process, memory mode',
    subject: engineSide('DecisionService.check + MemoryCounterStore (recorder on)', rl),
    baseline: engineSide('rate-limiter-flexible RateLimiterMemory.consume', rlf),
    ratio,
    ratio_meaning: 'decisions/s(rl) / consumes/s(RateLimiterMemory); higher is better',
    // Issue 15, target 6 (issue 6 asked 2x).
    target: '>= 1.0x RateLimiterMemory; < 1 µs per decision',
    checks: [
      check('decisions/s vs RateLimiterMemory', ratio, '>=', 1, 'x'),
      check('time per decision', rl.ns_per_op, '<=', 1000, 'ns'),
    ],
    notes: [
      'Same Zipf(s=1) sequence over 10,000 keys for both; each call awaited before the next; one process per implementation; ' +
        'ns/decision is the best of the timed rounds (the median is in results.json).',
      ...(bare ? [`Without the recorder (metrics + analytics) DecisionService.check takes ${round(bare.ns_per_op)} ns.`] : []),
    ],
    details: bare ? { without_recorder: engineSide('DecisionService.check, no recorder', bare) } : {},
  });
}

// ---------------------------------------------------------------------------------------------------
// 16. A calendar policy costs what a fixed window costs

async function calendarCost(ctx: Context): Promise<ScenarioResult> {
  ctx.log('  DecisionService.check, target policy a fixed window of 1m');
  const fixed = await runEngineChild(ctx, ['--mode', 'engine', '--impl', 'rl']);
  ctx.log('  DecisionService.check, target policy per calendar hour (Europe/Berlin)');
  const calendar = await runEngineChild(ctx, ['--mode', 'engine', '--impl', 'rl-calendar']);
  const ratio = calendar.ns_per_op / fixed.ns_per_op;

  // The Redis side: the same workload in this process on the private redis-server, both policy sets side by
  // side, rounds alternated. What a decision costs Redis (its CPU, from INFO cpu) and this process (its CPU)
  // is compared, not throughput: a shared machine slows both, CPU per decision much less.
  const { connectRedisCounterStore } = await import('../src/redis/redis-store.js');
  const { DecisionService } = await import('../src/decision/decision-service.js');
  const { LiveMatcher } = await import('../src/matching/live-matcher.js');
  const { parseRequestContext } = await import('../src/model/request-context.js');
  const { TARGET_LIMIT, zipfSequence } = await import('./lib/workload.js');
  const redis = await ctx.redis();
  const KEYS = 10_000;
  const CONCURRENCY = 16;
  const perRound = ctx.settings.mode === 'smoke' ? 2_000 : ctx.settings.mode === 'quick' ? 20_000 : 60_000;
  const sequence = zipfSequence(KEYS, 1 << 20);
  const workload = generateWorkload(10, KEYS);
  const calendarTarget = { type: 'fixed_window' as const, limit: TARGET_LIMIT, calendar: 'hour' as const, timezone: 'Europe/Berlin' };
  const redisCpuUs = () => {
    const info = redis.cli('INFO', 'cpu');
    const field = (name: string) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? NaN);
    return (field('used_cpu_user') + field('used_cpu_sys')) * 1e6;
  };
  const scriptCalls = () => [...commandStats(redis)].filter(([name]) => name === 'evalsha' || name === 'eval').reduce((sum, [, calls]) => sum + calls, 0);
  const sides = (['fixed', 'calendar'] as const).map((kind) => {
    const store = connectRedisCounterStore(redis.addr, { commandTimeoutMs: 5_000 });
    const policies = kind === 'calendar' ? workload.policies.map((p) => (p.policy_id === 'target-per-user' ? { ...p, algorithm: calendarTarget } : p)) : workload.policies;
    const decisions = new DecisionService({ policies: new LiveMatcher(policies), counters: store, keyPrefix: `rl16${kind[0]}:` });
    const contexts = workload.bodies.map((b) => parseRequestContext(b));
    return { kind, store, decisions, contexts, next: 0, rounds: [] as { ns: number; clientUs: number; redisUs: number; scripts: number }[] };
  });
  type RedisSide = (typeof sides)[number];
  const runRound = async (side: RedisSide, decisions: number) => {
    let left = decisions;
    const worker = async () => {
      while (left-- > 0) {
        const answer = await side.decisions.check(side.contexts[sequence[side.next++ & (sequence.length - 1)]]);
        if (!answer.allowed) throw new Error(`scenario 16 (${side.kind}, Redis): a decision was refused (${answer.reason})`);
      }
    };
    const [cpu0, redis0, scripts0, t0] = [process.cpuUsage(), redisCpuUs(), scriptCalls(), process.hrtime.bigint()];
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const ns = Number(process.hrtime.bigint() - t0) / decisions;
    const cpu = process.cpuUsage(cpu0);
    return { ns, clientUs: (cpu.user + cpu.system) / decisions, redisUs: (redisCpuUs() - redis0) / decisions, scripts: (scriptCalls() - scripts0) / decisions };
  };
  try {
    ctx.log(`  the same on Redis, in this process, ${CONCURRENCY} decisions in flight, ${ctx.settings.engine.rounds} alternated rounds of ${perRound} per side`);
    for (const side of sides) await runRound(side, perRound / 4);
    for (let r = 0; r < ctx.settings.engine.rounds; r++) for (const side of r % 2 === 0 ? sides : [...sides].reverse()) side.rounds.push(await runRound(side, perRound));
  } finally {
    await Promise.all(sides.map((side) => side.store.close()));
  }
  const best = (side: RedisSide) => ({
    ns_per_decision: round(Math.min(...side.rounds.map((x) => x.ns))),
    client_cpu_us_per_decision: round(Math.min(...side.rounds.map((x) => x.clientUs))),
    redis_cpu_us_per_decision: round(Math.min(...side.rounds.map((x) => x.redisUs))),
    redis_cpu_us_per_decision_rounds: side.rounds.map((x) => round(x.redisUs)),
    scripts_per_decision: round(side.rounds[0].scripts, 4),
  });
  const [redisFixed, redisCalendar] = sides.map(best);
  const redisRatio = redisCalendar.redis_cpu_us_per_decision / redisFixed.redis_cpu_us_per_decision;
  const clientRatio = redisCalendar.client_cpu_us_per_decision / redisFixed.client_cpu_us_per_decision;
  return finish({
    id: 16,
    key: 'calendar_cost',
    name: 'Calendar period vs fixed window, engine in-process, memory mode and Redis',
    subject: engineSide('fixed_window with calendar: hour, Europe/Berlin', calendar),
    baseline: engineSide('fixed_window with window: 1m', fixed),
    ratio,
    ratio_meaning: 'ns/decision(calendar) / ns/decision(fixed window), memory mode; lower is better, 1.0 = the same',
    target: 'the same cost per decision (within 10%); on Redis, the same Redis CPU per decision (within 15%)',
    checks: [
      check('ns/decision vs the fixed window (memory)', ratio, '<=', 1.1, 'x'),
      check('Redis CPU per decision vs the fixed window', redisRatio, '<=', 1.15, 'x'),
    ],
    notes: [
      'Scenario 4\'s workload (Zipf(s=1) over 10,000 keys, 10 policies); only the target policy differs. One process per side; best of the timed rounds.',
      `Redis: the same workload in the bench process against the private redis-server, ${CONCURRENCY} decisions in flight; ` +
        `Redis CPU per decision calendar/fixed ${round(redisRatio)}, this process's CPU ${round(clientRatio)} (best of the rounds).`,
    ],
    details: { redis: { fixed: redisFixed, calendar: redisCalendar, redis_cpu_ratio: round(redisRatio), client_cpu_ratio: round(clientRatio) } },
  });
}

// ---------------------------------------------------------------------------------------------------
// 5. Policy scaling

async function policyScaling(ctx: Context): Promise<ScenarioResult> {
  const results: (EngineResult & { policies: number; match_ns: number; build_ms: number; generate_ms: number; live_heap_bytes: number | null; cpu_ns_per_op: number })[] = [];
  for (const count of ctx.settings.scaling.policyCounts) {
    ctx.log(`  check with ${count} policies`);
    results.push((await runEngineChild(ctx, ['--mode', 'scaling', '--policies', String(count)], ['--expose-gc'])) as never);
  }
  const side = (r: (typeof results)[number]): Side => ({
    ...engineSide(`DecisionService.check with ${r.policies} policies`, r),
    match_ns: round(r.match_ns),
    cpu_ns_per_check: round(r.cpu_ns_per_op),
    matcher_build_ms: round(r.build_ms),
    live_heap_mib_after_build: r.live_heap_bytes === null ? null : round(r.live_heap_bytes / 2 ** 20),
  });
  const smallest = results[0];
  const largest = results[results.length - 1];
  const ratio = largest.ns_per_op / smallest.ns_per_op;
  return finish({
    id: 5,
    key: 'policy_scaling',
    name: `Policy scaling (${ctx.settings.scaling.policyCounts.join(' / ')})`,
    subject: side(largest),
    baseline: side(smallest),
    ratio,
    ratio_meaning: `mean check latency with ${largest.policies} policies / with ${smallest.policies}; lower is better`,
    target: `latency at ${largest.policies} policies <= 1.2x latency at ${smallest.policies}`,
    checks: [check(`latency(${largest.policies}) / latency(${smallest.policies})`, ratio, '<=', 1.2, 'x')],
    notes: [
      'In-process (no transport, so matching is not hidden under HTTP cost): the request matches one per-tenant policy; ' +
        '~80% of the policies are exact-scoped per tenant/endpoint with a `*` user, the rest per API key, per service, tag-scoped, shadow and match_expr, plus 3 global wildcard defaults.',
    ],
    // CPU time per check is far less sensitive to other processes on the core than wall-clock latency.
    details: { by_count: results.map(side), cpu_ratio: round(largest.cpu_ns_per_op / smallest.cpu_ns_per_op) },
  });
}

// ---------------------------------------------------------------------------------------------------
// 18. Layers at scale

async function layersAtScale(ctx: Context): Promise<ScenarioResult> {
  const counts = ctx.settings.scaling.policyCounts;
  const [few, many] = [counts[0], counts[counts.length - 1]];
  const run = async (policies: number) => {
    ctx.log(`  check with ${policies} policies in 4 layers`);
    const result: EngineResult & { cpu_ns_per_op: number } = (await runEngineChild(ctx, ['--mode', 'scaling', '--policies', String(policies), '--layers', '4'])) as never;
    return result;
  };
  // Each in a child of its own, so the JIT state and heap of one never colour the other.
  const small = await run(few);
  const large = await run(many);
  const side = (r: typeof small, policies: number): Side => ({ ...engineSide(`DecisionService.check, ${policies} policies in 4 layers`, r), cpu_ns_per_check: round(r.cpu_ns_per_op) });
  const ratio = large.p99_ms / small.p99_ms;
  const cpuRatio = large.cpu_ns_per_op / small.cpu_ns_per_op;
  return finish({
    id: 18,
    key: 'layers_at_scale',
    name: `Layers at scale: ${many} policies in 4 layers vs ${few}`,
    subject: side(large, many),
    baseline: side(small, few),
    ratio,
    ratio_meaning: `check p99 with ${many} policies in 4 layers / with ${few}; lower is better`,
    target: `decision p99 at ${many} policies in 4 layers <= 1.3x at ${few}`,
    checks: [check(`p99(${many}) / p99(${few}), 4 layers`, ratio, '<=', 1.3, 'x')],
    notes: [
      "In-process, memory store: scenario 5's policies dealt round robin into layers default, org, team and platform, plus in each other layer one policy of the target's scope, so every check is decided by four layers.",
      `Server CPU per check: ${round(small.cpu_ns_per_op)} ns (${few}) and ${round(large.cpu_ns_per_op)} ns (${many}), ${round(cpuRatio)}x.`,
    ],
    details: { cpu_ratio: round(cpuRatio) },
  });
}

// ---------------------------------------------------------------------------------------------------
// 6. Memory per key

interface MemoryResult {
  keys: number;
  live_keys?: number;
  rss_start: number;
  rss_full: number;
  rss_after_expiry?: number;
  heap_start: number;
  heap_full: number;
  heap_after_expiry?: number;
  rss_bytes_per_key: number;
  heap_bytes_per_key: number;
  insert_ns_per_key: number;
  sweep_ms?: number;
  sweep_loop_delay_p99_ms?: number;
  sweep_loop_delay_max_ms?: number;
  rss_after_sweep?: number;
  memory_reducer_ran?: boolean;
  memory_reducer_gcs?: number;
  idle_ms_until_memory_reducer?: number | null;
  idle_ms?: number;
  /** Where the memory is at each phase (bench/child/memory.ts, memorySnapshot): bytes. */
  memory_start?: Record<string, number>;
  memory_full?: Record<string, number>;
  memory_after_sweep?: Record<string, number>;
  memory_after_expiry?: Record<string, number>;
}

async function memoryPerKey(ctx: Context): Promise<ScenarioResult> {
  const keys = ctx.settings.memory.keys;
  const run = async (impl: string) => {
    const args = ['--impl', impl, '--keys', String(keys), '--idle-timeout-ms', String(ctx.settings.memory.idleTimeoutMs)];
    const child = spawnChild('memory.ts', args, { nodeFlags: ['--expose-gc'] });
    try {
      return await nextMessage<MemoryResult>(child, 'result', 600_000);
    } finally {
      await stopChild(child);
    }
  };
  ctx.log(`  MemoryCounterStore with ${keys} keys`);
  const rl = await run('rl');
  ctx.log(`  RateLimiterMemory with ${keys} keys`);
  const rlf = await run('rlf');
  const mib = (b: number | undefined) => (b === undefined ? null : round(b / 2 ** 20));
  const recovered = (rl.rss_after_expiry ?? NaN) / rl.rss_start;
  const side = (name: string, r: MemoryResult): Side => ({
    name,
    throughput_per_s: round(1e9 / r.insert_ns_per_key),
    p50_ms: null,
    p99_ms: null,
    keys: r.keys,
    rss_bytes_per_key: round(r.rss_bytes_per_key),
    heap_bytes_per_key: round(r.heap_bytes_per_key),
    rss_start_mib: mib(r.rss_start),
    rss_full_mib: mib(r.rss_full),
    rss_after_expiry_mib: mib(r.rss_after_expiry),
    heap_start_mib: mib(r.heap_start),
    heap_full_mib: mib(r.heap_full),
    heap_after_expiry_mib: mib(r.heap_after_expiry),
    ...(r.sweep_ms !== undefined
      ? { sweep_ms: round(r.sweep_ms), sweep_loop_delay_p99_ms: round(r.sweep_loop_delay_p99_ms!), sweep_loop_delay_max_ms: round(r.sweep_loop_delay_max_ms!) }
      : {}),
    ...(r.memory_reducer_ran !== undefined
      ? {
          rss_after_sweep_mib: mib(r.rss_after_sweep),
          memory_reducer_ran: r.memory_reducer_ran,
          memory_reducer_gcs: r.memory_reducer_gcs,
          idle_s_until_memory_reducer: r.idle_ms_until_memory_reducer == null ? null : round(r.idle_ms_until_memory_reducer / 1000),
        }
      : {}),
  });
  // After expiry counts only once V8's memory reducer has run (an idle process); quick runs do not wait for it.
  const expiryMeasured = rl.memory_reducer_ran === true;
  return finish({
    id: 6,
    key: 'memory_per_key',
    name: `Memory, ${keys.toLocaleString('en-US')} keys`,
    subject: side('MemoryCounterStore via DecisionService.check', rl),
    baseline: side('rate-limiter-flexible RateLimiterMemory', rlf),
    ratio: rl.rss_bytes_per_key / rlf.rss_bytes_per_key,
    ratio_meaning: 'RSS bytes per key (rl) / (RateLimiterMemory); lower is better',
    target: '<= 300 B of RSS per live key; RSS back within 20% of the start once keys expire',
    checks: [
      check('RSS per live key', rl.rss_bytes_per_key, '<=', 300, 'B'),
      ...(expiryMeasured ? [check('RSS after expiry / RSS at start', recovered, '<=', 1.2, 'x')] : []),
    ],
    notes: [
      'Child process with --expose-gc; start and full figures after 3 forced GCs. Throughput column: keys created per second (one check each).',
      'The store uses the production sweeper (every 100 ms for at most 4 ms); the clock is injected so every window ends on cue.',
      expiryMeasured
        ? 'After expiry: no forced GC; the child idles (timers only, as an idle server) until V8\'s memory reducer has run, as a production process that goes idle would show.'
        : 'After expiry: not measured in this mode (V8\'s memory reducer needs 30-90 s of idle; the full run waits for it).',
      'RateLimiterMemory keeps one timer per key; its after-expiry figure is not measured (its windows are 1 h here).',
    ],
    details: {
      rl_memory: { start: rl.memory_start, full: rl.memory_full, after_sweep: rl.memory_after_sweep, after_expiry: rl.memory_after_expiry },
      rlf_memory: { start: rlf.memory_start, full: rlf.memory_full },
    },
  });
}

// ---------------------------------------------------------------------------------------------------
// 7. Redis unreachable

async function redisDown(ctx: Context): Promise<ScenarioResult> {
  // Its own Redis, so killing it leaves the shared one alone.
  const redis = await startPrivateRedis();
  const server = await startServer('rl-http', ['--redis', redis.addr]);
  try {
    // At a quarter of the maximum throughput: the server then has headroom (open-loop arrivals cost
    // more CPU per request than a saturated closed loop, see scenario 1), so p99 shows what a dead Redis
    // adds to a decision rather than the queue in front of a busy server.
    ctx.log('  rl-http (Redis up) at full load, to find a quarter of it');
    const max = await measureHttp(ctx, server.child, server.port);
    const rate = Math.max(1, Math.round(max.result.throughput_rps / 4));
    ctx.log(`  rl-http (Redis up) at ${rate} req/s`);
    const up = await measureHttp(ctx, server.child, server.port, { pacedRate: rate, warm: true });
    const { http } = ctx.settings;
    const base = { port: server.port, path: '/rl/v1/check', bodies: httpBodies(ctx.settings), connections: PACED_CONNECTIONS, rate };
    // Redis dies a tenth into the measured run: the run covers the failure itself and the outage after it.
    ctx.log(`  rl-http at ${rate} req/s while Redis is killed and stays down`);
    const killAfterMs = Math.round(http.pacedDurationSec * 100);
    const down = await withServerCpu(server.child, async () => {
      const load = pacedHttpLoad({ ...base, durationSec: http.pacedDurationSec, timeline: true });
      await sleep(killAfterMs);
      await redis.kill();
      return load;
    });
    const probe = (await (
      await fetch(`http://127.0.0.1:${server.port}/rl/v1/check`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: httpBodies(ctx.settings)[0],
      })
    ).json()) as { allowed: boolean; reason: string };
    const subject = httpSide(`rl HTTP check at ${rate} req/s, Redis killed (fail_open)`, down);
    const baseline = httpSide(`rl HTTP check at ${rate} req/s, Redis up (same server)`, up);
    return finish({
      id: 7,
      key: 'redis_down',
      name: 'Failure: Redis unreachable',
      subject: { ...subject, decision_after: probe, timeline_max_ms_per_250ms: down.result.timeline_max_ms },
      baseline,
      ratio: down.result.p99_ms / up.result.p99_ms,
      ratio_meaning: 'p99(Redis down) / p99(Redis up); lower is better',
      target: 'p99 <= 5 ms with Redis down',
      checks: [
        check('p99 with Redis down', down.result.p99_ms, '<=', 5, 'ms'),
        check('decisions answered (no errors)', down.result.errors + down.result.non2xx, '<=', 0, ''),
      ],
      notes: [
        `Offered load: ${rate} req/s evenly paced (open loop), a quarter of the ${Math.round(max.result.throughput_rps)} req/s the server reached with Redis up. ` +
          `Redis is SIGKILLed ${killAfterMs} ms into the measured run (the run includes the moment of failure); ` +
          `a request after the run answered allowed=${probe.allowed}, reason=${probe.reason}.`,
      ],
      details: { redis_up_max: httpSide('rl HTTP check, Redis up, full load', max) },
    });
  } finally {
    await stopChild(server.child);
    await redis.kill();
  }
}

/** Full-load HTTP runs of the check route, and measured ones with the Redis commands they caused (decisions: the service's own count). */
function redisRuns(ctx: Context, redis: PrivateRedis) {
  const { http } = ctx.settings;
  const load = (port: number, bodies: string[], durationSec: number) =>
    httpLoad({ port, path: '/rl/v1/check', bodies, connections: http.connections, durationSec, warmupSec: 0 });
  const measuredWithCommands = async (server: { child: ChildProcess; port: number }, bodies: string[]) => {
    const before = commandStats(redis);
    const run = await withServerCpu(server.child, () => load(server.port, bodies, http.durationSec));
    const decisions = run.service?.rl_decisions_total ?? run.result.requests;
    return { ...run, commands: commandDelta(before, commandStats(redis), decisions) };
  };
  return { load, measuredWithCommands };
}

// ---------------------------------------------------------------------------------------------------
// 9. Hot key under attack, Redis mode (issue 15, target 3: the deny cache)

/**
 * One identity far over its limit (HOT_KEY_POLICY: 100 per minute) at full load, mixed half and half
 * with the normal bodies of the other HTTP scenarios. Three measurements: the attacker alone in Redis
 * mode (Redis script calls per decision: the deny cache answers it in-process); the mixed load in Redis
 * mode against the same mixed load in memory mode, alternately (capacity); and the mixed load in Redis
 * mode with the deny cache off (what the cache buys).
 */
async function hotKeyAttack(ctx: Context): Promise<ScenarioResult> {
  const redis = await ctx.redis();
  const hot = ['--hot-key', 'yes'];
  const [onRedis, inMemory, uncached] = await Promise.all([
    startServer('rl-http', ['--redis', redis.addr, ...hot]),
    startServer('rl-http', hot),
    startServer('rl-http', ['--redis', redis.addr, ...hot, '--deny-cache', 'no']),
  ]);
  const { http } = ctx.settings;
  const hotBody = JSON.stringify(HOT_KEY_BODY);
  const mixed = httpBodies(ctx.settings).flatMap((body) => [body, hotBody]);
  const { load, measuredWithCommands } = redisRuns(ctx, redis);
  const measured = async (server: { child: ChildProcess; port: number }, bodies: string[]) => {
    const run = await measuredWithCommands(server, bodies);
    return { ...run, deny_cache_hits: run.service?.rl_deny_cache_hits_total ?? 0 };
  };
  try {
    // Warm-up, which also spends the attacker's 100 for this minute on every server (at least one second:
    // autocannon's tick), so every measured run meets it refused.
    ctx.log('  warm-up: mixed load on the three servers (the attacker spends its 100 per minute)');
    await Promise.all([onRedis, inMemory, uncached].map((server) => load(server.port, mixed, Math.max(1, http.warmupSec))));

    ctx.log('  the attacker alone, Redis mode, deny cache on');
    const alone = await measured(onRedis, [hotBody]);
    ctx.log(`  mixed load (half attacker), Redis mode and memory mode, alternately (${http.rounds} rounds)`);
    const runs = await alternate(http.rounds, () => measured(onRedis, mixed), () => measured(inMemory, mixed));
    ctx.log('  mixed load, Redis mode, deny cache off');
    const off = await measured(uncached, mixed);

    const withRedis = (name: string, run: Awaited<ReturnType<typeof measured>>) => ({
      ...httpSide(name, run),
      redis: run.commands,
      deny_cache_hits: run.deny_cache_hits,
      deny_cache_hits_per_decision: round(run.deny_cache_hits / Math.max(1, run.commands.decisions), 4),
    });
    const subject = { ...withRedis('rl HTTP check, Redis mode, mixed (half attacker), deny cache on', runs.a), rounds_throughput_per_s: runs.aRounds };
    const baseline = { ...httpSide('rl HTTP check, memory mode, mixed (half attacker)', runs.b), rounds_throughput_per_s: runs.bRounds };
    const attacker = withRedis('rl HTTP check, Redis mode, the attacker alone, deny cache on', alone);
    const cacheOff = withRedis('rl HTTP check, Redis mode, mixed (half attacker), deny cache off', off);
    const ratio = runs.a.result.throughput_rps / runs.b.result.throughput_rps;
    const hotScripts = alone.commands.scripts_per_decision;
    // Capacity as in scenario 1: server CPU per request (the throughput of a shared machine wanders).
    const capacityRatio = cpuCapacityRatio(subject, baseline);
    return finish({
      id: 9,
      key: 'hot_key_attack',
      name: 'Hot key under attack, Redis mode (deny cache)',
      subject,
      baseline,
      ratio,
      ratio_meaning: 'throughput(Redis mode, mixed) / throughput(memory mode, mixed), median rounds of alternating runs; higher is better',
      target: "the attacker's Redis script calls per decision ~ 0 (<= 0.01); mixed capacity (server CPU per request) >= 0.9 of memory mode",
      checks: [
        check("attacker alone: Redis script calls per decision", hotScripts, '<=', 0.01, ''),
        check('mixed: capacity vs memory mode (memory µs / Redis µs of server CPU per request)', capacityRatio ?? NaN, '>=', 0.9, 'x'),
      ],
      notes: [
        ...loadNotes(subject, baseline, attacker, cacheOff),
        'The attacker (tenant-attack/attacker) is over its fixed window of 100 per minute for every measured run; the deny cache ' +
          'asks Redis again at most once per second per refused counter (maxAgeMs), so a few script calls remain.',
        'Redis and the load generator share core 1; the servers run on core 0 one at a time.',
      ],
      details: {
        attacker_alone: attacker,
        mixed_deny_cache_off: {
          ...cacheOff,
          throughput_ratio_to_cache_on: round(off.result.throughput_rps / runs.a.result.throughput_rps),
          cpu_capacity_ratio_to_memory: cpuCapacityRatio(cacheOff, baseline),
        },
        cpu_capacity_ratio: capacityRatio,
      },
    });
  } finally {
    await Promise.all([stopChild(onRedis.child), stopChild(inMemory.child), stopChild(uncached.child)]);
  }
}

// ---------------------------------------------------------------------------------------------------
// 12. Hot key with a process lease, Redis mode (issue 21)

/**
 * One counter at full load whose policy has a `lease` (LEASE_POLICIES): the Redis-mode server answers it
 * from units it took in advance, against the same load in memory mode, alternately (capacity: server CPU
 * per request), with the Redis script calls per decision. Then never-over: full load on a leased quota
 * of LEASE_CAPPED_LIMIT that the run spends; the server's own count of admitted decisions must not pass it.
 */
async function leaseHotKey(ctx: Context): Promise<ScenarioResult> {
  const redis = await ctx.redis();
  const [onRedis, inMemory] = await Promise.all([
    startServer('rl-http', ['--redis', redis.addr, '--lease', 'yes']),
    startServer('rl-http', ['--lease', 'yes']),
  ]);
  const { http } = ctx.settings;
  const hot = [JSON.stringify(LEASE_HOT_BODY)];
  const { load, measuredWithCommands: measured } = redisRuns(ctx, redis);
  try {
    ctx.log('  warm-up: the leased hot key on both servers');
    await Promise.all([onRedis, inMemory].map((server) => load(server.port, hot, Math.max(1, http.warmupSec))));
    ctx.log(`  the leased hot key, Redis mode and memory mode, alternately (${http.rounds} rounds)`);
    const runs = await alternate(http.rounds, () => measured(onRedis, hot), () => measured(inMemory, hot));
    ctx.log(`  never over: full load on a leased quota of ${LEASE_CAPPED_LIMIT}, Redis mode`);
    const capped = await measured(onRedis, [JSON.stringify(LEASE_CAPPED_BODY)]);
    const cappedAllowed = capped.service?.lease_capped_allowed ?? NaN;

    const subject = {
      ...httpSide('rl HTTP check, Redis mode, hot key with a process lease', runs.a),
      redis: runs.a.commands,
      lease_refills: runs.a.service?.rl_lease_refills_total ?? null,
      rounds_throughput_per_s: runs.aRounds,
    };
    const baseline = { ...httpSide('rl HTTP check, memory mode, the same hot key', runs.b), rounds_throughput_per_s: runs.bRounds };
    const capacityRatio = cpuCapacityRatio(subject, baseline);
    const scripts = runs.a.commands.scripts_per_decision;
    return finish({
      id: 12,
      key: 'lease_hot_key',
      name: 'Hot key with a process lease, Redis mode',
      subject,
      baseline,
      ratio: runs.a.result.throughput_rps / runs.b.result.throughput_rps,
      ratio_meaning: 'throughput(Redis mode, leased hot key) / throughput(memory mode), median rounds of alternating runs; higher is better',
      target: 'capacity (server CPU per request) >= 0.9 of memory mode; <= 0.01 Redis script calls per decision; never over',
      checks: [
        check('capacity vs memory mode (memory µs / Redis µs of server CPU per request)', capacityRatio ?? NaN, '>=', 0.9, 'x'),
        check('Redis script calls per decision', scripts, '<=', 0.01, ''),
        check(`never over: admitted on a leased quota of ${LEASE_CAPPED_LIMIT}`, cappedAllowed, '<=', LEASE_CAPPED_LIMIT, ''),
      ],
      notes: [
        ...loadNotes(subject, baseline),
        'The hot counter (fixed window of 10^9 per minute, lease max_units 10000) is never exhausted: every decision is admitted from the lease.',
        'Redis and the load generator share core 1; the servers run on core 0 one at a time.',
      ],
      details: {
        cpu_capacity_ratio: capacityRatio,
        never_over: {
          limit: LEASE_CAPPED_LIMIT,
          admitted: cappedAllowed,
          decisions: capped.service?.rl_decisions_total ?? capped.result.requests,
          // A take that timed out may still have run in Redis: its units are lost (under-admission).
          counter_store_errors: capped.service?.rl_counter_store_errors_total ?? null,
          failure_mode_decisions: capped.service?.rl_failure_mode_decisions_total ?? null,
          redis: capped.commands,
        },
      },
    });
  } finally {
    await Promise.all([stopChild(onRedis.child), stopChild(inMemory.child)]);
  }
}

// ---------------------------------------------------------------------------------------------------
// 13. Two regions, one global budget, the global store behind a 25 ms (each way) delay proxy

/** Offered load per region in the latency runs (open loop: p99 at a given rate, not at saturation). */
const REGION_RATE = { full: 1000, quick: 500, smoke: 100 } as const;

async function twoRegions(ctx: Context): Promise<ScenarioResult> {
  const [global, storeA, storeB] = await Promise.all([startPrivateRedis(), startPrivateRedis(), startPrivateRedis()]);
  // The WAN link in a process of its own, on the load generator's core (where Redis runs too).
  const proxyChild = spawnChild('link-proxy.ts', ['--port', String(global.port), '--delay-ms', '25'], { core: LOAD_CORE });
  const proxy = await nextMessage<{ port: number }>(proxyChild, 'ready', 30_000);
  const inRegion = (store: PrivateRedis, region: string) =>
    startServer('rl-http', ['--redis', store.addr, '--regions', 'yes', '--region', region, '--global', `127.0.0.1:${proxy.port}`]);
  // The baseline: the same servers on the same regional stores, without regions (budget global = that store).
  const [a, b, aAlone, bAlone] = await Promise.all([
    inRegion(storeA, 'region-a'),
    inRegion(storeB, 'region-b'),
    startServer('rl-http', ['--redis', storeA.addr, '--regions', 'yes']),
    startServer('rl-http', ['--redis', storeB.addr, '--regions', 'yes']),
  ]);
  const { http } = ctx.settings;
  const rate = REGION_RATE[ctx.settings.mode];
  const hot = [JSON.stringify(REGION_HOT_BODY)];
  const pacedLoad = (server: { port: number }, durationSec: number) =>
    pacedHttpLoad({ port: server.port, path: '/rl/v1/check', bodies: hot, connections: PACED_CONNECTIONS, rate, durationSec });
  // Each measured run follows a second at the same rate: the region's pool holds the units of its steady
  // rate (after max_hold idle they went back, and a cold pool waits once for the global store).
  // `decisions`: of both seconds, as the store calls counted around them (per decision).
  const paced = async (server: { child: ChildProcess; port: number }) => {
    const before = await withServerCpu(server.child, () => pacedLoad(server, 1));
    const measured = await withServerCpu(server.child, () => pacedLoad(server, http.pacedDurationSec));
    return { ...measured, decisions: (before.service?.rl_decisions_total ?? 0) + (measured.service?.rl_decisions_total ?? 0) };
  };
  /** Both regions at once (as in production), the paced load on each. */
  const both = async (x: { child: ChildProcess; port: number }, y: { child: ChildProcess; port: number }) => {
    const [rx, ry] = await Promise.all([paced(x), paced(y)]);
    return { x: rx, y: ry };
  };
  try {
    ctx.log('  warm-up: the global budget in both regions, with and without regions');
    await Promise.all([a, b, aAlone, bAlone].map((s) => httpLoad({ port: s.port, path: '/rl/v1/check', bodies: hot, connections: 4, durationSec: Math.max(1, http.warmupSec), warmupSec: 0 })));
    ctx.log(`  p99 at ${rate} decisions/s per region: two regions (global store 25 ms away) and the same servers without regions, alternately (${http.rounds} rounds)`);
    const globalBefore = commandStats(global);
    const withRegions: Awaited<ReturnType<typeof both>>[] = [];
    const withoutRegions: Awaited<ReturnType<typeof both>>[] = [];
    // Region a's own store, counted over the runs with regions only (the baseline shares that store).
    const regionStoreCalls = new Map<string, number>();
    for (let r = 0; r < http.rounds; r++) {
      const regionBefore = commandStats(storeA);
      withRegions.push(await both(a, b));
      for (const [name, calls] of commandStats(storeA)) regionStoreCalls.set(name, (regionStoreCalls.get(name) ?? 0) + calls - (regionBefore.get(name) ?? 0));
      withoutRegions.push(await both(aAlone, bAlone));
    }
    const globalAfter = commandStats(global);
    const decisions = withRegions.reduce((n, run) => n + run.x.decisions + run.y.decisions, 0);
    const globalCalls = commandDelta(globalBefore, globalAfter, decisions);
    const decisionsInA = withRegions.reduce((n, run) => n + run.x.decisions, 0);
    const regionCalls = commandDelta(new Map(), regionStoreCalls, decisionsInA);
    const median = (runs: Awaited<ReturnType<typeof both>>[], side: 'x' | 'y') =>
      [...runs].sort((p, q) => (p[side].result.p99_ms ?? 0) - (q[side].result.p99_ms ?? 0))[Math.floor((runs.length - 1) / 2)][side];
    const sides = {
      a: httpSide('region-a server, global budget (region units, global store 25 ms away)', median(withRegions, 'x')),
      b: httpSide('region-b server, global budget', median(withRegions, 'y')),
      aAlone: httpSide('the region-a server without regions (same policy on its own store)', median(withoutRegions, 'x')),
      bAlone: httpSide('the region-b server without regions', median(withoutRegions, 'y')),
    };
    const waits = withRegions.reduce((n, run) => n + (run.x.service?.lease_waits ?? 0) + (run.y.service?.lease_waits ?? 0), 0);

    ctx.log(`  utilisation: both regions at full load on a global budget of ${REGION_CAPPED_LIMIT} (closed loop) until 1.5 times it was asked for`);
    const capped = [JSON.stringify(REGION_CAPPED_BODY)];
    const spend = (server: { child: ChildProcess; port: number }) =>
      withServerCpu(server.child, () => httpLoad({ port: server.port, path: '/rl/v1/check', bodies: capped, connections: http.connections, durationSec: 1, warmupSec: 0 }));
    // Admitted by the budget: allowed answers but those of failure_mode (outside the guarantee, docs/distribution.md).
    let admitted = 0;
    let failureMode = 0;
    let cappedDecisions = 0;
    for (let run = 0; run < 30 && cappedDecisions < 1.5 * REGION_CAPPED_LIMIT; run++) {
      for (const spent of await Promise.all([spend(a), spend(b)])) {
        const byFailureMode = spent.service?.rl_failure_mode_decisions_total ?? 0;
        admitted += (spent.service?.region_capped_allowed ?? NaN) - byFailureMode;
        failureMode += byFailureMode;
        cappedDecisions += spent.service?.rl_decisions_total ?? 0;
      }
    }
    const p99Delta = (subject: Side, baseline: Side) => (subject.p99_ms ?? NaN) - (baseline.p99_ms ?? NaN);
    return finish({
      id: 13,
      key: 'regions',
      name: 'Two regions, one global budget (global store behind a 25 ms delay proxy)',
      subject: { ...sides.a, region_b: sides.b },
      baseline: { ...sides.aAlone, region_b: sides.bAlone },
      ratio: (sides.a.p99_ms ?? NaN) / (sides.aAlone.p99_ms ?? NaN),
      ratio_meaning: 'p99(region-a with regions) / p99(the same server without regions), paced load; lower is better',
      target: 'p99 in each region within 2 ms of the same server without regions; <= 0.05 global-store calls per decision; utilisation reported; never over',
      checks: [
        check('region-a p99 minus its p99 without regions', p99Delta(sides.a, sides.aAlone), '<=', 2, 'ms'),
        check('region-b p99 minus its p99 without regions', p99Delta(sides.b, sides.bAlone), '<=', 2, 'ms'),
        check('global-store script calls per decision', globalCalls.scripts_per_decision, '<=', 0.05, ''),
        check(`never over: admitted on a global budget of ${REGION_CAPPED_LIMIT} in both regions`, admitted, '<=', REGION_CAPPED_LIMIT, ''),
      ],
      notes: [
        ...loadNotes(sides.a, sides.b, sides.aAlone, sides.bAlone),
        'Four servers, three redis-servers, the link proxy and the load generators share this machine; the two regions run at once.',
        `Utilisation: ${admitted} of ${REGION_CAPPED_LIMIT} admitted (${round((admitted / REGION_CAPPED_LIMIT) * 100)}%) by ${cappedDecisions} decisions at full load in both regions ` +
          `(${failureMode} more answered by failure_mode, outside the guarantee); the rest was held by a region when the run ended, or is still on its way back.`,
      ],
      details: {
        global_store: globalCalls,
        region_a_store: regionCalls,
        decisions_that_waited_for_the_global_store: waits,
        latency_decisions: decisions,
        utilisation: { limit: REGION_CAPPED_LIMIT, admitted, ratio: round(admitted / REGION_CAPPED_LIMIT), decisions: cappedDecisions, failure_mode: failureMode },
      },
    });
  } finally {
    await Promise.all([a, b, aAlone, bAlone].map((s) => stopChild(s.child)));
    await stopChild(proxyChild);
    await Promise.all([global.kill(), storeA.kill(), storeB.kill()]);
  }
}


// ---------------------------------------------------------------------------------------------------
// 17. Stacked layers: one HTTP check decided by three layers against the same check decided by one

async function stackedLayers(ctx: Context): Promise<ScenarioResult> {
  const redis = await ctx.redis();
  const modes = [
    { mode: 'memory', args: [] as string[] },
    { mode: 'Redis', args: ['--redis', redis.addr] },
  ];
  type Measured = { one: Side; three: Side; cpuRatio: number };
  const sides: Record<string, Measured & { closed?: Measured }> = {};
  for (const { mode, args } of modes) {
    const [one, three] = await Promise.all([startServer('rl-http', args), startServer('rl-http', [...args, '--layers', 'yes'])]);
    try {
      await expectLayers(three.port, 3);
      await expectLayers(one.port, 1);
      ctx.log(`  rl-http (${mode}), one layer and three layers, alternately (${ctx.settings.http.rounds} rounds)`);
      await warmHttp(ctx, [one.port, three.port]);
      const measured = async (child: ChildProcess, port: number, pacedRate?: number) => {
        let before = new Map<string, number>();
        const run = await measureHttp(ctx, child, port, { warm: true, pacedRate, beforeMeasured: () => (before = commandStats(redis)) });
        return { ...run, commands: commandDelta(before, commandStats(redis), run.service?.rl_decisions_total ?? run.result.requests) };
      };
      const sidesOf = (runs: Awaited<ReturnType<typeof alternate<Awaited<ReturnType<typeof measured>>>>>, how: string) => {
        const threeSide = { ...httpSide(`three layers (default, org, platform), ${mode}${how}`, runs.a), rounds_throughput_per_s: runs.aRounds, ...(mode === 'Redis' ? { redis: runs.a.commands } : {}) };
        const oneSide = { ...httpSide(`one layer (the same per-user policy alone), ${mode}${how}`, runs.b), rounds_throughput_per_s: runs.bRounds, ...(mode === 'Redis' ? { redis: runs.b.commands } : {}) };
        const capacity = cpuCapacityRatio(threeSide, oneSide);
        return { one: oneSide, three: threeSide, cpuRatio: capacity === null ? NaN : round(1 / capacity) };
      };
      const closed = sidesOf(await alternate(ctx.settings.http.rounds, () => measured(three.child, three.port), () => measured(one.child, one.port)), '');
      if (mode === 'memory') {
        sides[mode] = closed;
        continue;
      }
      // On Redis the closed loop is bound by Redis's time per call, three times the work with three
      // layers: the three-layer server answers fewer requests and idles more, and a server that idles
      // spends more CPU per request (fewer requests per loop turn and per write). Both sides are
      // therefore measured at one offered load, 80 % of what three layers sustained.
      const rate = Math.max(500, Math.round(0.8 * (closed.three.throughput_per_s ?? 0)));
      const paced = sidesOf(await alternate(ctx.settings.http.rounds, () => measured(three.child, three.port, rate), () => measured(one.child, one.port, rate)), `, paced at ${rate}/s`);
      sides[mode] = { ...paced, closed };
    } finally {
      await Promise.all([stopChild(one.child), stopChild(three.child)]);
    }
  }
  const memory = sides.memory;
  const closedRedis = sides.Redis.closed;
  const onRedis = sides.Redis;
  const scripts = (side: Side) => (side as { redis?: { scripts_per_decision: number } }).redis?.scripts_per_decision ?? NaN;
  return finish({
    id: 17,
    key: 'stacked_layers',
    name: 'Stacked layers: three layers in one HTTP check vs one',
    subject: memory.three,
    baseline: memory.one,
    ratio: memory.cpuRatio,
    ratio_meaning: 'server CPU per request (three layers) / (one layer), memory mode, median rounds of alternating runs; lower is better',
    target: '<= 1.3x server CPU per request in memory and Redis modes; Redis scripts per decision as one layer\'s',
    checks: [
      check('server CPU per request, three layers / one (memory)', memory.cpuRatio, '<=', 1.3, 'x'),
      check('server CPU per request, three layers / one (Redis)', onRedis.cpuRatio, '<=', 1.3, 'x'),
      check('Redis scripts per decision, three layers / one', round(scripts(onRedis.three) / scripts(onRedis.one), 2), '<=', 1.05, 'x'),
    ],
    notes: [
      ...loadNotes(memory.three, memory.one),
      'The three-layer server holds the same 10 policies plus one in layer org (org_id *) and one in layer platform (all HTTP): every check consumes in three counters, in one step (one script call on Redis).',
      `Redis mode, both sides paced at one offered load: three layers ${onRedis.cpuRatio}x the server CPU per request of one; scripts per decision ${scripts(onRedis.three)} (three) and ${scripts(onRedis.one)} (one): the store's batching carries several decisions per call.`,
      `Redis mode, closed loop (${ctx.settings.http.connections} connections, as fast as each answers): three layers ${closedRedis?.cpuRatio}x, at ${closedRedis?.three.throughput_per_s} against ${closedRedis?.one.throughput_per_s} requests/s (Redis's time per call bounds both).`,
    ],
    details: { redis: { subject: onRedis.three, baseline: onRedis.one, cpu_ratio: onRedis.cpuRatio, closed_loop: closedRedis && { subject: closedRedis.three, baseline: closedRedis.one, cpu_ratio: closedRedis.cpuRatio } } },
  });
}

/** The bench's target request is decided by `layers` layers on this server (a decision lists them when more than one decided). */
async function expectLayers(port: number, layers: number): Promise<void> {
  const body = JSON.stringify(generateWorkload(10).bodies[0]);
  const answer = (await (await fetch(`http://127.0.0.1:${port}/rl/v1/check`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).json()) as { layers?: unknown[] };
  const seen = answer.layers?.length ?? 1;
  if (seen !== layers) throw new Error(`scenario 17: the target request was decided by ${seen} layers, not ${layers}`);
}
