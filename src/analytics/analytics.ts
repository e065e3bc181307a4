import type { DecisionEvent } from '../decision/decision-service.js';
import type { AnalyticsSummaryBody } from '../schema/analytics.js';
import { DENIED, answeredOutcome, type OutcomeIndex } from '../observability/metrics.js';
import { SpaceSaving, compareStrings, tagItem } from './space-saving.js';

/**
 * Analytics of decision events (README "Observability" `GET /analytics/summary`), in BOUNDED memory:
 *
 * - totals: `total`, `allowed`, `denied`, `shadow`, with the outcome rule of metrics.ts (docs/reference.md
 *   "Actions over the limit"): allowed + denied = total; `shadow` counts the decisions a shadow policy would have
 *   limited, whatever was answered, so they are also in allowed or denied. They agree with `rl_decisions_total`.
 * - `by_action`: decisions per `decision.action` (a small server-defined set; capped at 64 names anyway).
 * - `by_policy`: `[{policy_id, total, allowed, denied, shadow}]`, sorted by total desc then policy_id asc,
 *   cut to `top`. The rule of `rl_policy_decisions_total`: the deciding policy counts the decision as
 *   allowed or denied, the shadow policy counts `shadow` when it would have limited; a row's `total` is the
 *   decisions the policy took part in, deciding or evaluated in shadow (so a busy shadow policy sorts high). The sum of by_policy
 *   totals may exceed `total` (shadow evaluations) or fall short of it (no matching policy).
 *   The first `policyCapacity` distinct policy ids (default 10,000) are counted exactly; later ones are
 *   folded into one row with policy_id `(other)`, which no real policy can have (ids cannot contain `(`).
 * - `top_tags`: the heavy hitters among `key=value` of every decision's `ctx.tags`, by Space-Saving
 *   (Metwally et al.) with a fixed number of entries (default 1,000): each tag occurrence is one unit.
 *   A reported count `c` with error `e` means the true count is in [c − e, c], and e ≤ N / capacity
 *   (N = tag occurrences seen). Every tag whose true count exceeds N / capacity is guaranteed reported.
 *   Tag keys and values longer than `maxTagLength` are cut (marked with `…`), so entries stay small.
 *
 * `since` is when counting started (construction), RFC 3339. `top` (when given) cuts both lists;
 * without it every tracked row is returned (at most policyCapacity + 1 and tagCapacity rows).
 *
 * Organisations (docs/tenants.md): with `byOrg`, every decision is also counted in a smaller
 * Analytics of its `org_id` (the first `orgCapacity` organisations seen), so a caller limited to
 * organisations gets a summary of its organisations' decisions alone (`summary(top, view)`), its
 * by_policy cut to the policies it reaches. Off unless some credential can be limited: it doubles the
 * counting per decision.
 */

export interface AnalyticsOptions {
  /** Clock in epoch milliseconds; `since` is read from it once, at construction. */
  now?: () => number;
  /** Entries of the heavy-hitters counter. Default 1000. */
  tagCapacity?: number;
  /** Policies counted exactly before folding into `(other)`. Default 10,000. */
  policyCapacity?: number;
  /** Longest tag key or value kept whole. Default 256. */
  maxTagLength?: number;
  /** Count each organisation's decisions too, for restricted callers' views. Default false. */
  byOrg?: boolean;
  /** Organisations counted apart (later ones are in the totals only). Default 1000. */
  orgCapacity?: number;
}

/** What a caller limited to organisations sees (analytics/org-view.ts builds it from the one org rule). */
export interface AnalyticsView {
  seesOrg(orgId: string): boolean;
  seesPolicy(policyId: string): boolean;
}

/** The answer's shape is the schema's (src/schema/analytics.ts, also the OpenAPI document's). */
export type AnalyticsSummary = AnalyticsSummaryBody;
export type PolicySummary = AnalyticsSummary['by_policy'][number];
export type TagCount = AnalyticsSummary['top_tags'][number];

