import { expect } from 'chai';
import { Metrics } from '../../src/observability/metrics.js';
import { aggregateGroupMetrics } from '../../src/workers/aggregate-metrics.js';
import type { MetricsSnapshot } from '../../src/workers/messages.js';
import { fixedEventSequence } from '../support/decision-events.js';
import { samples } from './group.js';

const snapshot = async (metrics: Metrics) => (await metrics.registry.getMetricsAsJSON()) as unknown as MetricsSnapshot;

/**
 * The service's own series (rl_*), without the three the primary adds and without the process-wide
 * rl_internal_errors_total (every registry of one process reports the same count, like process metrics).
 */
function serviceSamples(exposition: string): Map<string, number> {
  return new Map([...samples(exposition)].filter(([k]) => k.startsWith('rl_') && !k.startsWith('rl_worker') && !k.startsWith('rl_internal_errors_total')));
}

describe('aggregateGroupMetrics', () => {
  it('the group of two workers reads as one process that made every decision: counters and histogram summed', async () => {
    const events = fixedEventSequence();
    const [a, b, whole] = [new Metrics(), new Metrics(), new Metrics()];
    events.forEach((event, i) => {
      (i % 3 === 0 ? a : b).recordDecision(event);
      whole.recordDecision(event);
    });
    a.countCounterStoreError();
    whole.countCounterStoreError();

    const merged = serviceSamples(await aggregateGroupMetrics([{ slot: 1, metrics: await snapshot(a) }, { slot: 2, metrics: await snapshot(b) }], { workers: 2, restarts: 0 }).metrics());
    const expected = serviceSamples(await whole.exposition());
    expect([...merged.keys()].sort()).to.deep.equal([...expected.keys()].sort());
    for (const [series, value] of expected) {
      // Float sums in another order may differ in the last bits.
      if (series.endsWith('_sum')) expect(merged.get(series), series).to.be.closeTo(value, 1e-9);
      else expect(merged.get(series), series).to.equal(value);
    }
    expect(expected.get('rl_decision_duration_seconds_count')).to.be.above(0);
  });

  it('adds the group series: workers ready, restarts, and decisions per worker slot', async () => {
    const [a, b] = [new Metrics({ defaultMetrics: false }), new Metrics({ defaultMetrics: false })];
    const events = fixedEventSequence();
    events.slice(0, 7).forEach((e) => a.recordDecision(e));
    events.slice(7).forEach((e) => b.recordDecision(e));
    const merged = samples(await aggregateGroupMetrics([{ slot: 2, metrics: await snapshot(b) }, { slot: 1, metrics: await snapshot(a) }], { workers: 2, restarts: 3 }).metrics());
    expect(merged.get('rl_workers')).to.equal(2);
    expect(merged.get('rl_worker_restarts_total')).to.equal(3);
    expect(merged.get('rl_worker_decisions_total{worker="1"}')).to.equal(7);
    expect(merged.get('rl_worker_decisions_total{worker="2"}')).to.equal(events.length - 7);
  });

  it("merges Node's process metrics by prom-client's own rules: memory summed, start time omitted, version once", async () => {
    const [a, b] = [new Metrics(), new Metrics()];
    const [sa, sb] = [await snapshot(a), await snapshot(b)];
    const rss = (s: MetricsSnapshot) => s.find((m) => m.name === 'process_resident_memory_bytes')!.values[0].value;
    const exposition = await aggregateGroupMetrics([{ slot: 1, metrics: sa }, { slot: 2, metrics: sb }], { workers: 2, restarts: 0 }).metrics();
    const merged = samples(exposition);
    expect(merged.get('process_resident_memory_bytes')).to.equal(rss(sa) + rss(sb));
    expect(merged.has('process_start_time_seconds')).to.equal(false);
    expect([...merged.keys()].filter((k) => k.startsWith('nodejs_version_info'))).to.have.length(1);
    expect(exposition).to.include('# TYPE rl_decision_duration_seconds histogram');
  });
});
