import { Gauge, type Registry } from 'prom-client';
import type { RlqsStatus } from '../schema/server-info.js';
import type { RlqsEvents } from '../lease/rlqs-stream.js';
import type { LapseReason } from '../lease/types.js';
import { PlainCounter } from './plain-metrics.js';

const STRATEGIES = ['allow_all', 'deny_all', 'token_bucket'] as const;

/**
 * The series of Envoy's rate limit quota service on `registry`: rl_rlqs_streams, rl_rlqs_buckets and
 * rl_rlqs_units_held (read from `status` at scrape time), rl_rlqs_reports_total,
 * rl_rlqs_assignments_total{strategy}, rl_rlqs_abandoned_total and rl_rlqs_unsupported_total. Lapsed
 * units go to `lapsed`, the leases' own series.
 */
export function rlqsMetrics(registry: Registry, status: () => RlqsStatus, lapsed: (policyId: string, units: number, reason: LapseReason) => void): RlqsEvents {
  const gauges: [keyof RlqsStatus, string, string][] = [
    ['streams', 'rl_rlqs_streams', 'Open RLQS streams (StreamRateLimitQuotas), one per Envoy.'],
    ['buckets', 'rl_rlqs_buckets', 'Buckets of the open RLQS streams.'],
    ['units_held', 'rl_rlqs_units_held', 'Units taken from counters for Envoys and not yet reported spent (takes in flight included).'],
  ];
  for (const [field, name, help] of gauges) {
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(status()[field]);
      },
    });
  }
  const reports = new PlainCounter('rl_rlqs_reports_total', 'Bucket usage reports received on RLQS streams (one per bucket per message).', [], registry).at();
  const assignments = new PlainCounter('rl_rlqs_assignments_total', 'Quota assignments sent to Envoys, by strategy (allow_all, deny_all, token_bucket).', ['strategy'], registry);
  for (const strategy of STRATEGIES) assignments.at(strategy);
  const abandoned = new PlainCounter('rl_rlqs_abandoned_total', 'RLQS buckets abandoned after RL_RLQS_BUCKET_IDLE_SECS without a request reported.', [], registry).at();
  const unsupported = new PlainCounter(
    'rl_rlqs_unsupported_total',
    'RLQS assessments whose winner cannot be handed out (concurrency, sliding_window_log): assigned ALLOW_ALL.',
    [],
    registry,
  ).at();
  return {
    report: () => void reports.value++,
    assigned: (strategy) => void assignments.at(strategy).value++,
    abandoned: () => void abandoned.value++,
    unsupported: () => void unsupported.value++,
    lapsed,
  };
}
