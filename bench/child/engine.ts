import { PerformanceObserver, constants } from 'node:perf_hooks';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { parseRequestContext, type RequestContext } from '../../src/model/request-context.js';
import { Analytics } from '../../src/analytics/analytics.js';
import { Metrics } from '../../src/observability/metrics.js';
import { ObservabilityRecorder } from '../../src/analytics/recorder.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { Samples, median, type LatencySummary } from '../lib/stats.js';
import { TARGET_LIMIT, TARGET_WINDOW_SECONDS, generateWorkload, zipfSequence } from '../lib/workload.js';
import { layeredWorkload } from '../lib/layered-workload.js';
import { argOf, childMain, send, startProfile, stopProfile } from './common.js';

/**
 * In-process measurements (no transport), one implementation per process so JIT state and heap of one
 * never colour the other:
 *   --mode engine  --impl rl|rl-no-recorder|rlf   scenario 4: DecisionService.check vs RateLimiterMemory.consume
 *   --mode engine  --impl rl-calendar             scenario 16: the same with the target policy per calendar hour
 *                                                  over the same Zipf-skewed sequence of 10,000 keys
 *   --mode scaling --policies N                    scenario 5: check latency with N policies (and CPU time per check)
 *   --mode scaling --policies N --layers 4         scenario 18: the same policies spread over four layers
 *   --profile <file.cpuprofile>                    CPU profile of the timed rounds
 * Every call is awaited before the next (a caller's view of one decision). Throughput comes from rounds
 * without per-call timing (the best of the rounds is reported); latency percentiles from a separate pass that
 * times every call (performance.now() around each await, ~40 ns of its own).
 */

const KEYS = 10_000;

childMain(async () => {
  const mode = argOf('mode');
  const roundMs = Number(argOf('round-ms', '1000'));
  const rounds = Number(argOf('rounds', '5'));
  const warmupMs = Number(argOf('warmup-ms', '1000'));
  const latencyCalls = Number(argOf('latency-calls', '200000'));
  const profile = argOf('profile', '');
  if (mode === 'engine') {
    const impl = argOf('impl');
    const sequence = zipfSequence(KEYS, 1 << 20);
    const call = buildEngine(impl);
    const result = await measure((i) => call(sequence[i & (sequence.length - 1)]), { roundMs, rounds, warmupMs, latencyCalls, profile });
    send({ type: 'result', impl, keys: KEYS, zipf_s: 1, ...result, heap_used_bytes: process.memoryUsage().heapUsed });
  } else if (mode === 'scaling') {
    const count = Number(argOf('policies'));
    const t0 = performance.now();
    const workload = argOf('layers', '1') === '4' ? layeredWorkload(count) : generateWorkload(count);
    const t1 = performance.now();
    const matcher = new LiveMatcher(workload.policies);
    const buildMs = performance.now() - t1;
    const decisions = new DecisionService({
      policies: matcher,
      counters: new MemoryCounterStore(),
      keyPrefix: 'rl:',
      recorder: new ObservabilityRecorder(new Metrics(), new Analytics()),
    });
    const contexts = workload.bodies.map((b) => parseRequestContext(b));
    // Collect what generating and validating left behind, so the rounds see the live heap of N policies.
    const gc = (globalThis as { gc?: () => void }).gc;
    for (let i = 0; i < 2; i++) gc?.();
    const liveHeap = process.memoryUsage().heapUsed;
    const probe = await decisions.check(contexts[0]);
    if (probe.matched_policy_id !== workload.targetPolicyId) {
      throw new Error(`the benchmark request matched ${JSON.stringify(probe.matched_policy_id)}, not ${workload.targetPolicyId}`);
    }
    const layers = Number(argOf('layers', '1'));
    if ((probe.layers?.length ?? 1) !== layers) throw new Error(`the benchmark request was decided by ${probe.layers?.length ?? 1} layers, not ${layers}`);
    const n = contexts.length;
    const result = await measure((i) => decisions.check(contexts[i % n]), { roundMs, rounds, warmupMs, latencyCalls, profile });
    const cpuNs = await cpuNsPerCall((i) => decisions.check(contexts[i % n]), rounds, 100_000);
    // The matcher alone (synchronous), to separate matching from counting.
    const current = matcher.current();
    const now = Date.now();
    const matchNs: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const calls = 200_000;
      const s = process.hrtime.bigint();
      for (let i = 0; i < calls; i++) current.match(contexts[i % n], 'rate', now);
      matchNs.push(Number(process.hrtime.bigint() - s) / calls);
    }
    send({
      type: 'result',
      policies: count,
      compiled: current.size,
      generate_ms: t1 - t0,
      build_ms: buildMs,
      match_ns: median(matchNs),
      live_heap_bytes: gc ? liveHeap : null,
      cpu_ns_per_op: cpuNs,
      ...result,
      heap_used_bytes: process.memoryUsage().heapUsed,
    });
  } else {
    throw new Error(`unknown --mode ${mode}`);
  }
});

/**
 * CPU time of this process (every thread, so GC helpers count) per awaited call, best of `rounds` rounds of
 * `calls` calls: unlike wall-clock time it does not grow while another process has the core.
 */
