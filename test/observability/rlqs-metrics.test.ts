import { expect } from 'chai';
import { Metrics } from '../../src/observability/metrics.js';

describe('RLQS metrics', () => {
  it('exposes streams, buckets, units held, reports, assignments by strategy, abandons, unsupported winners and lapsed units', async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const events = metrics.rlqsEvents(() => ({ streams: 2, buckets: 3, units_held: 4 }));
    events.report!();
    events.report!();
    events.assigned!('token_bucket');
    events.assigned!('deny_all');
    events.abandoned!();
    events.unsupported!();
    events.lapsed!('checkout', 5, 'holder_lost');
    const text = await metrics.exposition();
    for (const line of [
      'rl_rlqs_streams 2',
      'rl_rlqs_buckets 3',
      'rl_rlqs_units_held 4',
      'rl_rlqs_reports_total 2',
      'rl_rlqs_assignments_total{strategy="token_bucket"} 1',
      'rl_rlqs_assignments_total{strategy="deny_all"} 1',
      'rl_rlqs_assignments_total{strategy="allow_all"} 0',
      'rl_rlqs_abandoned_total 1',
      'rl_rlqs_unsupported_total 1',
      'rl_lease_units_lapsed_total{policy_id="checkout",reason="holder_lost"} 5',
    ]) {
      expect(text).to.include(line);
    }
    expect(metrics.leaseTotals().units_lapsed_by_reason).to.deep.equal({ holder_lost: 5 });
  });
});
