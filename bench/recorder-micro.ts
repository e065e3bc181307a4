import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { MemoryCounterStore } from '../src/counters/memory-store.js';
import { DecisionService, type DecisionEvent, type DecisionRecorder } from '../src/decision/decision-service.js';
import { parseRequestContext, type RequestContext } from '../src/model/request-context.js';
import { Analytics } from '../src/analytics/analytics.js';
import { Metrics } from '../src/observability/metrics.js';
import { ObservabilityRecorder } from '../src/analytics/recorder.js';
import { LiveMatcher } from '../src/matching/live-matcher.js';
import { generateWorkload, prng, zipfSequence } from './lib/workload.js';

/**
 * Micro-benchmark of the decision recorder's sinks (Metrics.recordDecision, Analytics.record). Not part
 * of `npm run bench` or `npm test`; run it by hand (tsx, both sides alike):
 *
 *   npx tsx bench/recorder-micro.ts [--baseline <dir>] [--passes 3] [--rounds 5] [--round-ms 200]
 *                                   [--only events/engine,events/mixed,check]
 *
 * Measurements, in CPU time per operation, each in its own child process (so one implementation's JIT
 * feedback never makes the other's call sites polymorphic), children alternating over `--passes`, the
 * best round reported:
 * - `events/engine`: ns per `new ObservabilityRecorder(metrics, analytics).record(event)` for the events
 *   DecisionService records in scenario 4 (one tenant, one policy, no tags, Zipf-skewed users), captured
 *   once from a real service and replayed.
 * - `events/mixed`: the same for synthetic events of a busier server: 200 tenants, 50 policies, 10%
 *   denied, 5% with a shadow policy beside the enforcing one, half with two tags, some failure modes.
 * - `check`: ns per awaited DecisionService.check over scenario 4's workload (as bench/child/engine.ts),
 *   with the recorder, with a recorder that does nothing (`noop`: DecisionService's own share, its two
 *   performance.now() calls and the event object) and without one (`none`): the difference between
 *   `none` and the others is what recording adds to a decision.
 *
 * `--baseline <dir>`: another version of src/observability's metrics.ts, plain-metrics.ts and
 * analytics.ts (`git show HEAD:src/observability/metrics.ts > .tmp/recorder-baseline/metrics.ts`, the
 * same for the other two; any directory inside the repository, so `prom-client` resolves — their
 * `../decision/` imports are type-only), measured beside the current one. The parent first checks that both render the same
 * /metrics exposition and analytics summary for both event streams (`--different-output` skips that when the
 * counting rule changed on purpose, e.g. when what an outcome counts changed).
 */

type Impl = 'current' | 'baseline' | 'noop' | 'none';
type Measure = 'events/engine' | 'events/mixed' | 'check';
interface Sinks {
  metrics: { recordDecision(event: DecisionEvent): void; exposition(): Promise<string> };
  analytics: { record(event: DecisionEvent): void; summary(top?: number): unknown };
}

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const EVENTS = 4096;

