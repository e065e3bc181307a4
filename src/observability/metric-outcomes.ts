import type { DecisionEvent, Operation } from '../decision/decision-service.js';
import type { Decision } from '../model/decision.js';
import { PlainCounter, SeriesRow } from './plain-metrics.js';

/** The outcomes decisions are counted under, the label allow-list, and the rows the hot path counts into (metrics.ts). */

export type Outcome = 'allowed' | 'denied' | 'shadow';
export const OUTCOMES: readonly Outcome[] = ['allowed', 'denied', 'shadow'];

/** An outcome as its index in OUTCOMES: the hot path counts into per-outcome arrays, not by name. */
export type OutcomeIndex = 0 | 1 | 2;
export const ALLOWED: OutcomeIndex = 0;
export const DENIED: OutcomeIndex = 1;
export const SHADOW: OutcomeIndex = 2;

/** The label value every value past the cap is reported as. */
export const OTHER_LABEL = 'other';

/** The operations of `rl_decisions_total`, each with its zero series from the start. */
export const OPERATIONS = ['check', 'acquire', 'release', 'refund'] as const satisfies readonly Operation[];

/** An operation's index in OPERATIONS (-1 for any other): comparisons of interned literals, no lookup. */
export function operationIndex(operation: string): number {
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
export class OutcomeRows {
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