export const OTHER_POLICY = '(other)';
const OTHER_ACTION = 'other';
const ACTION_CAPACITY = 64;

/** Decisions counted by outcome; the totals and every by_policy row. */
interface OutcomeCounts {
  total: number;
  allowed: number;
  denied: number;
  shadow: number;
}

function countAnswer(counts: OutcomeCounts, outcome: OutcomeIndex): void {
  if (outcome === DENIED) counts.denied++;
  else counts.allowed++;
}

export class Analytics {
  private readonly sinceIso: string;
  private readonly totals: OutcomeCounts = { total: 0, allowed: 0, denied: 0, shadow: 0 };
  /** Decisions per action, in a box per action so counting one is a single Map lookup. */
  private readonly actions = new Map<string, { count: number }>();
  private readonly policies = new Map<string, PolicySummary>();
  private readonly policyCapacity: number;
  private readonly maxTagLength: number;
  readonly tags: SpaceSaving;
  /** Per organisation (`byOrg`), each with a tenth of the capacities. */
  private readonly orgs: Map<string, Analytics> | undefined;
  private readonly orgCapacity: number;
  private readonly orgOptions: AnalyticsOptions;

  constructor(options: AnalyticsOptions = {}) {
    const now = options.now ?? Date.now;
    this.sinceIso = new Date(now()).toISOString();
    this.policyCapacity = options.policyCapacity ?? 10_000;
    this.maxTagLength = options.maxTagLength ?? 256;
    this.tags = new SpaceSaving(options.tagCapacity ?? 1000);
    this.orgs = options.byOrg ? new Map() : undefined;
    this.orgCapacity = options.orgCapacity ?? 1000;
    this.orgOptions = {
      now,
      maxTagLength: this.maxTagLength,
      tagCapacity: Math.max(1, Math.ceil(this.tags.capacity / 10)),
      policyCapacity: Math.max(1, Math.ceil(this.policyCapacity / 10)),
    };
  }

  /** Called for every decision (via ObservabilityRecorder): one Map lookup per action and per policy, two per tag. */
  record(event: DecisionEvent): void {
    const { decision } = event;
    const outcome = answeredOutcome(decision);
    const totals = this.totals;
    totals.total++;
    countAnswer(totals, outcome);
    (this.actions.get(decision.action) ?? this.addAction(decision.action)).count++;
    const decider = decision.matched_policy_id !== '' ? this.policyRow(decision.matched_policy_id) : undefined;
    if (decider) {
      decider.total++;
      countAnswer(decider, outcome);
    }
    const { shadow } = event;
    if (shadow !== undefined) {
      const row = this.policyRow(shadow.policyId);
      // A shadow-only answer's policy is the decider too: one decision, counted once in its total.
      if (row !== decider) row.total++;
      if (shadow.limited) {
        row.shadow++;
        totals.shadow++;
      }
    }

    const tags = event.ctx.tags;
    for (const key in tags) {
      if (!Object.prototype.hasOwnProperty.call(tags, key)) continue;
      this.tags.offer(cut(key, this.maxTagLength), cut(tags[key], this.maxTagLength));
    }
    if (this.orgs !== undefined && event.ctx.org_id !== undefined) this.orgAnalytics(event.ctx.org_id)?.record(event);
  }

  /** Everything, or with a `view` only the decisions of the organisations it sees, on the policies it sees. */
  summary(top?: number, view?: AnalyticsView): AnalyticsSummary {
    return view === undefined ? this.ownSummary(top) : this.viewSummary(view, top);
  }

  private ownSummary(top?: number): AnalyticsSummary {
    const limit = top ?? Number.POSITIVE_INFINITY;
    const byPolicy = [...this.policies.values()]
      .sort((a, b) => b.total - a.total || compareStrings(a.policy_id, b.policy_id))
      .slice(0, limit)
      .map((p) => ({ ...p }));
    const topTags = this.tags.top(limit).map(({ key, value, count }) => ({ key, value, count }));
    const byAction: Record<string, number> = {};
    for (const action of [...this.actions.keys()].sort(compareStrings)) byAction[action] = this.actions.get(action)!.count;
    return { since: this.sinceIso, ...this.totals, by_action: byAction, by_policy: byPolicy, top_tags: topTags };
  }

