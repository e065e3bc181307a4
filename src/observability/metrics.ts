import { Registry, collectDefaultMetrics } from 'prom-client';
import { PlainCounter, PlainHistogram, type Series } from './plain-metrics.js';
import type { DecisionEvent, Operation } from '../decision/decision-service.js';

/**
 * Prometheus metrics of CONTRACT.md ("Metrics"), on the service's OWN prom-client Registry (never the
 * global one, so tests and embedders can hold several instances side by side).
 *
 * Outcome of a decision (`outcome` label; the same rule feeds analytics, see `decisionOutcome`):
 * - `denied`  when `decision.allowed` is false: the caller was really refused, and that is never hidden.
 * - `shadow`  when the decision was answered in shadow mode (`shadow_mode` true: a shadow policy and no
 *             enforcing one), or when an enforcing decision allowed the request and the shadow policy
 *             evaluated beside it would have limited it ("allowed only because the shadow policy is not
 *             enforced yet").
 * - `allowed` otherwise.
 * Every decision has exactly one outcome, so allowed + denied + shadow = total.
 *
 * Per-policy series (`rl_policy_decisions_total`): the deciding policy with its own outcome (allowed or
 * denied by `decision.allowed`; `shadow` for a shadow-only answer), and the shadow policy evaluated beside
 * an enforcing one as its own series with outcome `shadow`. Decisions without a matching policy add no
 * per-policy series; decisions without a `tenant_id` add no per-tenant series (both are in
 * `rl_decisions_total`).
 *
 * Cardinality: label values that come from requests (tenant, policy_id) pass a `LabelAllowList`: the
 * first `labelCap` distinct values keep their own series, every later one (and any value longer than
 * `maxLabelLength`) is reported as `other`.
 */

export type Outcome = 'allowed' | 'denied' | 'shadow';
export const OUTCOMES: readonly Outcome[] = ['allowed', 'denied', 'shadow'];

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

/** The outcome of one decision; see the module comment. */
export function decisionOutcome(event: DecisionEvent): Outcome {
  const { decision } = event;
  if (!decision.allowed) return 'denied';
  if (decision.shadow_mode || event.shadow?.limited === true) return 'shadow';
  return 'allowed';
}

/**
 * The policies one decision counts for, each with its own outcome: the deciding policy, and the shadow
 * policy evaluated beside an enforcing one (outcome `shadow`). A shadow-only answer counts once.
 */
export function policyOutcomes(event: DecisionEvent): [policyId: string, outcome: Outcome][] {
  const { decision } = event;
  const result: [string, Outcome][] = [];
  if (decision.matched_policy_id !== '') {
    const own: Outcome = decision.shadow_mode ? 'shadow' : decision.allowed ? 'allowed' : 'denied';
    result.push([decision.matched_policy_id, own]);
  }
  if (event.shadow && !(decision.shadow_mode && event.shadow.policyId === decision.matched_policy_id)) {
    result.push([event.shadow.policyId, 'shadow']);
  }
  return result;
}

export class Metrics {
  readonly registry: Registry;
  private readonly decisions: PlainCounter;
  private readonly duration: PlainHistogram;
  private readonly cacheHits: Series;
  private readonly cacheMisses: Series;
  private readonly storeErrors: Series;
  private readonly invalidationFailures: Series;
  private readonly failureMode: PlainCounter;
  private readonly tenantDecisions: PlainCounter;
  private readonly policyDecisions: PlainCounter;
  private readonly tenants: LabelAllowList;
  private readonly policies: LabelAllowList;

  constructor(options: MetricsOptions = {}) {
    const cap = options.labelCap ?? 1000;
    this.tenants = new LabelAllowList(cap, options.maxLabelLength);
    this.policies = new LabelAllowList(cap, options.maxLabelLength);
    const registry = (this.registry = new Registry());
    const registers = [registry];

    const counter = (name: string, help: string, labelNames: string[] = []) => new PlainCounter(name, help, labelNames, registry);
    this.decisions = counter(
      'rl_decisions_total',
      'Decisions made, by operation (check, acquire, release) and outcome (allowed, denied, shadow).',
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
      `Decisions per policy and outcome (shadow policies evaluated beside an enforcing one count as outcome "shadow"); capped at ${cap} distinct policy ids, later ones are "other".`,
      ['policy_id', 'outcome'],
    );
    // Zero series for the fixed label values, so dashboards see them before the first decision.
    for (const operation of ['check', 'acquire', 'release'] satisfies Operation[]) {
      for (const outcome of OUTCOMES) this.decisions.at(operation, outcome);
    }
    for (const mode of ['fail_open', 'fail_closed']) this.failureMode.at(mode);

    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  }

  /** Called for every decision (via ObservabilityRecorder). */
  recordDecision(event: DecisionEvent): void {
    const outcome = decisionOutcome(event);
    this.decisions.inc(event.operation, outcome);
    // Every decision looks its policy up in the compiled in-memory snapshot: a hit found a policy, a
    // miss found none (traffic no policy covers, worth watching after a policy change).
    this.countPolicyCache(event.decision.matched_policy_id !== '');
    if (Number.isFinite(event.durationSeconds) && event.durationSeconds >= 0) this.duration.observe(event.durationSeconds);
    if (event.failureMode !== undefined) this.failureMode.inc(event.failureMode);
    const tenant = event.ctx.tenant_id;
    if (tenant !== undefined && tenant !== '') this.tenantDecisions.inc(this.tenants.label(tenant), outcome);
    for (const [policyId, policyOutcome] of policyOutcomes(event)) {
      this.policyDecisions.inc(this.policies.label(policyId), policyOutcome);
    }
  }

  /** One policy lookup in the compiled snapshot: `hit` when a policy matched. */
  countPolicyCache(hit: boolean): void {
    (hit ? this.cacheHits : this.cacheMisses).value++;
  }

  /** One failed counter store operation (error, timeout or open circuit). */
  countCounterStoreError(): void {
    this.storeErrors.value++;
  }

  /** One invalidation notification to a sidecar that was given up. */
  countInvalidationFailure(): void {
    this.invalidationFailures.value++;
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
