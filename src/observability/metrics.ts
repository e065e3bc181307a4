import { Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { BreakerState } from '../redis/circuit-breaker.js';
import type { MasterState } from '../redis/master-health.js';
import { INTERNAL_ERROR_TRANSPORTS, internalErrorCount } from './internal-errors.js';
import { PlainCounter, PlainHistogram, ReadCounter, SeriesRow, type Series } from './plain-metrics.js';
import type { LapseReason, LeaseEvents } from '../lease/types.js';
import type { DecisionEvent } from '../decision/decision-service.js';
import type { LeaseTotals } from '../schema/server-info.js';
import type { RlqsStatus } from '../schema/server-info.js';
import type { RlqsEvents } from '../lease/rlqs-stream.js';
import { rlqsMetrics } from './rlqs-metrics.js';
import {
  DECISION_DURATION_BUCKETS,
  LabelAllowList,
  OPERATIONS,
  OUTCOMES,
  OutcomeRows,
  SHADOW,
  answeredOutcome,
  operationIndex,
  shadowLimited,
} from './metric-outcomes.js';

export {
  ALLOWED,
  DECISION_DURATION_BUCKETS,
  DENIED,
  LabelAllowList,
  OTHER_LABEL,
  OUTCOMES,
  SHADOW,
  answeredOutcome,
  decisionsCounted,
  shadowLimited,
  type Outcome,
  type OutcomeIndex,
} from './metric-outcomes.js';

/**
 * Prometheus metrics of README "Observability", on the service's OWN prom-client Registry (never the
 * global one, so tests and embedders can hold several instances side by side).
 *
 * Outcomes (docs/reference.md "Actions over the limit"; the same rule feeds analytics, see `answeredOutcome`):
 * - `allowed` counts every decision answered `allowed: true`, `denied` every other one: each decision is
 *   exactly one of them, so allowed + denied = total.
 * - `shadow` counts decisions a shadow policy would have limited, whatever the enforced outcome (a
 *   shadow-only answer that would have limited, or a shadow policy evaluated beside an enforcing one that
 *   would have limited). It is a series of its own beside the other two, never subtracted from them: a
 *   decision can be counted `allowed` and `shadow`. Sums over `outcome` therefore double-count shadow;
 *   a total is `outcome=~"allowed|denied"`.
 *
 * Per-policy series (`rl_policy_decisions_total`): the deciding policy (`matched_policy_id`) counts the
 * decision as allowed or denied, by the answer; the shadow policy (beside an enforcing one, or answering
 * alone) counts `shadow` when it would have limited. Refunds count in `rl_decisions_total` only (operation
 * `refund`), as analytics skips them. Decisions without a matching policy add no
 * per-policy series; decisions without a `tenant_id` add no per-tenant series (both are in
 * `rl_decisions_total`).
 *
 * Cardinality: label values that come from requests (tenant, policy_id) pass a `LabelAllowList`: the
 * first `labelCap` distinct values keep their own series, every later one (and any value longer than
 * `maxLabelLength`) is reported as `other`.
 */

export interface MetricsOptions {
  /** Distinct request-derived label values (per label) that keep their own series. RL_METRICS_LABEL_CAP; default 1000. */
  labelCap?: number;
  /** Longer values are reported as `other`, so a huge tenant id cannot pin memory. Default 256. */
  maxLabelLength?: number;
  /** Node process metrics (CPU, memory, event loop lag, GC) on the same registry. Default true. */
  defaultMetrics?: boolean;
}

/** A counter on `registry`. */
function counterOn(registry: Registry): (name: string, help: string, labelNames?: string[]) => PlainCounter {
  return (name, help, labelNames = []) => new PlainCounter(name, help, labelNames, registry);
}

/** The decision series, registered in the order /metrics lists them. */
function decisionSeries(registry: Registry, cap: number) {
  const counter = counterOn(registry);
  const decisions = counter(
    'rl_decisions_total',
    'Decisions made, by operation (check, acquire, release, refund) and outcome: allowed or denied (what was answered; their sum is every decision), and shadow (decisions a shadow policy would have limited, also counted as allowed or denied).',
    ['operation', 'outcome'],
  );
  const duration = new PlainHistogram(
    'rl_decision_duration_seconds',
    'Time to make one decision (policy match and counter store), in seconds.',
    DECISION_DURATION_BUCKETS,
    registry,
  );
  const cacheHits = counter('rl_policy_cache_hits_total', 'Decisions that found a matching policy in the compiled in-memory policy snapshot.').at();
  const cacheMisses = counter(
    'rl_policy_cache_misses_total',
    'Decisions that found no matching policy in the compiled in-memory policy snapshot.',
  ).at();
  const storeErrors = counter(
    'rl_counter_store_errors_total',
    'Counter store operations that failed (error, timeout, circuit open).',
  ).at();
  const denyCacheHits = counter(
    'rl_deny_cache_hits_total',
    'Checks (and peeks) answered from the deny cache: a standing refusal of the same counter and cost, no counter store call (Redis mode).',
  ).at();
  const ignoredFields = counter(
    'rl_request_ignored_fields_total',
    'Unknown RequestContext fields that decisions ignored (each named in that decision\'s metadata.ignored_fields): usually a misspelt field.',
  ).at();
  const invalidationFailures = counter(
    'rl_invalidation_failures_total',
    'Sidecar invalidation notifications given up (attempts exhausted, or dropped from a full queue).',
  ).at();
  const failureMode = counter(
    'rl_failure_mode_decisions_total',
    "Decisions made by a policy's failure_mode because the counter store could not answer.",
    ['mode'],
  );
  const tenantDecisions = counter(
    'rl_tenant_decisions_total',
    `Decisions per tenant_id and outcome; the first ${cap} distinct tenants keep their own series, later ones are "other".`,
    ['tenant', 'outcome'],
  );
  const policyDecisions = counter(
    'rl_policy_decisions_total',
    `Decisions per policy: allowed or denied for the deciding policy, shadow for a shadow policy that would have limited; capped at ${cap} distinct policy ids, later ones are "other".`,
    ['policy_id', 'outcome'],
  );
  return { decisions, duration, cacheHits, cacheMisses, storeErrors, denyCacheHits, ignoredFields, invalidationFailures, failureMode, tenantDecisions, policyDecisions };
}

/** The lease and layer series, registered after the decision series. */
function leaseSeries(registry: Registry, cap: number) {
  const counter = counterOn(registry);
  const leaseRefills = counter('rl_lease_refills_total', 'Takes of units from a lease parent, by level (process, region).', ['level']);
  const leaseReturned = counter('rl_lease_units_returned_total', 'Unspent lease units given back to the parent, by level (process, region).', ['level']);
  const leaseLapsed = counter(
    'rl_lease_units_lapsed_total',
    `Lease units neither admitted nor given back, per policy and reason (window_ended, hold_expired, holder_lost, parent_unreachable); capped at ${cap} distinct policy ids, later ones are "other".`,
    ['policy_id', 'reason'],
  );
  const leaseWait = new PlainHistogram(
    'rl_lease_parent_wait_seconds',
    'Decisions that waited for a lease refill: how long, in seconds.',
    DECISION_DURATION_BUCKETS,
    registry,
  );
  const layerCompensations = counter(
    'rl_layer_compensations_total',
    `Give-backs of a refused decision over several layers: what one layer's counter took (another Redis Cluster slot, a process lease, a global budget) while another refused, per policy; capped at ${cap} distinct policy ids, later ones are "other".`,
    ['policy_id'],
  );
  return { leaseRefills, leaseReturned, leaseLapsed, leaseWait, layerCompensations };
}

const BREAKER_STATE_VALUES: Record<BreakerState, number> = { closed: 0, half_open: 1, open: 2 };

export class Metrics {
  readonly registry: Registry;
  private readonly decisions: PlainCounter;
  private readonly duration: PlainHistogram;
  private readonly cacheHits: Series;
  private readonly cacheMisses: Series;
  private readonly storeErrors: Series;
  private readonly denyCacheHits: Series;
  private readonly ignoredFields: Series;
  private readonly invalidationFailures: Series;
  private readonly failureMode: PlainCounter;
  private readonly tenantDecisions: PlainCounter;
  private readonly policyDecisions: PlainCounter;
  /** rl_decisions_total per operation, in OPERATIONS order; `otherOperations` for any other (none today). */
  private readonly operationRows: readonly SeriesRow[];
  private readonly otherOperations: OutcomeRows;
  private readonly tenantRows: OutcomeRows;
  private readonly policyRows: OutcomeRows;
  private readonly leaseRefills: PlainCounter;
  private readonly leaseReturned: PlainCounter;
  private readonly leaseLapsed: PlainCounter;
  private readonly leaseWait: PlainHistogram;
  private readonly leasePolicies: LabelAllowList;
  private readonly layerCompensations: PlainCounter;

  constructor(options: MetricsOptions = {}) {
    const cap = options.labelCap ?? 1000;
    const registry = (this.registry = new Registry());
    // Each series registers as it is made: /metrics lists them in this order.
    ({
      decisions: this.decisions,
      duration: this.duration,
      cacheHits: this.cacheHits,
      cacheMisses: this.cacheMisses,
      storeErrors: this.storeErrors,
      denyCacheHits: this.denyCacheHits,
      ignoredFields: this.ignoredFields,
      invalidationFailures: this.invalidationFailures,
      failureMode: this.failureMode,
      tenantDecisions: this.tenantDecisions,
      policyDecisions: this.policyDecisions,
    } = decisionSeries(registry, cap));
    ({
      leaseRefills: this.leaseRefills,
      leaseReturned: this.leaseReturned,
      leaseLapsed: this.leaseLapsed,
      leaseWait: this.leaseWait,
      layerCompensations: this.layerCompensations,
    } = leaseSeries(registry, cap));
    this.leasePolicies = new LabelAllowList(cap, options.maxLabelLength);
    for (const level of ['process', 'region']) {
      this.leaseRefills.at(level);
      this.leaseReturned.at(level);
    }
    new ReadCounter(
      'rl_internal_errors_total',
      'Requests answered HTTP 500 or gRPC INTERNAL, by transport: each is a bug, logged with its stack (process-wide).',
      'transport',
      INTERNAL_ERROR_TRANSPORTS,
      internalErrorCount,
      registry,
    );
    // Zero series for the fixed label values, so dashboards see them before the first decision.
    for (const operation of OPERATIONS) {
      for (const outcome of OUTCOMES) this.decisions.at(operation, outcome);
    }
    for (const mode of ['fail_open', 'fail_closed']) this.failureMode.at(mode);
    this.operationRows = OPERATIONS.map((operation) => new SeriesRow(this.decisions, operation, OUTCOMES));
    this.otherOperations = new OutcomeRows(this.decisions);
    this.tenantRows = new OutcomeRows(this.tenantDecisions, new LabelAllowList(cap, options.maxLabelLength));
    this.policyRows = new OutcomeRows(this.policyDecisions, new LabelAllowList(cap, options.maxLabelLength));

    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  }

  /** Called for every decision (via ObservabilityRecorder): no allocation, no key built per series. */
  recordDecision(event: DecisionEvent): void {
    const { decision } = event;
    const outcome = answeredOutcome(decision);
    const shadow = shadowLimited(event);
    const operation = operationIndex(event.operation);
    const operationRow = operation >= 0 ? this.operationRows[operation] : this.otherOperations.row(event.operation);
    operationRow.inc(outcome);
    if (shadow) operationRow.inc(SHADOW);
    // Every decision looks its policy up in the compiled in-memory snapshot: a hit found a policy, a
    // miss found none (traffic no policy covers, worth watching after a policy change).
    const policyId = decision.matched_policy_id;
    this.countPolicyCache(policyId !== '');
    if (Number.isFinite(event.durationSeconds) && event.durationSeconds >= 0) this.duration.observe(event.durationSeconds);
    if (event.failureMode !== undefined) this.failureMode.inc(event.failureMode);
    // A refund gives units back: counted under its operation above, but per tenant and per policy (no
    // operation label there) it is not a decision allowed, as in analytics.
    if (event.operation === 'refund') return;
    const tenant = event.ctx.tenant_id;
    if (tenant !== undefined && tenant !== '') {
      const tenantRow = this.tenantRows.row(tenant);
      tenantRow.inc(outcome);
      if (shadow) tenantRow.inc(SHADOW);
    }
    if (policyId !== '') this.policyRows.row(policyId).inc(outcome);
    if (shadow) this.policyRows.row(event.shadow!.policyId).inc(SHADOW);
  }

  /** One policy lookup in the compiled snapshot: `hit` when a policy matched. */
  countPolicyCache(hit: boolean): void {
    (hit ? this.cacheHits : this.cacheMisses).value++;
  }

  /** One failed counter store operation (error, timeout or open circuit). */
  countCounterStoreError(): void {
    this.storeErrors.value++;
  }

  /** One give-back of a refused decision over several layers, to `policyId`'s counter. */
  countLayerCompensation(policyId: string): void {
    this.layerCompensations.at(this.leasePolicies.label(policyId)).value++;
  }

  /** One check answered from the deny cache instead of the counter store. */
  countDenyCacheHit(): void {
    this.denyCacheHits.value++;
  }

  /** `count` unknown fields one decision's request carried (and the decision ignored). */
  countIgnoredFields(count: number): void {
    this.ignoredFields.value += count;
  }

  /** The hooks of one lease holder (src/lease): level `process` or `region`, for this policy. */
  leaseEvents(level: 'process' | 'region', policyId: string): LeaseEvents {
    const refills = this.leaseRefills.at(level);
    const returned = this.leaseReturned.at(level);
    const policy = this.leasePolicies.label(policyId);
    return {
      refilled: () => {
        refills.value++;
      },
      returned: (units) => {
        returned.value += units;
      },
      lapsed: (units, reason) => {
        this.leaseLapsed.at(policy, reason).value += units;
      },
      failed: () => this.countCounterStoreError(),
      waited: (seconds) => this.leaseWait.observe(seconds),
    };
  }

  /**
   * Lease totals so far, every level and policy together (the dashboard's overview, /rl/v1/info): takes,
   * units returned, units lapsed (also by the series' `reason` label),
   * and decisions that waited for a refill. Read from the series, like a scrape, never from the holders.
   */
  leaseTotals(): LeaseTotals {
    const sum = (counter: PlainCounter) => counter.get().values.reduce((total, series) => total + series.value, 0);
    const byReason: Record<string, number> = {};
    for (const { labels, value } of this.leaseLapsed.get().values) {
      const reason = String((labels as Record<string, unknown>).reason);
      byReason[reason] = (byReason[reason] ?? 0) + value;
    }
    return {
      refills: sum(this.leaseRefills),
      units_returned: sum(this.leaseReturned),
      units_lapsed: sum(this.leaseLapsed),
      units_lapsed_by_reason: byReason,
      waits: this.leaseWait.observations,
    };
  }

  /** Envoy's rate limit quota service: its series (rlqs-metrics.ts); its lapsed units count with the leases'. */
  rlqsEvents(status: () => RlqsStatus): RlqsEvents {
    const lapsed = (policyId: string, units: number, reason: LapseReason) => {
      this.leaseLapsed.at(this.leasePolicies.label(policyId), reason).value += units;
    };
    return { ...rlqsMetrics(this.registry, status, lapsed), failed: () => this.countCounterStoreError() };
  }

  /** One invalidation notification to a sidecar that was given up. */
  countInvalidationFailure(): void {
    this.invalidationFailures.value++;
  }

  /**
   * Redis mode: each counter store master's breaker (`rl_counter_store_breaker_state{master}`, 0 closed,
   * 1 half open, 2 open) and calls in flight (`rl_counter_store_pending_calls{master}`), read at scrape time.
   */
  watchCounterStoreMasters(states: () => MasterState[]): void {
    const gauge = (name: string, help: string, aggregator: 'max' | 'sum', value: (state: MasterState) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ['master'],
        registers: [this.registry],
        aggregator,
        collect() {
          this.reset();
          for (const state of states()) this.set({ master: state.master }, value(state));
        },
      });
    gauge(
      'rl_counter_store_breaker_state',
      "Circuit breaker of each counter store master (Redis Cluster: host:port; one Redis or Sentinel: master): 0 closed, 1 half open, 2 open.",
      'max',
      (state) => BREAKER_STATE_VALUES[state.breaker],
    );
    gauge('rl_counter_store_pending_calls', 'Counter store script calls sent to each master and not yet answered.', 'sum', (state) => state.pending_calls);
  }

  /** The Prometheus text exposition of every metric on this registry. */
  exposition(): Promise<string> {
    return this.registry.metrics();
  }

  /** `text/plain; version=0.0.4; charset=utf-8`. */
  get contentType(): string {
    return this.registry.contentType;
  }
}