async function cpuNsPerCall(call: (i: number) => Promise<unknown>, rounds: number, calls: number): Promise<number> {
  const perRound: number[] = [];
  let i = 0;
  for (let r = 0; r < rounds; r++) {
    const start = process.cpuUsage();
    for (let c = 0; c < calls; c++) await call(i++);
    const used = process.cpuUsage(start);
    perRound.push(((used.user + used.system) * 1000) / calls);
  }
  return Math.min(...perRound);
}

function buildEngine(impl: string): (key: number) => Promise<unknown> {
  if (impl === 'rlf') {
    const limiter = new RateLimiterMemory({ points: TARGET_LIMIT, duration: TARGET_WINDOW_SECONDS });
    const keys = Array.from({ length: KEYS }, (_, k) => `tenant:/api/orders:user-${k}`);
    return (k) => limiter.consume(keys[k]);
  }
  const workload = generateWorkload(10, KEYS);
  // rl-calendar: the same workload with the target policy counted per calendar hour in Berlin instead of its window.
  const calendarTarget = { type: 'fixed_window' as const, limit: TARGET_LIMIT, calendar: 'hour' as const, timezone: 'Europe/Berlin' };
  const policies = impl === 'rl-calendar' ? workload.policies.map((p) => (p.policy_id === 'target-per-user' ? { ...p, algorithm: calendarTarget } : p)) : workload.policies;
  const metrics = new Metrics();
  const decisions = new DecisionService({
    policies: new LiveMatcher(policies),
    counters: new MemoryCounterStore(),
    keyPrefix: 'rl:',
    recorder: impl === 'rl-no-recorder' ? undefined : new ObservabilityRecorder(metrics, new Analytics()),
    onCounterStoreError: () => metrics.countCounterStoreError(),
  });
  if (impl !== 'rl' && impl !== 'rl-no-recorder' && impl !== 'rl-calendar') throw new Error(`unknown --impl ${impl}`);
  const contexts: RequestContext[] = workload.bodies.map((b) => parseRequestContext(b));
  return (k) => decisions.check(contexts[k]);
}

export interface EngineMeasurement extends LatencySummary {
  /** Best round. */
  ns_per_op: number;
  median_ns_per_op: number;
  ops_per_sec: number;
  rounds_ns_per_op: number[];
  /** Share of the timed rounds spent in garbage collection, percent. */
  gc_pct: number;
  gc: { minor_ms: number; major_ms: number; minor_count: number; major_count: number };
}

async function measure(
  call: (i: number) => Promise<unknown>,
  o: { roundMs: number; rounds: number; warmupMs: number; latencyCalls: number; profile: string },
): Promise<EngineMeasurement> {
  let i = 0;
  const runFor = async (ms: number) => {
    const start = process.hrtime.bigint();
    const end = start + BigInt(Math.round(ms * 1e6));
    let ops = 0;
    let now = start;
    while (now < end) {
      for (let b = 0; b < 1000; b++) await call(i++);
      ops += 1000;
      now = process.hrtime.bigint();
    }
    return Number(now - start) / ops;
  };
  await runFor(o.warmupMs);
  // --profile: the CPU profile covers the timed rounds only (not start-up, set-up or warm-up).
  if (o.profile) await startProfile();
  // Garbage collection during the timed rounds: what the allocations of a decision cost later.
  const gc = { minor_ms: 0, major_ms: 0, minor_count: 0, major_count: 0 };
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = (entry as unknown as { detail?: { kind?: number } }).detail?.kind;
      if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
        gc.major_ms += entry.duration;
        gc.major_count++;
      } else {
        gc.minor_ms += entry.duration;
        gc.minor_count++;
      }
    }
  });
  // GC entries are handed to observers from the event loop, which the awaited calls never leave: let it
  // turn once first, so the collections of set-up and warm-up are not counted as the rounds'.
  await new Promise((resolve) => setTimeout(resolve, 20));
  observer.observe({ entryTypes: ['gc'] });
  const roundsStart = performance.now();
  const perRound: number[] = [];
  for (let r = 0; r < o.rounds; r++) perRound.push(await runFor(o.roundMs));
  const roundsMs = performance.now() - roundsStart;
  await new Promise((resolve) => setTimeout(resolve, 50)); // the observer is called from the event loop: let it run
  observer.disconnect();
  if (o.profile) await stopProfile(o.profile);
  const samples = new Samples(o.latencyCalls);
  for (let c = 0; c < o.latencyCalls; c++) {
    const t0 = performance.now();
    await call(i++);
    samples.add(performance.now() - t0);
  }
  // The best round: on a shared machine interference only ever adds time. The median is kept beside it.
  const ns = Math.min(...perRound);
  return {
    ...samples.summary(),
    ns_per_op: ns,
    median_ns_per_op: median(perRound),
    ops_per_sec: 1e9 / ns,
    rounds_ns_per_op: perRound,
    gc_pct: ((gc.minor_ms + gc.major_ms) / roundsMs) * 100,
    gc,
  };
}
