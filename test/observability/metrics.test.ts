import { expect } from 'chai';
import { register as globalRegistry } from 'prom-client';
import { LabelAllowList, Metrics } from '../../src/observability/metrics.js';
import { internalErrorCount } from '../../src/observability/internal-errors.js';
import { Analytics } from '../../src/analytics/analytics.js';
import { ObservabilityRecorder } from '../../src/analytics/recorder.js';
import { event, allowedBy, deniedBy, shadowOnly, fixedEventSequence } from '../support/decision-events.js';

/** The value of one sample line `name{labels} value` of the exposition (labels in declaration order). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const rendered = Object.entries(labels).map(([k, v]) => `${k}="${v}"`).join(',');
  const prefix = rendered ? `${name}{${rendered}} ` : `${name} `;
  const line = text.split('\n').find((l) => l.startsWith(prefix));
  return line === undefined ? undefined : Number(line.slice(prefix.length));
}

function seriesOf(text: string, name: string): string[] {
  return text.split('\n').filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
}

const NAMES = [
  'rl_decisions_total',
  'rl_decision_duration_seconds',
  'rl_policy_cache_hits_total',
  'rl_policy_cache_misses_total',
  'rl_counter_store_errors_total',
  'rl_deny_cache_hits_total',
  'rl_request_ignored_fields_total',
  'rl_failure_mode_decisions_total',
  'rl_tenant_decisions_total',
  'rl_policy_decisions_total',
];

describe('observability/metrics', () => {
  it('exposes every metric name the README lists with its type, on its own registry', async () => {
    const m = new Metrics({ defaultMetrics: false });
    m.recordDecision(allowedBy('p1', { tenant_id: 't1' }));
    const text = await m.exposition();
    for (const name of NAMES) {
      const type = name === 'rl_decision_duration_seconds' ? 'histogram' : 'counter';
      expect(text, name).to.include(`# TYPE ${name} ${type}\n`);
    }
    expect(m.contentType).to.match(/^text\/plain; version=0\.0\.4/);
    expect(await globalRegistry.metrics()).not.to.include('rl_decisions_total');
  });

  it('counts decisions by operation and outcome, and per tenant and policy', async () => {
    const m = new Metrics({ defaultMetrics: false });
    m.recordDecision(allowedBy('p1', { tenant_id: 'acme' }));
    m.recordDecision(allowedBy('p1', { tenant_id: 'acme' }));
    m.recordDecision(deniedBy('p1', { tenant_id: 'acme' }));
    m.recordDecision(event({ operation: 'acquire', ctx: { tenant_id: 'globex' }, decision: { matched_policy_id: 'lease', reason: 'lease_acquired' } }));
    m.recordDecision(event({ operation: 'release', decision: { matched_policy_id: 'lease', reason: 'lease_released' } }));
    m.recordDecision(event({ decision: { reason: 'no_matching_policy' } }));
    const text = await m.exposition();
    expect(sample(text, 'rl_decisions_total', { operation: 'check', outcome: 'allowed' })).to.equal(3);
    expect(sample(text, 'rl_decisions_total', { operation: 'check', outcome: 'denied' })).to.equal(1);
    expect(sample(text, 'rl_decisions_total', { operation: 'check', outcome: 'shadow' })).to.equal(0);
    expect(sample(text, 'rl_decisions_total', { operation: 'acquire', outcome: 'allowed' })).to.equal(1);
    expect(sample(text, 'rl_decisions_total', { operation: 'release', outcome: 'allowed' })).to.equal(1);
    expect(sample(text, 'rl_tenant_decisions_total', { tenant: 'acme', outcome: 'allowed' })).to.equal(2);
    expect(sample(text, 'rl_tenant_decisions_total', { tenant: 'acme', outcome: 'denied' })).to.equal(1);
    expect(sample(text, 'rl_tenant_decisions_total', { tenant: 'globex', outcome: 'allowed' })).to.equal(1);
    // Decisions without tenant_id or matching policy add no per-tenant / per-policy series.
    expect(seriesOf(text, 'rl_tenant_decisions_total')).to.have.length(3);
    expect(sample(text, 'rl_policy_decisions_total', { policy_id: 'p1', outcome: 'allowed' })).to.equal(2);
    expect(sample(text, 'rl_policy_decisions_total', { policy_id: 'p1', outcome: 'denied' })).to.equal(1);
    expect(sample(text, 'rl_policy_decisions_total', { policy_id: 'lease', outcome: 'allowed' })).to.equal(2);
    expect(seriesOf(text, 'rl_policy_decisions_total')).to.have.length(3);
    expect(sample(text, 'rl_decision_duration_seconds_count')).to.equal(6);
    expect(sample(text, 'rl_decision_duration_seconds_bucket', { le: '0.00005' })).to.equal(0);
    expect(sample(text, 'rl_decision_duration_seconds_bucket', { le: '0.00025' })).to.equal(6);
  });

  it('counts allowed and denied by the answer, and shadow as its own series beside them (one meaning each)', async () => {
    const m = new Metrics({ defaultMetrics: false });
    m.recordDecision(shadowOnly('sh', true, { tenant_id: 't' })); // shadow-only answer, would have limited: allowed + shadow
    m.recordDecision(shadowOnly('sh', false, { tenant_id: 't' })); // shadow-only answer, within limit: allowed
    // Enforcing policy allows, shadow beside it would have limited: allowed + shadow.
    m.recordDecision(event({ ctx: { tenant_id: 't' }, decision: { matched_policy_id: 'enf' }, shadow: { policyId: 'sh', limited: true } }));
    // Enforcing policy allows, shadow beside it within limit: allowed.
    m.recordDecision(event({ ctx: { tenant_id: 't' }, decision: { matched_policy_id: 'enf' }, shadow: { policyId: 'sh', limited: false } }));
    // Enforcing policy denies, shadow would have limited too: denied + shadow.
    m.recordDecision(event({ ctx: { tenant_id: 't' }, decision: { matched_policy_id: 'enf', allowed: false, action: 'deny' }, shadow: { policyId: 'sh', limited: true } }));
    const text = await m.exposition();
    expect(sample(text, 'rl_decisions_total', { operation: 'check', outcome: 'allowed' })).to.equal(4);
    expect(sample(text, 'rl_decisions_total', { operation: 'check', outcome: 'denied' })).to.equal(1);
    expect(sample(text, 'rl_decisions_total', { operation: 'check', outcome: 'shadow' })).to.equal(3);
    expect(sample(text, 'rl_tenant_decisions_total', { tenant: 't', outcome: 'allowed' })).to.equal(4);
    expect(sample(text, 'rl_tenant_decisions_total', { tenant: 't', outcome: 'denied' })).to.equal(1);
    expect(sample(text, 'rl_tenant_decisions_total', { tenant: 't', outcome: 'shadow' })).to.equal(3);
    // The shadow policy: allowed for the two shadow-only answers it gave, shadow for the three it would have limited.
    expect(sample(text, 'rl_policy_decisions_total', { policy_id: 'sh', outcome: 'allowed' })).to.equal(2);
    expect(sample(text, 'rl_policy_decisions_total', { policy_id: 'sh', outcome: 'shadow' })).to.equal(3);
    expect(sample(text, 'rl_policy_decisions_total', { policy_id: 'sh', outcome: 'denied' })).to.equal(undefined);
    expect(sample(text, 'rl_policy_decisions_total', { policy_id: 'enf', outcome: 'allowed' })).to.equal(2);
    expect(sample(text, 'rl_policy_decisions_total', { policy_id: 'enf', outcome: 'denied' })).to.equal(1);
    expect(sample(text, 'rl_policy_decisions_total', { policy_id: 'enf', outcome: 'shadow' })).to.equal(undefined);
  });

  it('counts a refund under its operation only: per policy and per tenant, like analytics, it is not a decision allowed', async () => {
    const m = new Metrics({ defaultMetrics: false });
    const a = new Analytics();
    const events = [allowedBy('p', { tenant_id: 't' }), event({ operation: 'refund', ctx: { tenant_id: 't' }, decision: { matched_policy_id: 'p', reason: 'refunded' } })];
    for (const e of events) new ObservabilityRecorder(m, a).record(e);
    const text = await m.exposition();
    expect(sample(text, 'rl_decisions_total', { operation: 'refund', outcome: 'allowed' })).to.equal(1);
    expect(sample(text, 'rl_policy_decisions_total', { policy_id: 'p', outcome: 'allowed' })).to.equal(a.summary().by_policy[0].allowed).and.to.equal(1);
    expect(sample(text, 'rl_tenant_decisions_total', { tenant: 't', outcome: 'allowed' })).to.equal(1);
  });

  it('counts failure-mode decisions, policy cache hits and misses, and counter store errors', async () => {
    const m = new Metrics({ defaultMetrics: false });
    let text = await m.exposition();
    expect(sample(text, 'rl_failure_mode_decisions_total', { mode: 'fail_open' })).to.equal(0);
    expect(sample(text, 'rl_policy_cache_hits_total')).to.equal(0);
    m.recordDecision(event({ decision: { matched_policy_id: 'p', reason: 'counter_store_unavailable' }, failureMode: 'fail_open' }));
    m.recordDecision(event({ decision: { matched_policy_id: 'p', allowed: false, action: 'deny', reason: 'counter_store_unavailable' }, failureMode: 'fail_closed' }));
    m.recordDecision(event({ decision: { matched_policy_id: 'p', allowed: false, action: 'deny', reason: 'counter_store_unavailable' }, failureMode: 'fail_closed' }));
    // A decision that found no policy in the compiled snapshot is a cache miss; the three above are hits.
    m.recordDecision(event({ decision: { matched_policy_id: '', reason: 'no_matching_policy' } }));
    m.countCounterStoreError();
    text = await m.exposition();
    expect(sample(text, 'rl_failure_mode_decisions_total', { mode: 'fail_open' })).to.equal(1);
    expect(sample(text, 'rl_failure_mode_decisions_total', { mode: 'fail_closed' })).to.equal(2);
    expect(sample(text, 'rl_policy_cache_hits_total')).to.equal(3);
    expect(sample(text, 'rl_policy_cache_misses_total')).to.equal(1);
    expect(sample(text, 'rl_counter_store_errors_total')).to.equal(1);
  });

  it('includes default process metrics on the same registry when asked', async () => {
    const m = new Metrics();
    const text = await m.exposition();
    expect(text).to.include('process_cpu_user_seconds_total');
    expect(text).to.include('nodejs_eventloop_lag_seconds');
  });

  it('caps tenant label cardinality: 100,000 distinct tenants stay within the default cap of 1000', async function () {
    this.timeout(60_000);
    const m = new Metrics({ defaultMetrics: false }); // RL_METRICS_LABEL_CAP default
    const cap = 1000;
    const outcomes = 3;
    for (let i = 0; i < 100_000; i++) {
      m.recordDecision(i % 10 === 0 ? deniedBy(`policy-${i}`, { tenant_id: `tenant-${i}` }) : allowedBy(`policy-${i}`, { tenant_id: `tenant-${i}` }));
    }
    const text = await m.exposition();
    const tenantSeries = seriesOf(text, 'rl_tenant_decisions_total');
    expect(tenantSeries.length).to.be.at.most(cap + outcomes * 1);
    expect(tenantSeries.filter((l) => l.includes('tenant="other"'))).to.have.length.within(1, outcomes);
    expect(sample(text, 'rl_tenant_decisions_total', { tenant: 'tenant-0', outcome: 'denied' })).to.equal(1);
    // Nothing is lost: the per-tenant series still add up to every decision.
    const sum = tenantSeries.reduce((s, l) => s + Number(l.split(' ').pop()), 0);
    expect(sum).to.equal(100_000);
    expect(sample(text, 'rl_tenant_decisions_total', { tenant: 'other', outcome: 'allowed' })! + sample(text, 'rl_tenant_decisions_total', { tenant: 'other', outcome: 'denied' })!).to.equal(99_000);
    // policy_id is capped the same way.
    expect(seriesOf(text, 'rl_policy_decisions_total').length).to.be.at.most(cap + outcomes);
    expect(text).to.include('policy_id="other"');
  });

  it('honours a configured cap, keeps admitted values, and reports over-long values as other', async () => {
    const m = new Metrics({ defaultMetrics: false, labelCap: 2, maxLabelLength: 16 });
    for (const t of ['a', 'b', 'c', 'a', 'x'.repeat(17), 'd', 'b']) m.recordDecision(allowedBy('p', { tenant_id: t }));
    const text = await m.exposition();
    expect(sample(text, 'rl_tenant_decisions_total', { tenant: 'a', outcome: 'allowed' })).to.equal(2);
    expect(sample(text, 'rl_tenant_decisions_total', { tenant: 'b', outcome: 'allowed' })).to.equal(2);
    expect(sample(text, 'rl_tenant_decisions_total', { tenant: 'other', outcome: 'allowed' })).to.equal(3);
    expect(seriesOf(text, 'rl_tenant_decisions_total')).to.have.length(3);

    const list = new LabelAllowList(1, 8);
    expect(list.label('toolongvalue')).to.equal('other');
    expect(list.size).to.equal(0);
    expect(list.label('ok')).to.equal('ok');
    expect(list.label('next')).to.equal('other');
    expect(list.label('ok')).to.equal('ok');
  });
  it('renders exactly this exposition for a fixed sequence of events (names, HELP/TYPE, label cap, series order)', async () => {
    // Pinned byte for byte: the hot path keeps series in its own structures, and /metrics must not notice.
    const m = new Metrics({ defaultMetrics: false, labelCap: 3, maxLabelLength: 32 });
    for (const e of fixedEventSequence()) m.recordDecision(e);
    m.countCounterStoreError();
    m.countDenyCacheHit();
    m.countDenyCacheHit();
    m.countLayerCompensation('policy-0');
    m.countLayerCompensation('policy-0');
    m.countIgnoredFields(2);
    m.countIgnoredFields(1);
    m.countInvalidationFailure();
    const lease = m.leaseEvents('process', 'policy-0');
    lease.refilled!(40);
    lease.refilled!(0);
    lease.returned!(5);
    lease.lapsed!(2, 'window_ended');
    lease.waited!(0.003);
    m.leaseEvents('region', 'policy-9').refilled!(7);
    
    // rl_internal_errors_total is process-wide (other tests of this process may have counted): its values are read here.
    const internal = `
# HELP rl_internal_errors_total Requests answered HTTP 500 or gRPC INTERNAL, by transport: each is a bug, logged with its stack (process-wide).
# TYPE rl_internal_errors_total counter
rl_internal_errors_total{transport="http"} ${internalErrorCount('http')}
rl_internal_errors_total{transport="grpc"} ${internalErrorCount('grpc')}
`;
    expect(await m.exposition()).to.equal(PINNED_EXPOSITION + internal);
  });
});

/** What the metrics of `fixedEventSequence()` render: allowed and denied by the answer, shadow beside them (one meaning per outcome, docs/operations.md). */
const PINNED_EXPOSITION = `# HELP rl_decisions_total Decisions made, by operation (check, acquire, release, refund) and outcome: allowed or denied (what was answered; their sum is every decision), and shadow (decisions a shadow policy would have limited, also counted as allowed or denied).
# TYPE rl_decisions_total counter
rl_decisions_total{operation="check",outcome="allowed"} 21
rl_decisions_total{operation="check",outcome="denied"} 7
rl_decisions_total{operation="check",outcome="shadow"} 4
rl_decisions_total{operation="acquire",outcome="allowed"} 7
rl_decisions_total{operation="acquire",outcome="denied"} 1
rl_decisions_total{operation="acquire",outcome="shadow"} 1
rl_decisions_total{operation="release",outcome="allowed"} 3
rl_decisions_total{operation="release",outcome="denied"} 1
rl_decisions_total{operation="release",outcome="shadow"} 0
rl_decisions_total{operation="refund",outcome="allowed"} 0
rl_decisions_total{operation="refund",outcome="denied"} 0
rl_decisions_total{operation="refund",outcome="shadow"} 0

# HELP rl_decision_duration_seconds Time to make one decision (policy match and counter store), in seconds.
# TYPE rl_decision_duration_seconds histogram
rl_decision_duration_seconds_bucket{le="0.00005"} 8
rl_decision_duration_seconds_bucket{le="0.0001"} 12
rl_decision_duration_seconds_bucket{le="0.00025"} 16
rl_decision_duration_seconds_bucket{le="0.0005"} 20
rl_decision_duration_seconds_bucket{le="0.001"} 20
rl_decision_duration_seconds_bucket{le="0.0025"} 20
rl_decision_duration_seconds_bucket{le="0.005"} 20
rl_decision_duration_seconds_bucket{le="0.01"} 20
rl_decision_duration_seconds_bucket{le="0.025"} 20
rl_decision_duration_seconds_bucket{le="0.05"} 24
rl_decision_duration_seconds_bucket{le="0.1"} 24
rl_decision_duration_seconds_bucket{le="0.25"} 24
rl_decision_duration_seconds_bucket{le="0.5"} 24
rl_decision_duration_seconds_bucket{le="1"} 28
rl_decision_duration_seconds_bucket{le="+Inf"} 32
rl_decision_duration_seconds_sum 14.962559999999996
rl_decision_duration_seconds_count 32

# HELP rl_policy_cache_hits_total Decisions that found a matching policy in the compiled in-memory policy snapshot.
# TYPE rl_policy_cache_hits_total counter
rl_policy_cache_hits_total 36

# HELP rl_policy_cache_misses_total Decisions that found no matching policy in the compiled in-memory policy snapshot.
# TYPE rl_policy_cache_misses_total counter
rl_policy_cache_misses_total 4

# HELP rl_counter_store_errors_total Counter store operations that failed (error, timeout, circuit open).
# TYPE rl_counter_store_errors_total counter
rl_counter_store_errors_total 1

# HELP rl_deny_cache_hits_total Checks (and peeks) answered from the deny cache: a standing refusal of the same counter and cost, no counter store call (Redis mode).
# TYPE rl_deny_cache_hits_total counter
rl_deny_cache_hits_total 2

# HELP rl_request_ignored_fields_total Unknown RequestContext fields that decisions ignored (each named in that decision's metadata.ignored_fields): usually a misspelt field.
# TYPE rl_request_ignored_fields_total counter
rl_request_ignored_fields_total 3

# HELP rl_invalidation_failures_total Sidecar invalidation notifications given up (attempts exhausted, or dropped from a full queue).
# TYPE rl_invalidation_failures_total counter
rl_invalidation_failures_total 1

# HELP rl_failure_mode_decisions_total Decisions made by a policy's failure_mode because the counter store could not answer.
# TYPE rl_failure_mode_decisions_total counter
rl_failure_mode_decisions_total{mode="fail_open"} 2
rl_failure_mode_decisions_total{mode="fail_closed"} 1

# HELP rl_tenant_decisions_total Decisions per tenant_id and outcome; the first 3 distinct tenants keep their own series, later ones are "other".
# TYPE rl_tenant_decisions_total counter
rl_tenant_decisions_total{tenant="tenant-0",outcome="allowed"} 6
rl_tenant_decisions_total{tenant="other",outcome="denied"} 7
rl_tenant_decisions_total{tenant="tenant-2",outcome="allowed"} 4
rl_tenant_decisions_total{tenant="tenant-2",outcome="shadow"} 1
rl_tenant_decisions_total{tenant="other",outcome="allowed"} 19
rl_tenant_decisions_total{tenant="other",outcome="shadow"} 2
rl_tenant_decisions_total{tenant="tenant-0",outcome="denied"} 1
rl_tenant_decisions_total{tenant="tenant-0",outcome="shadow"} 2

# HELP rl_policy_decisions_total Decisions per policy: allowed or denied for the deciding policy, shadow for a shadow policy that would have limited; capped at 3 distinct policy ids, later ones are "other".
# TYPE rl_policy_decisions_total counter
rl_policy_decisions_total{policy_id="policy-0",outcome="allowed"} 5
rl_policy_decisions_total{policy_id="policy-2",outcome="denied"} 3
rl_policy_decisions_total{policy_id="policy-4",outcome="allowed"} 7
rl_policy_decisions_total{policy_id="other",outcome="shadow"} 5
rl_policy_decisions_total{policy_id="other",outcome="allowed"} 12
rl_policy_decisions_total{policy_id="policy-0",outcome="denied"} 2
rl_policy_decisions_total{policy_id="policy-2",outcome="allowed"} 4
rl_policy_decisions_total{policy_id="other",outcome="denied"} 3

# HELP rl_lease_refills_total Takes of units from a lease parent, by level (process, region).
# TYPE rl_lease_refills_total counter
rl_lease_refills_total{level="process"} 2
rl_lease_refills_total{level="region"} 1

# HELP rl_lease_units_returned_total Unspent lease units given back to the parent, by level (process, region).
# TYPE rl_lease_units_returned_total counter
rl_lease_units_returned_total{level="process"} 5
rl_lease_units_returned_total{level="region"} 0

# HELP rl_lease_units_lapsed_total Lease units neither admitted nor given back, per policy and reason (window_ended, hold_expired, holder_lost, parent_unreachable); capped at 3 distinct policy ids, later ones are "other".
# TYPE rl_lease_units_lapsed_total counter
rl_lease_units_lapsed_total{policy_id="policy-0",reason="window_ended"} 2

# HELP rl_lease_parent_wait_seconds Decisions that waited for a lease refill: how long, in seconds.
# TYPE rl_lease_parent_wait_seconds histogram
rl_lease_parent_wait_seconds_bucket{le="0.00005"} 0
rl_lease_parent_wait_seconds_bucket{le="0.0001"} 0
rl_lease_parent_wait_seconds_bucket{le="0.00025"} 0
rl_lease_parent_wait_seconds_bucket{le="0.0005"} 0
rl_lease_parent_wait_seconds_bucket{le="0.001"} 0
rl_lease_parent_wait_seconds_bucket{le="0.0025"} 0
rl_lease_parent_wait_seconds_bucket{le="0.005"} 1
rl_lease_parent_wait_seconds_bucket{le="0.01"} 1
rl_lease_parent_wait_seconds_bucket{le="0.025"} 1
rl_lease_parent_wait_seconds_bucket{le="0.05"} 1
rl_lease_parent_wait_seconds_bucket{le="0.1"} 1
rl_lease_parent_wait_seconds_bucket{le="0.25"} 1
rl_lease_parent_wait_seconds_bucket{le="0.5"} 1
rl_lease_parent_wait_seconds_bucket{le="1"} 1
rl_lease_parent_wait_seconds_bucket{le="+Inf"} 1
rl_lease_parent_wait_seconds_sum 0.003
rl_lease_parent_wait_seconds_count 1

# HELP rl_layer_compensations_total Give-backs of a refused decision over several layers: what one layer's counter took (another Redis Cluster slot, a process lease, a global budget) while another refused, per policy; capped at 3 distinct policy ids, later ones are "other".
# TYPE rl_layer_compensations_total counter
rl_layer_compensations_total{policy_id="policy-0"} 2
`;
