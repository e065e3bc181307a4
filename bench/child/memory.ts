import { readFileSync } from 'node:fs';
import { PerformanceObserver, constants, monitorEventLoopDelay } from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import type { RequestContext } from '../../src/model/request-context.js';
import { Analytics } from '../../src/analytics/analytics.js';
import { Metrics } from '../../src/observability/metrics.js';
import { ObservabilityRecorder } from '../../src/analytics/recorder.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import type { Policy } from '../../src/policy/types.js';
import { validatePolicy } from '../../src/policy/validate.js';
import { sleep } from '../lib/proc.js';
import { argOf, childMain, send } from './common.js';

/**
 * Scenario 6, in its own process (run with --expose-gc): RSS after `--keys` distinct live counters in
 * the MemoryCounterStore (one per user under a `user_id: "*"` policy, through DecisionService.check, as
 * production creates them), and after their windows have passed and the store's own sweeper (production
 * defaults) has removed them. The clock is injected so the windows can end on cue; the sweeper runs on
 * real timers. `--impl rlf`: the same keys in RateLimiterMemory.
 *
 * "After expiry" is what an idle production process shows, not what forced GCs show. Once the sweeper has
 * removed every key the process does nothing but its timers, and the measurement waits (at most
 * `--idle-timeout-ms`) until V8's memory reducer has run: without it the dead keys stay in the old
 * generation (no allocation is left to trigger a mark-compact), and a forced gc() frees them but leaves
 * the new space at the size the burst grew it to (V8 shrinks it only in a memory-reducing GC, or in a GC at
 * a low but non-zero allocation rate), which is most of the ~40 MiB the old forced-GC figure showed above
 * the start. The memory reducer looks every 8 s and starts its GCs once the allocation rate it samples is
 * low: 30-80 s after a burst. Each phase also records where the memory is (`memory_*`, see `memorySnapshot`).
 */

const WINDOW_MS = 10_000;
/** The memory reducer runs up to three GCs ~0.6 s apart: this long without another one means it is done. */
const REDUCER_QUIET_MS = 2_000;

childMain(async () => {
  const impl = argOf('impl');
  const keys = Number(argOf('keys'));
  const idleTimeoutMs = Number(argOf('idle-timeout-ms', '150000'));
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with --expose-gc');
  const settle = async () => {
    for (let i = 0; i < 3; i++) {
      gc();
      await sleep(50);
    }
  };

  if (impl === 'rlf') {
    const limiter = new RateLimiterMemory({ points: 100, duration: 3600 });
    for (let i = 0; i < 10_000; i++) await limiter.consume(`warm-${i}`);
    await settle();
    const start = process.memoryUsage();
    const memoryStart = memorySnapshot();
    const t0 = performance.now();
    for (let i = 0; i < keys; i++) await limiter.consume(`acme:user-${i}`);
    const insertMs = performance.now() - t0;
    await settle();
    const full = process.memoryUsage();
    const memoryFull = memorySnapshot();
    send({
      type: 'result',
      impl,
      keys,
      ...growth(keys, insertMs, start, full),
      memory_start: memoryStart,
      memory_full: memoryFull,
    });
    return;
  }
  if (impl !== 'rl') throw new Error(`unknown --impl ${impl}`);

  let now = Date.now();
  const clock = () => now;
  const store = new MemoryCounterStore({ now: clock });
  const raw = {
    policy_id: 'per-user',
    name: 'per user',
    scope: { org_id: 'acme', user_id: '*' },
    algorithm: { type: 'fixed_window', limit: 100, window: `${WINDOW_MS / 1000}s` },
  };
  const validated = validatePolicy(raw);
  if (!validated.ok) throw new Error(JSON.stringify(validated.errors));
  const stamp = new Date().toISOString();
  const policy: Policy = { ...validated.policy, version: 1, created_at: stamp, updated_at: stamp };
  const metrics = new Metrics();
  const decisions = new DecisionService({
    policies: new LiveMatcher([policy]),
    counters: store,
    keyPrefix: 'rl:',
    recorder: new ObservabilityRecorder(metrics, new Analytics()),
    now: clock,
  });
  const ctxOf = (user: string): RequestContext => ({ quantity: 1, tags: {}, org_id: 'acme', signal_type: 'http', user_id: user });

  // Warm up (JIT, metrics children), then let those keys expire and be swept: the start line.
  for (let i = 0; i < 10_000; i++) await decisions.check(ctxOf(`warm-${i}`));
  now += WINDOW_MS * 2;
  await waitForEmpty(store, 60_000);
  await settle();
  const start = process.memoryUsage();
  const memoryStart = memorySnapshot();

  const t0 = performance.now();
  for (let i = 0; i < keys; i++) {
    const decision = await decisions.check(ctxOf(`user-${i}`));
    if (i === 0 && decision.matched_policy_id !== 'per-user') throw new Error(`unexpected decision ${JSON.stringify(decision)}`);
  }
  const insertMs = performance.now() - t0;
  const live = store.size;
  await settle();
  const full = process.memoryUsage();
  const memoryFull = memorySnapshot();

  // Every window ends; the sweeper (real timers) removes the keys. No forced GC from here on.
  now += WINDOW_MS * 2;
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const t1 = performance.now();
  await waitForEmpty(store, 300_000);
  const swept = performance.now();
  delay.disable();
  const memoryAfterSweep = memorySnapshot();
  // Only the reducer's GCs from here on count: one during the sweep would not have seen the keys gone.
  const reducer = watchMemoryReducer();
  const reducerRan = await reducer.idleUntilDone(idleTimeoutMs);
  const idleMs = performance.now() - swept;
  const memoryAfter = memorySnapshot();
  reducer.stop();
  await store.close();

  send({
    type: 'result',
    impl,
    keys,
    live_keys: live,
    ...growth(keys, insertMs, start, full),
    rss_after_expiry: memoryAfter.rss,
    heap_after_expiry: memoryAfter.heap_used,
    sweep_ms: swept - t1,
    sweep_loop_delay_p99_ms: delay.percentile(99) / 1e6,
    sweep_loop_delay_max_ms: delay.max / 1e6,
    // Right after the last key was swept, before any GC: what the process holds until V8 collects.
    rss_after_sweep: memoryAfterSweep.rss,
    memory_reducer_ran: reducerRan,
    memory_reducer_gcs: reducer.gcs,
    idle_ms_until_memory_reducer: reducer.firstAtMs === undefined ? null : reducer.firstAtMs - swept,
    idle_ms: idleMs,
    memory_start: memoryStart,
    memory_full: memoryFull,
    memory_after_sweep: memoryAfterSweep,
    memory_after_expiry: memoryAfter,
  });
});

