import { monitorEventLoopDelay } from 'node:perf_hooks';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import type { RequestContext } from '../../src/model/request-context.js';
import { Analytics } from '../../src/observability/analytics.js';
import { Metrics } from '../../src/observability/metrics.js';
import { ObservabilityRecorder } from '../../src/observability/recorder.js';
import { LiveMatcher } from '../../src/policy/live-matcher.js';
import type { Policy } from '../../src/policy/types.js';
import { validatePolicy } from '../../src/policy/validate.js';
import { sleep } from '../lib/proc.js';
import { argOf, childMain, send } from './common.js';

/**
 * Scenario 6, in its own process (run with --expose-gc): RSS after `--keys` distinct live counters in
 * the MemoryCounterStore (one per user under a `user_id: "*"` policy, through DecisionService.check, as
 * production creates them), and after their windows have passed and the store's own sweeper (production
 * defaults: every 250 ms, 20,000 keys per sweep) has removed them. The clock is injected so the windows
 * can end on cue; the sweeper runs on real timers. `--impl rlf`: the same keys in RateLimiterMemory.
 */

const WINDOW_MS = 10_000;

childMain(async () => {
  const impl = argOf('impl');
  const keys = Number(argOf('keys'));
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
    const t0 = performance.now();
    for (let i = 0; i < keys; i++) await limiter.consume(`acme:user-${i}`);
    const insertMs = performance.now() - t0;
    await settle();
    const full = process.memoryUsage();
    send({
      type: 'result',
      impl,
      keys,
      insert_ns_per_key: (insertMs * 1e6) / keys,
      rss_start: start.rss,
      rss_full: full.rss,
      heap_start: start.heapUsed,
      heap_full: full.heapUsed,
      rss_bytes_per_key: (full.rss - start.rss) / keys,
      heap_bytes_per_key: (full.heapUsed - start.heapUsed) / keys,
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

  const t0 = performance.now();
  for (let i = 0; i < keys; i++) {
    const decision = await decisions.check(ctxOf(`user-${i}`));
    if (i === 0 && decision.matched_policy_id !== 'per-user') throw new Error(`unexpected decision ${JSON.stringify(decision)}`);
  }
  const insertMs = performance.now() - t0;
  const live = store.size;
  await settle();
  const full = process.memoryUsage();

  // Every window ends; the sweeper (real timers) removes the keys.
  now += WINDOW_MS * 2;
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const t1 = performance.now();
  await waitForEmpty(store, 300_000);
  const sweepMs = performance.now() - t1;
  delay.disable();
  await settle();
  await sleep(500);
  await settle();
  const after = process.memoryUsage();
  await store.close();

  send({
    type: 'result',
    impl,
    keys,
    live_keys: live,
    insert_ns_per_key: (insertMs * 1e6) / keys,
    rss_start: start.rss,
    rss_full: full.rss,
    rss_after_expiry: after.rss,
    heap_start: start.heapUsed,
    heap_full: full.heapUsed,
    heap_after_expiry: after.heapUsed,
    rss_bytes_per_key: (full.rss - start.rss) / keys,
    heap_bytes_per_key: (full.heapUsed - start.heapUsed) / keys,
    sweep_ms: sweepMs,
    sweep_loop_delay_p99_ms: delay.percentile(99) / 1e6,
    sweep_loop_delay_max_ms: delay.max / 1e6,
  });
});

async function waitForEmpty(store: MemoryCounterStore, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (store.size > 0) {
    if (Date.now() > deadline) throw new Error(`${store.size} keys still live after ${timeoutMs} ms`);
    await sleep(50);
  }
}
