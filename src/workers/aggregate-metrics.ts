import { AggregatorRegistry, type Registry } from 'prom-client';
import { decisionsCounted } from '../observability/metrics.js';
import type { MetricsSnapshot } from './messages.js';

/** One worker's registry, with the slot (1..N) it runs in: a restarted worker takes its slot back. */
export interface WorkerSnapshot {
  slot: number;
  metrics: MetricsSnapshot;
}

export interface GroupFacts {
  /** Workers ready now. */
  workers: number;
  /** Workers restarted after an unexpected exit since the primary started. */
  restarts: number;
}

/**
 * The group's /metrics: every worker's registry merged by each metric's own prom-client aggregator
 * (`sum` for our counters and histogram buckets; process gauges as prom-client declares them: memory
 * summed, event-loop lag averaged, start time omitted), plus three series only the primary knows:
 * `rl_workers`, `rl_worker_restarts_total` and `rl_worker_decisions_total{worker}` (how the kernel
 * and the primary spread the load; bounded by the number of slots).
 */
export function aggregateGroupMetrics(snapshots: readonly WorkerSnapshot[], facts: GroupFacts): Registry {
  const group: MetricsSnapshot = [
    { name: 'rl_workers', help: 'Worker processes ready to serve (RL_WORKERS).', type: 'gauge', aggregator: 'sum', values: [{ labels: {}, value: facts.workers }] },
    {
      name: 'rl_worker_restarts_total',
      help: 'Workers restarted by the primary after an unexpected exit.',
      type: 'counter',
      aggregator: 'sum',
      values: [{ labels: {}, value: facts.restarts }],
    },
    {
      name: 'rl_worker_decisions_total',
      help: 'Decisions made by each worker since it started (rl_decisions_total by worker slot).',
      type: 'counter',
      aggregator: 'sum',
      values: [...snapshots]
        .sort((a, b) => a.slot - b.slot)
        .map(({ slot, metrics }) => ({ labels: { worker: String(slot) }, value: decisionsOf(metrics) })),
    },
  ];
  // The cast: prom-client's typings of the JSON form are wrong (see MetricsSnapshot).
  return AggregatorRegistry.aggregate([...snapshots.map((s) => s.metrics), group] as never);
}

function decisionsOf(metrics: MetricsSnapshot): number {
  const decisions = metrics.find((m) => m.name === 'rl_decisions_total');
  return decisions ? decisionsCounted(decisions.values) : 0;
}
