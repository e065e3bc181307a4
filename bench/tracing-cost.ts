import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFields } from '../test/support/protobuf-wire.js';
import { round } from './lib/stats.js';
import { stopChild } from './lib/proc.js';
import {
  alternateMany,
  check,
  cpuCapacityRatio,
  finish,
  httpSide,
  loadNotes,
  measureHttp,
  startServer,
  warmHttp,
  type Context,
  type ScenarioResult,
} from './lib/scenario-kit.js';

/**
 * What traces cost a decision (issue 24): scenario 1's server (memory counters, the HTTP fast path)
 * with tracing off, the same server exporting a span per decision (OTEL_TRACES_SAMPLER=always_on, OTLP
 * protobuf to a sink in this process), and the minimal node:http ceiling, measured alternately in one
 * run. Server CPU per request is the figure (the load generator caps throughput on this machine).
 * Targets: tracing off stays >= 0.85 of the ceiling (scenario 1's target: no tracing code runs);
 * tracing on is reported, with the spans the sink received per request (the batch processor drops
 * spans when its queue is full, which would understate the cost: the queue is sized so it does not).
 */
export async function tracingCost(ctx: Context, id: number): Promise<ScenarioResult> {
  const sink = await startSink();
  const tracingEnv = {
    OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
    OTEL_TRACES_SAMPLER: 'always_on',
    OTEL_BSP_MAX_QUEUE_SIZE: '200000',
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '2048',
    OTEL_BSP_SCHEDULE_DELAY: '200',
  };
  const [off, on, ceiling] = await Promise.all([startServer('rl-http'), startServer('rl-http', [], [], tracingEnv), startServer('ceiling-http')]);
  try {
    ctx.log(`  rl-http tracing off, rl-http tracing on (always_on, OTLP protobuf) and the node:http ceiling, alternately (${ctx.settings.http.rounds} rounds)`);
    await warmHttp(ctx, [off.port, on.port, ceiling.port]);
    const spansBefore = sink.spans();
    const [offRuns, onRuns, ceilingRuns] = await alternateMany(ctx.settings.http.rounds, [
      () => measureHttp(ctx, off.child, off.port, { warm: true }),
      () => measureHttp(ctx, on.child, on.port, { warm: true }),
      () => measureHttp(ctx, ceiling.child, ceiling.port, { warm: true }),
    ]);
    // Every span of the measured runs has been handed to the exporter once the next batch is out.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const onRequests = onRuns.all.reduce((sum, run) => sum + run.result.requests, 0);
    const spansPerRequest = (sink.spans() - spansBefore) / Math.max(1, onRequests);
    const subject = { ...httpSide('rl HTTP check, tracing on (always_on, every span exported)', onRuns.median), rounds_throughput_per_s: onRuns.rounds };
    const baseline = { ...httpSide('rl HTTP check, tracing off (no OTLP endpoint)', offRuns.median), rounds_throughput_per_s: offRuns.rounds };
    const ceilingSide = { ...httpSide('minimal node:http ceiling', ceilingRuns.median), rounds_throughput_per_s: ceilingRuns.rounds };
    const offToCeiling = cpuCapacityRatio(baseline, ceilingSide) ?? NaN;
    const onToOff = cpuCapacityRatio(subject, baseline) ?? NaN;
    const usOn = onRuns.median.server_cpu_us_per_request;
    const usOff = offRuns.median.server_cpu_us_per_request;
    return finish({
      id,
      key: 'tracing_cost',
      name: 'HTTP check, tracing on vs off',
      subject,
      baseline,
      ratio: onToOff,
      ratio_meaning: 'server CPU per request, tracing off / tracing on (1 = tracing costs nothing); median rounds of alternating runs',
      target: 'tracing off >= 0.85 of the minimal node:http ceiling in server CPU per request; tracing on: reported',
      checks: [check('server CPU per request, tracing off vs the ceiling (ceiling µs / off µs)', offToCeiling, '>=', 0.85, 'x')],
      notes: loadNotes(subject, baseline, ceilingSide),
      details: {
        ceiling: ceilingSide,
        cpu_us_per_decision: { off: usOff, on: usOn, added_by_tracing: round(usOn - usOff) },
        spans_exported_per_request: round(spansPerRequest),
        exporter: 'OTLP/HTTP protobuf (the default protocol) to a node:http sink in the load-generator process',
      },
    });
  } finally {
    await Promise.all([stopChild(off.child), stopChild(on.child), stopChild(ceiling.child)]);
    await sink.close();
  }
}

/** An OTLP/HTTP sink: answers every export 200 and counts the spans by their protobuf Span messages' trace ids. */
async function startSink() {
  let spans = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      spans += countSpans(Buffer.concat(chunks));
      res.writeHead(200, { 'content-type': 'application/x-protobuf' });
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans: () => spans,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Spans in an ExportTraceServiceRequest: resource_spans (1) → scope_spans (2) → spans (2), by field number. */
function countSpans(body: Buffer): number {
  let count = 0;
  for (const resourceSpans of readFields(body).get(1) ?? []) {
    for (const scopeSpans of readFields(resourceSpans as Buffer).get(2) ?? []) count += readFields(scopeSpans as Buffer).get(2)?.length ?? 0;
  }
  return count;
}
