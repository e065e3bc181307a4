import { Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { BreakerState } from '../redis/circuit-breaker.js';
import type { MasterState } from '../redis/master-health.js';
import { INTERNAL_ERROR_TRANSPORTS, internalErrorCount } from './internal-errors.js';
import { PlainCounter, PlainHistogram, ReadCounter, SeriesRow, type Series } from './plain-metrics.js';
import type { LapseReason, LeaseEvents } from '../lease/types.js';
import type { DecisionEvent, Operation } from '../decision/decision-service.js';
import type { Decision } from '../model/decision.js';
import type { LeaseTotals } from '../schema/server-info.js';
import type { RlqsStatus } from '../schema/server-info.js';
import type { RlqsEvents } from '../lease/rlqs-stream.js';
import { rlqsMetrics } from './rlqs-metrics.js';

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

export type Outcome = 'allowed' | 'denied' | 'shadow';
export const OUTCOMES: readonly Outcome[] = ['allowed', 'denied', 'shadow'];

/** An outcome as its index in OUTCOMES: the hot path counts into per-outcome arrays, not by name. */
export type OutcomeIndex = 0 | 1 | 2;
export const ALLOWED: OutcomeIndex = 0;
export const DENIED: OutcomeIndex = 1;
export const SHADOW: OutcomeIndex = 2;

/** The label value every value past the cap is reported as. */
export const OTHER_LABEL = 'other';

export interface MetricsOptions {
  /** Distinct request-derived label values (per label) that keep their own series. RL_METRICS_LABEL_CAP; default 1000. */
  labelCap?: number;
  /** Longer values are reported as `other`, so a huge tenant id cannot pin memory. Default 256. */
  maxLabelLength?: number;
  /** Node process metrics (CPU, memory, event loop lag, GC) on the same registry. Default true. */
  defaultMetrics?: boolean;
}

/** The operations of `rl_decisions_total`, each with its zero series from the start. */
const OPERATIONS = ['check', 'acquire', 'release', 'refund'] as const satisfies readonly Operation[];

/** An operation's index in OPERATIONS (-1 for any other): comparisons of interned literals, no lookup. */
function operationIndex(operation: string): number {
  return operation === 'check' ? 0 : operation === 'acquire' ? 1 : operation === 'release' ? 2 : operation === 'refund' ? 3 : -1;
}

/** Sub-millisecond decisions are the norm; the tail up to 1 s is what an outage looks like. */
export const DECISION_DURATION_BUCKETS = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
];

/**
 * A bounded allow-list of label values: the first `cap` distinct values are admitted and keep their
 * own value; every later one maps to `other`. Memory is bounded by cap × maxLength.
 */
export class LabelAllowList {
  private readonly admitted = new Set<string>();

  constructor(
    readonly cap: number,
    private readonly maxLength = 256,
  ) {
    if (!Number.isInteger(cap) || cap < 0) throw new RangeError(`label cap must be a non-negative integer, got ${cap}`);
  }

  label(value: string): string {
    if (this.admitted.has(value)) return value;
    if (value.length > this.maxLength || this.admitted.size >= this.cap) return OTHER_LABEL;
    this.admitted.add(value);
    return value;
  }

  get size(): number {
    return this.admitted.size;
  }
}

/** What the decision answered: ALLOWED or DENIED (every decision is exactly one). */
export function answeredOutcome(decision: Decision): OutcomeIndex {
  return decision.allowed ? ALLOWED : DENIED;
}

/**
 * Decisions counted by a series of rl_decisions_total (or a metric labelled the same way): each decision is
 * allowed or denied once, and `shadow` overlaps them (docs/reference.md "Actions over the limit"), so it is left out.
 */
export function decisionsCounted(values: readonly { labels: Partial<Record<string, string | number>>; value: number }[]): number {
  let sum = 0;
  for (const v of values) if (v.labels.outcome !== 'shadow') sum += v.value;
  return sum;
}

/** True when a shadow policy (beside an enforcing one, or answering alone) would have limited the decision. */
export function shadowLimited(event: DecisionEvent): boolean {
  return event.shadow?.limited === true;
}

/**
 * The per-outcome SeriesRows of a `(label, outcome)` counter, one row per label value, so counting a
 * decision is one Map lookup under a string V8 has usually hashed before (a policy id comes from the
 * compiled policy) and an array index, instead of building and hashing a `label\0outcome` key. With an
 * allow-list, only the values it admits get a cached row (memory stays bounded by its cap); every other
 * value reaches the shared `other` row after the same allow-list check as before.
 */