  /** The organisations' summaries merged: sums of counts (a tag's sum overstates by at most its parts' errors). */
  private viewSummary(view: AnalyticsView, top?: number): AnalyticsSummary {
    const merged: AnalyticsSummary = { since: this.sinceIso, total: 0, allowed: 0, denied: 0, shadow: 0, by_action: {}, by_policy: [], top_tags: [] };
    const policies = new Map<string, PolicySummary>();
    const tags = new Map<string, TagCount & { item: string }>();
    for (const [orgId, analytics] of this.orgs ?? []) {
      if (!view.seesOrg(orgId)) continue;
      const part = analytics.ownSummary();
      merged.total += part.total;
      merged.allowed += part.allowed;
      merged.denied += part.denied;
      merged.shadow += part.shadow;
      for (const [action, count] of Object.entries(part.by_action)) merged.by_action[action] = (merged.by_action[action] ?? 0) + count;
      for (const row of part.by_policy) {
        if (!view.seesPolicy(row.policy_id)) continue;
        const sum = policies.get(row.policy_id) ?? { policy_id: row.policy_id, total: 0, allowed: 0, denied: 0, shadow: 0 };
        policies.set(row.policy_id, { ...sum, total: sum.total + row.total, allowed: sum.allowed + row.allowed, denied: sum.denied + row.denied, shadow: sum.shadow + row.shadow });
      }
      for (const tag of part.top_tags) {
        const item = tagItem(tag.key, tag.value);
        const sum = tags.get(item);
        tags.set(item, { key: tag.key, value: tag.value, count: (sum?.count ?? 0) + tag.count, item });
      }
    }
    const limit = top ?? Number.POSITIVE_INFINITY;
    merged.by_action = Object.fromEntries(Object.entries(merged.by_action).sort(([a], [b]) => compareStrings(a, b)));
    merged.by_policy = [...policies.values()].sort((a, b) => b.total - a.total || compareStrings(a.policy_id, b.policy_id)).slice(0, limit);
    merged.top_tags = [...tags.values()]
      .sort((a, b) => b.count - a.count || compareStrings(a.item, b.item))
      .slice(0, limit)
      .map(({ key, value, count }) => ({ key, value, count }));
    return merged;
  }

  /** An organisation's own Analytics; undefined for a new one past `orgCapacity` (counted in the totals only). */
  private orgAnalytics(orgId: string): Analytics | undefined {
    let analytics = this.orgs!.get(orgId);
    if (analytics === undefined && this.orgs!.size < this.orgCapacity) {
      analytics = new Analytics(this.orgOptions);
      this.orgs!.set(orgId, analytics);
    }
    return analytics;
  }

  /** A new action's counter: its own while fewer than ACTION_CAPACITY actions are counted, else `other`'s. */
  private addAction(action: string): { count: number } {
    const name = this.actions.size < ACTION_CAPACITY ? action : OTHER_ACTION;
    let counter = this.actions.get(name);
    if (!counter) {
      counter = { count: 0 };
      this.actions.set(name, counter);
    }
    return counter;
  }

  /** The row of a policy (or of `(other)` past the capacity). */
  private policyRow(policyId: string): PolicySummary {
    let row = this.policies.get(policyId);
    if (!row) {
      const id = this.policies.size < this.policyCapacity ? policyId : OTHER_POLICY;
      row = this.policies.get(id);
      if (!row) {
        row = { policy_id: id, total: 0, allowed: 0, denied: 0, shadow: 0 };
        this.policies.set(id, row);
      }
    }
    return row;
  }
}

function cut(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max)}…`;
}