/** Both implementations' insert figures: `keys` inserted in `insertMs`, memory from `start` to `full`. */
function growth(keys: number, insertMs: number, start: NodeJS.MemoryUsage, full: NodeJS.MemoryUsage) {
  return {
    insert_ns_per_key: (insertMs * 1e6) / keys,
    rss_start: start.rss,
    rss_full: full.rss,
    heap_start: start.heapUsed,
    heap_full: full.heapUsed,
    rss_bytes_per_key: (full.rss - start.rss) / keys,
    heap_bytes_per_key: (full.heapUsed - start.heapUsed) / keys,
  };
}

async function waitForEmpty(store: MemoryCounterStore, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (store.size > 0) {
    if (Date.now() > deadline) throw new Error(`${store.size} keys still live after ${timeoutMs} ms`);
    await sleep(50);
  }
}

/**
 * Watches for the GCs of V8's memory reducer: full GCs flagged "collect all external memory", which is
 * how the reducer starts its incremental marking (forced and allocation-triggered GCs carry other flags).
 */
function watchMemoryReducer() {
  const state = { gcs: 0, firstAtMs: undefined as number | undefined, lastAtMs: 0 };
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const detail = (entry as unknown as { detail?: { kind?: number; flags?: number } }).detail;
      if (detail?.kind !== constants.NODE_PERFORMANCE_GC_MAJOR) continue;
      if (((detail.flags ?? 0) & constants.NODE_PERFORMANCE_GC_FLAGS_ALL_EXTERNAL_MEMORY) === 0) continue;
      state.gcs++;
      state.firstAtMs ??= entry.startTime;
      state.lastAtMs = entry.startTime + entry.duration;
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  return {
    get gcs() {
      return state.gcs;
    },
    get firstAtMs() {
      return state.firstAtMs;
    },
    /**
     * Idles (timers only, as an idle server does) until the reducer has run and gone quiet, or until the
     * timeout; true when it ran.
     */
    async idleUntilDone(timeoutMs: number): Promise<boolean> {
      const deadline = performance.now() + timeoutMs;
      while (performance.now() < deadline) {
        if (state.gcs > 0 && performance.now() - state.lastAtMs > REDUCER_QUIET_MS) return true;
        await sleep(250);
      }
      return state.gcs > 0;
    },
    stop: () => observer.disconnect(),
  };
}

/** Where the process's memory is at one instant, in bytes. */
interface MemorySnapshot {
  rss: number;
  heap_total: number;
  heap_used: number;
  external: number;
  array_buffers: number;
  /** New space: reserved size of its semi-spaces and the part of it resident in memory. */
  new_space_size: number;
  new_space_physical: number;
  old_space_physical: number;
  large_object_space_physical: number;
  /** Every V8 heap space's resident pages (what V8 itself has committed and touched). */
  v8_heap_physical: number;
  /** /proc/self/smaps_rollup (Linux; null elsewhere): anonymous memory, and RSS backed by files (the node binary, libraries). */
  anonymous_rss: number | null;
  file_rss: number | null;
  /** Anonymous memory outside V8's heap: malloc (the main arena and the worker threads' arenas) and thread stacks. */
  non_v8_anonymous: number | null;
}

function memorySnapshot(): MemorySnapshot {
  const usage = process.memoryUsage();
  const spaces = new Map(getHeapSpaceStatistics().map((s) => [s.space_name, s]));
  const physical = (name: string) => spaces.get(name)?.physical_space_size ?? 0;
  let v8Physical = 0;
  for (const space of spaces.values()) v8Physical += space.physical_space_size;
  const rollup = smapsRollup();
  const anonymous = rollup?.Anonymous ?? null;
  return {
    rss: usage.rss,
    heap_total: usage.heapTotal,
    heap_used: usage.heapUsed,
    external: usage.external,
    array_buffers: usage.arrayBuffers,
    new_space_size: spaces.get('new_space')?.space_size ?? 0,
    new_space_physical: physical('new_space'),
    old_space_physical: physical('old_space'),
    large_object_space_physical: physical('large_object_space'),
    v8_heap_physical: v8Physical,
    anonymous_rss: anonymous,
    file_rss: rollup ? rollup.Rss - rollup.Anonymous : null,
    non_v8_anonymous: anonymous === null ? null : anonymous - v8Physical,
  };
}

/** The kB fields of /proc/self/smaps_rollup, in bytes; undefined where it does not exist. */
function smapsRollup(): Record<string, number> | undefined {
  let text: string;
  try {
    text = readFileSync('/proc/self/smaps_rollup', 'utf8');
  } catch {
    return undefined;
  }
  const fields: Record<string, number> = {};
  for (const match of text.matchAll(/^(\w+):\s+(\d+) kB$/gm)) fields[match[1]] = Number(match[2]) * 1024;
  return fields;
}