class OutcomeRows {
  private readonly rows = new Map<string, SeriesRow>();
  private overflow: SeriesRow | undefined;

  constructor(
    private readonly counter: PlainCounter,
    private readonly allowList?: LabelAllowList,
  ) {}

  row(value: string): SeriesRow {
    return this.rows.get(value) ?? this.add(value);
  }

  private add(value: string): SeriesRow {
    const label = this.allowList ? this.allowList.label(value) : value;
    // `label === value` for an admitted value and for a literal "other": both always map to their own
    // label, so caching them is safe.
    if (label !== value) return (this.overflow ??= new SeriesRow(this.counter, label, OUTCOMES));
    const row = new SeriesRow(this.counter, label, OUTCOMES);
    this.rows.set(value, row);
    return row;
  }
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

    const counter = (name: string, help: string, labelNames: string[] = []) => new PlainCounter(name, help, labelNames, registry);
    this.decisions = counter(
      'rl_decisions_total',
      'Decisions made, by operation (check, acquire, release, refund) and outcome: allowed or denied (what was answered; their sum is every decision), and shadow (decisions a shadow policy would have limited, also counted as allowed or denied).',
      ['operation', 'outcome'],
    );
    this.duration = new PlainHistogram(
      'rl_decision_duration_seconds',
      'Time to make one decision (policy match and counter store), in seconds.',
      DECISION_DURATION_BUCKETS,
      registry,
    );
    this.cacheHits = counter('rl_policy_cache_hits_total', 'Decisions that found a matching policy in the compiled in-memory policy snapshot.').at();
    this.cacheMisses = counter(
      'rl_policy_cache_misses_total',
      'Decisions that found no matching policy in the compiled in-memory policy snapshot.',
    ).at();
    this.storeErrors = counter(
      'rl_counter_store_errors_total',
      'Counter store operations that failed (error, timeout, circuit open).',
    ).at();
    this.denyCacheHits = counter(
      'rl_deny_cache_hits_total',
      'Checks (and peeks) answered from the deny cache: a standing refusal of the same counter and cost, no counter store call (Redis mode).',
    ).at();
    this.ignoredFields = counter(
      'rl_request_ignored_fields_total',
      'Unknown RequestContext fields that decisions ignored (each named in that decision\'s metadata.ignored_fields): usually a misspelt field.',
    ).at();
    this.invalidationFailures = counter(
      'rl_invalidation_failures_total',
      'Sidecar invalidation notifications given up (attempts exhausted, or dropped from a full queue).',
    ).at();
    this.failureMode = counter(
      'rl_failure_mode_decisions_total',
      "Decisions made by a policy's failure_mode because the counter store could not answer.",
      ['mode'],
    );
    this.tenantDecisions = counter(
      'rl_tenant_decisions_total',
      `Decisions per tenant_id and outcome; the first ${cap} distinct tenants keep their own series, later ones are "other".`,
      ['tenant', 'outcome'],
    );
    this.policyDecisions = counter(
      'rl_policy_decisions_total',
      `Decisions per policy: allowed or denied for the deciding policy, shadow for a shadow policy that would have limited; capped at ${cap} distinct policy ids, later ones are "other".`,
      ['policy_id', 'outcome'],
    );
    this.leaseRefills = counter('rl_lease_refills_total', 'Takes of units from a lease parent, by level (process, region).', ['level']);
    this.leaseReturned = counter('rl_lease_units_returned_total', 'Unspent lease units given back to the parent, by level (process, region).', ['level']);
    this.leaseLapsed = counter(
      'rl_lease_units_lapsed_total',
      `Lease units neither admitted nor given back, per policy and reason (window_ended, hold_expired, holder_lost, parent_unreachable); capped at ${cap} distinct policy ids, later ones are "other".`,
      ['policy_id', 'reason'],
    );
    this.leaseWait = new PlainHistogram(
      'rl_lease_parent_wait_seconds',
      'Decisions that waited for a lease refill: how long, in seconds.',
      DECISION_DURATION_BUCKETS,
      registry,
    );
    this.leasePolicies = new LabelAllowList(cap, options.maxLabelLength);
    this.layerCompensations = counter(
      'rl_layer_compensations_total',
      `Give-backs of a refused decision over several layers: what one layer's counter took (another Redis Cluster slot, a process lease, a global budget) while another refused, per policy; capped at ${cap} distinct policy ids, later ones are "other".`,
      ['policy_id'],
    );
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
