import { fork } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { MemoryCounterStore } from '../src/counters/memory-store.js';
import { DecisionService } from '../src/decision/decision-service.js';
import { LiveMatcher } from '../src/matching/live-matcher.js';
import { parseRequestContext } from '../src/model/request-context.js';
import { startTracing } from '../src/observability/start-tracing.js';
import { itself, type TraceCarrier } from '../src/observability/tracing.js';
import { readFields } from '../test/support/protobuf-wire.js';
import { generateWorkload } from './lib/workload.js';

/**
 * CPU per decision with tracing off and on, in-process (issue 24). Not part of `npm run bench`; by hand:
 *
 *   npx tsx bench/tracing-micro.ts [--passes 3] [--rounds 5] [--calls 20000]
 *
 * Each side runs in a child process of its own, the two alternating over `--passes`: `off` calls
 * DecisionService.decideNow('check') as the HTTP fast path does with no OTLP endpoint; `on` wraps the
 * same call in Tracing.decision exactly as the fast path does with tracing on (OTEL_TRACES_SAMPLER
 * always_on, every request carrying a traceparent, OTLP protobuf exported by the batch processor to a
 * sink in this parent process). Both yield to the event loop every 1,000 decisions, so the exporter's
 * batches are serialised and sent inside the measured time. CPU time (process.cpuUsage) per decision,
 * the median round of each pass; the sink counts the spans it received per decision traced (1.0: none
 * dropped).
 */

function argOf(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const ROUNDS = Number(argOf('rounds', '5'));
const CALLS = Number(argOf('calls', '20000'));
const YIELD_EVERY = 1000;

async function child(side: 'off' | 'on'): Promise<void> {
  const workload = generateWorkload(10, 1000);
  const decisions = new DecisionService({ policies: new LiveMatcher(workload.policies), counters: new MemoryCounterStore(), keyPrefix: 'rl:' });
  const contexts = workload.bodies.map((b) => parseRequestContext(b));
  const tracing = side === 'on' ? await startTracing({ protocol: 'http/protobuf', serviceVersion: 'bench' }) : undefined;
  const carrier: TraceCarrier = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' };
  const perRound: number[] = [];
  let i = 0;
  for (let r = 0; r < ROUNDS + 1; r++) {
    const start = process.cpuUsage();
    for (let c = 0; c < CALLS; c++) {
      const ctx = contexts[i++ % contexts.length];
      if (tracing === undefined) decisions.decideNow('check', ctx);
      else tracing.decision('rl.check', carrier, () => decisions.decideNow('check', ctx), itself);
      if (c % YIELD_EVERY === YIELD_EVERY - 1) await new Promise((resolve) => setImmediate(resolve));
    }
    const used = process.cpuUsage(start);
    if (r > 0) perRound.push(((used.user + used.system) * 1000) / CALLS); // round 0 warms the JIT
  }
  await tracing?.shutdown();
  const sorted = [...perRound].sort((a, b) => a - b);
  process.send!({ side, ns_per_decision: sorted[Math.floor((sorted.length - 1) / 2)], rounds: perRound.map(Math.round), decisions: (ROUNDS + 1) * CALLS });
}

async function parent(): Promise<void> {
  let spans = 0;
  const sink = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      for (const resourceSpans of readFields(Buffer.concat(chunks)).get(1) ?? []) {
        for (const scopeSpans of readFields(resourceSpans as Buffer).get(2) ?? []) spans += readFields(scopeSpans as Buffer).get(2)?.length ?? 0;
      }
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  const env = {
    ...process.env,
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(sink.address() as AddressInfo).port}`,
    OTEL_TRACES_SAMPLER: 'always_on',
    OTEL_BSP_MAX_QUEUE_SIZE: '100000',
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '2048',
    OTEL_BSP_SCHEDULE_DELAY: '100',
  };
  const results: Record<string, number[]> = { off: [], on: [] };
  let spansPerTraced = 0;
  for (let pass = 0; pass < Number(argOf('passes', '3')); pass++) {
    for (const side of ['off', 'on'] as const) {
      const before = spans;
      const proc = fork(fileURLToPath(import.meta.url), ['--child', side, '--rounds', String(ROUNDS), '--calls', String(CALLS)], { env, execArgv: ['--import', 'tsx'] });
      const answer = await new Promise<{ ns_per_decision: number; rounds: number[]; decisions: number }>((resolve, reject) => {
        proc.once('message', (m) => resolve(m as never));
        proc.once('exit', (code) => reject(new Error(`child ${side} exited ${code}`)));
      });
      await new Promise((resolve) => proc.once('exit', resolve));
      results[side].push(answer.ns_per_decision);
      if (side === 'on') spansPerTraced = (spans - before) / answer.decisions;
      console.log(`pass ${pass + 1} ${side}: ${Math.round(answer.ns_per_decision)} ns CPU per decision (rounds ${answer.rounds.join(' / ')})`);
    }
  }
  sink.close();
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
  const off = median(results.off);
  const on = median(results.on);
  console.log(
    JSON.stringify({ off_ns: Math.round(off), on_ns: Math.round(on), added_ns: Math.round(on - off), on_over_off: Number((on / off).toFixed(2)), spans_received_per_traced_decision: Number(spansPerTraced.toFixed(3)) }),
  );
}

const childSide = argOf('child', '');
if (childSide === 'off' || childSide === 'on') await child(childSide);
else await parent();