function argOf(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

async function sinksOf(impl: Impl, baselineDir: string): Promise<Sinks> {
  if (impl === 'current') return { metrics: new Metrics({ defaultMetrics: false }), analytics: new Analytics({ now: () => T0 }) };
  const load = (file: string) => import(pathToFileURL(resolve(baselineDir, file)).href);
  const [metricsModule, analyticsModule] = await Promise.all([load('metrics.ts'), load('analytics.ts')]);
  return { metrics: new metricsModule.Metrics({ defaultMetrics: false }), analytics: new analyticsModule.Analytics({ now: () => T0 }) };
}

function recorderOf(sinks: Sinks): ObservabilityRecorder {
  return new ObservabilityRecorder(sinks.metrics as Metrics, sinks.analytics as Analytics);
}

/** Scenario 4's service and request contexts (bench/child/engine.ts, buildEngine). */
function engineService(recorder: DecisionRecorder | undefined): { service: DecisionService; contexts: RequestContext[] } {
  const workload = generateWorkload(10, 10_000);
  const service = new DecisionService({
    policies: new LiveMatcher(workload.policies),
    counters: new MemoryCounterStore({ sweepIntervalMs: 0 }),
    keyPrefix: 'rl:',
    recorder,
  });
  return { service, contexts: workload.bodies.map((b) => parseRequestContext(b)) };
}

/** The events DecisionService records for scenario 4, captured from a real service. */
async function engineEvents(): Promise<DecisionEvent[]> {
  const events: DecisionEvent[] = [];
  const { service, contexts } = engineService({ record: (event) => void events.push(event) });
  const sequence = zipfSequence(contexts.length, EVENTS);
  for (let i = 0; i < EVENTS; i++) await service.check(contexts[sequence[i]]);
  return events;
}

/** Synthetic events of a busier multi-tenant server, in the shape DecisionService builds them. */
function mixedEvents(): DecisionEvent[] {
  const random = prng(7);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
  const tenants = Array.from({ length: 200 }, (_, i) => `tenant-${i}`);
  const policies = Array.from({ length: 50 }, (_, i) => `policy-${i}`);
  const envs = ['prod', 'staging', 'dev'];
  const events: DecisionEvent[] = [];
  for (let i = 0; i < EVENTS; i++) {
    const denied = random() < 0.1;
    const policyId = random() < 0.97 ? pick(policies) : '';
    const tags: Record<string, string> = random() < 0.5 ? { env: pick(envs), team: `team-${Math.floor(random() * 20)}` } : {};
    events.push({
      operation: random() < 0.95 ? 'check' : pick(['acquire', 'release'] as const),
      ctx: { quantity: 1, tags, tenant_id: pick(tenants), user_id: `user-${i % 1000}` },
      decision: {
        allowed: !denied,
        action: denied ? 'deny' : 'allow',
        reason: policyId === '' ? 'no_matching_policy' : denied ? 'limit_exceeded' : 'within_limit',
        matched_policy_id: policyId,
        remaining: 10,
        retry_after: 0,
        reset_after: 1000,
        limit: 100,
        window: 60_000,
        shadow_mode: false,
        metadata: {},
      },
      durationSeconds: random() < 0.9 ? 2e-6 + random() * 1e-5 : random() * 0.01,
      shadow: random() < 0.05 ? { policyId: 'shadow-policy', limited: random() < 0.5 } : undefined,
      failureMode: policyId !== '' && random() < 0.01 ? pick(['fail_open', 'fail_closed'] as const) : undefined,
    });
  }
  return events;
}

/**
 * CPU ns per operation of each timed round, after a warm-up round. CPU time (process.cpuUsage), not
 * wall time: on a shared machine a process that is descheduled for a while loses wall time, not CPU time.
 */
async function rounds(run: () => Promise<number> | number, roundMs: number, count: number): Promise<number[]> {
  const timeRound = async () => {
    const cpu = process.cpuUsage();
    const end = process.hrtime.bigint() + BigInt(roundMs * 1e6);
    let ops = 0;
    while (process.hrtime.bigint() < end) ops += await run();
    const used = process.cpuUsage(cpu);
    return ((used.user + used.system) * 1000) / ops;
  };
  await timeRound();
  const ns: number[] = [];
  for (let r = 0; r < count; r++) ns.push(await timeRound());
  return ns;
}

async function child(measure: Measure, impl: Impl, baselineDir: string, roundMs: number, count: number): Promise<number[]> {
  if (measure === 'check') {
    const recorder = impl === 'none' ? undefined : impl === 'noop' ? { record() {} } : recorderOf(await sinksOf(impl, baselineDir));
    const { service, contexts } = engineService(recorder);
    const sequence = zipfSequence(contexts.length, 1 << 16);
    let i = 0;
    return rounds(async () => {
      for (let b = 0; b < 1000; b++) await service.check(contexts[sequence[i++ & 0xffff]]);
      return 1000;
    }, roundMs, count);
  }
  const events = measure === 'events/engine' ? await engineEvents() : mixedEvents();
  const recorder = recorderOf(await sinksOf(impl, baselineDir));
  return rounds(() => {
    for (let i = 0; i < events.length; i++) recorder.record(events[i]);
    return events.length;
  }, roundMs, count);
}

/** Both implementations must render the same exposition and summary for the same events. */
async function checkSameOutput(baselineDir: string): Promise<void> {
  for (const [stream, events] of [['engine', await engineEvents()], ['mixed', mixedEvents()]] as const) {
    const rendered: string[] = [];
    for (const impl of ['current', 'baseline'] as const) {
      const sinks = await sinksOf(impl, baselineDir);
      for (const event of events) {
        sinks.metrics.recordDecision(event);
        sinks.analytics.record(event);
      }
      rendered.push((await sinks.metrics.exposition()) + JSON.stringify(sinks.analytics.summary()));
    }
    if (rendered[0] !== rendered[1]) throw new Error(`current and baseline render different output for the ${stream} events`);
  }
  console.log('current and baseline: identical exposition and summary for both event streams');
}

async function parent(): Promise<void> {
  const baselineDir = argOf('baseline', '');
  const passes = Number(argOf('passes', '3'));
  const common = ['--rounds', argOf('rounds', '5'), '--round-ms', argOf('round-ms', '200'), '--baseline', baselineDir];
  // --different-output: the baseline counts by another rule on purpose (a change of meaning): only the cost is compared.
  if (baselineDir && !process.argv.includes('--different-output')) await checkSameOutput(baselineDir);
  const impls: Impl[] = baselineDir ? ['current', 'baseline'] : ['current'];
  const variants: [Measure, Impl][] = [
    ...impls.map((impl) => ['events/engine', impl] as [Measure, Impl]),
    ...impls.map((impl) => ['events/mixed', impl] as [Measure, Impl]),
    ...[...impls, 'noop' as const, 'none' as const].map((impl) => ['check', impl] as [Measure, Impl]),
  ];
  const only = argOf('only', '');
  if (only) variants.splice(0, variants.length, ...variants.filter(([m]) => only.split(',').includes(m)));
  const results = new Map<string, number[]>(variants.map(([m, i]) => [`${m} ${i}`, []]));
  for (let p = 0; p < passes; p++) {
    for (const [measure, impl] of p % 2 === 0 ? variants : [...variants].reverse()) {
      const out = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--child', measure, '--impl', impl, ...common], {
        encoding: 'utf8',
      });
      if (out.status !== 0) throw new Error(`${measure} ${impl} failed:\n${out.stderr}`);
      results.get(`${measure} ${impl}`)!.push(...(JSON.parse(out.stdout.trim().split('\n').pop()!) as number[]));
    }
  }
  const best = (key: string) => Math.min(...(results.get(key) ?? [Number.NaN]));
  for (const [key, ns] of results) {
    const sorted = [...ns].sort((a, b) => a - b);
    console.log(`${key.padEnd(24)} best ${best(key).toFixed(1).padStart(7)} ns  median ${sorted[sorted.length >> 1].toFixed(1).padStart(7)} ns  (${ns.length} rounds)`);
  }
  if (results.has('check none')) for (const impl of [...impls, 'noop']) console.log(`recorder's share of a check (${impl}): ${(best(`check ${impl}`) - best('check none')).toFixed(0)} ns`);
}

const measure = argOf('child', '') as Measure | '';
const main = measure
  ? async () => {
      const ns = await child(measure, argOf('impl', 'current') as Impl, argOf('baseline', ''), Number(argOf('round-ms', '200')), Number(argOf('rounds', '5')));
      console.log(JSON.stringify(ns));
    }
  : parent;
main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
