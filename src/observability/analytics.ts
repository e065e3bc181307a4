import type { DecisionEvent } from '../decision/decision-service.js';
import { decisionOutcome, policyOutcomes, type Outcome } from './metrics.js';

/**
 * Analytics of decision events (spec §6, CONTRACT.md `GET /analytics/summary`), in BOUNDED memory:
 *
 * - totals: `total`, `allowed`, `denied`, `shadow`, with the outcome rule of `decisionOutcome` (metrics.ts),
 *   so allowed + denied + shadow = total and the numbers agree with `rl_decisions_total`.
 * - `by_action`: decisions per `decision.action` (a small server-defined set; capped at 64 names anyway).
 * - `by_policy`: `[{policy_id, total, allowed, denied, shadow}]`, sorted by total desc then policy_id asc,
 *   cut to `top`. A policy counts for the decisions it made, and a shadow policy evaluated beside an
 *   enforcing one counts as `shadow` (the same rule as `rl_policy_decisions_total`), so the sum of
 *   by_policy totals may exceed `total` (shadow evaluations) or fall short of it (no matching policy).
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
}

export interface PolicySummary {
  policy_id: string;
  total: number;
  allowed: number;
  denied: number;
  shadow: number;
}

export interface TagCount {
  key: string;
  value: string;
  count: number;
}

export interface AnalyticsSummary {
  since: string;
  total: number;
  allowed: number;
  denied: number;
  shadow: number;
  by_action: Record<string, number>;
  by_policy: PolicySummary[];
  top_tags: TagCount[];
}

export const OTHER_POLICY = '(other)';
const OTHER_ACTION = 'other';
const ACTION_CAPACITY = 64;

export class Analytics {
  private readonly sinceIso: string;
  private readonly totals = { total: 0, allowed: 0, denied: 0, shadow: 0 };
  private readonly actions = new Map<string, number>();
  private readonly policies = new Map<string, PolicySummary>();
  private readonly policyCapacity: number;
  private readonly maxTagLength: number;
  readonly tags: SpaceSaving<{ key: string; value: string }>;

  constructor(options: AnalyticsOptions = {}) {
    this.sinceIso = new Date((options.now ?? Date.now)()).toISOString();
    this.policyCapacity = options.policyCapacity ?? 10_000;
    this.maxTagLength = options.maxTagLength ?? 256;
    this.tags = new SpaceSaving(options.tagCapacity ?? 1000);
  }

  record(event: DecisionEvent): void {
    const outcome = decisionOutcome(event);
    this.totals.total++;
    this.totals[outcome]++;

    const action = event.decision.action;
    const actionKey = this.actions.has(action) || this.actions.size < ACTION_CAPACITY ? action : OTHER_ACTION;
    this.actions.set(actionKey, (this.actions.get(actionKey) ?? 0) + 1);

    for (const [policyId, policyOutcome] of policyOutcomes(event)) this.countPolicy(policyId, policyOutcome);

    const tags = event.ctx.tags;
    for (const key in tags) {
      if (!Object.prototype.hasOwnProperty.call(tags, key)) continue;
      const k = cut(key, this.maxTagLength);
      const v = cut(tags[key], this.maxTagLength);
      // Length-prefixed, so `a=b`+`c` and `a`+`b=c` stay distinct items.
      this.tags.offer(`${k.length}:${k}=${v}`, () => ({ key: k, value: v }));
    }
  }

  summary(top?: number): AnalyticsSummary {
    const limit = top ?? Number.POSITIVE_INFINITY;
    const byPolicy = [...this.policies.values()]
      .sort((a, b) => b.total - a.total || compareStrings(a.policy_id, b.policy_id))
      .slice(0, limit)
      .map((p) => ({ ...p }));
    const topTags = this.tags
      .top(limit)
      .map(({ data, count }) => ({ key: data.key, value: data.value, count }));
    const byAction: Record<string, number> = {};
    for (const action of [...this.actions.keys()].sort(compareStrings)) byAction[action] = this.actions.get(action)!;
    return { since: this.sinceIso, ...this.totals, by_action: byAction, by_policy: byPolicy, top_tags: topTags };
  }

  private countPolicy(policyId: string, outcome: Outcome): void {
    let row = this.policies.get(policyId);
    if (!row) {
      const id = this.policies.size < this.policyCapacity ? policyId : OTHER_POLICY;
      row = this.policies.get(id);
      if (!row) {
        row = { policy_id: id, total: 0, allowed: 0, denied: 0, shadow: 0 };
        this.policies.set(id, row);
      }
    }
    row.total++;
    row[outcome]++;
  }
}

function cut(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max)}…`;
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** One monitored item of the Space-Saving counter. Its count is its bucket's. */
interface Entry<T> {
  item: string;
  data: T;
  /** Overestimation bound: the count the item inherited when it took over an evicted slot. */
  error: number;
  bucket: Bucket<T>;
}

/** All entries with one count; buckets form a list in ascending count order (the Stream-Summary). */
interface Bucket<T> {
  count: number;
  entries: Set<Entry<T>>;
  prev: Bucket<T> | undefined;
  next: Bucket<T> | undefined;
}

export interface HeavyHitter<T> {
  item: string;
  data: T;
  count: number;
  error: number;
}

/**
 * Space-Saving heavy hitters with at most `capacity` entries, on the Stream-Summary structure
 * (buckets of equal count in a linked list), so each offer is O(1): no scan for the minimum.
 * Guarantees for N offers: every reported count c satisfies true ≤ c ≤ true + error and
 * error ≤ min count ≤ N / capacity; any item with true count > N / capacity is monitored.
 */
export class SpaceSaving<T> {
  private readonly entries = new Map<string, Entry<T>>();
  /** The bucket with the smallest count. */
  private head: Bucket<T> | undefined;
  private n = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  }

  /** Counts one occurrence of `item`; `data` is built only when the item takes a slot. */
  offer(item: string, data: () => T): void {
    this.n++;
    const existing = this.entries.get(item);
    if (existing) {
      this.increment(existing);
      return;
    }
    if (this.entries.size < this.capacity) {
      const first = this.head && this.head.count === 1 ? this.head : this.insertBucketBefore(this.head, 1);
      const entry: Entry<T> = { item, data: data(), error: 0, bucket: first };
      first.entries.add(entry);
      this.entries.set(item, entry);
      return;
    }
    // Full: the new item replaces one with the minimum count and inherits that count as its error.
    const min = this.head!;
    const victim: Entry<T> = min.entries.values().next().value!;
    this.entries.delete(victim.item);
    victim.item = item;
    victim.data = data();
    victim.error = min.count;
    this.entries.set(item, victim);
    this.increment(victim);
  }

  /** Items seen (N). */
  get offered(): number {
    return this.n;
  }

  /** Entries held: never more than `capacity`. */
  get size(): number {
    return this.entries.size;
  }

  /** The guaranteed bound on any count's overestimation: the minimum count when full, else 0. */
  get maxError(): number {
    return this.entries.size < this.capacity ? 0 : (this.head?.count ?? 0);
  }

  /** The `limit` highest counts, count desc then item asc. */
  top(limit = Number.POSITIVE_INFINITY): HeavyHitter<T>[] {
    const all: HeavyHitter<T>[] = [];
    for (const e of this.entries.values()) all.push({ item: e.item, data: e.data, count: e.bucket.count, error: e.error });
    all.sort((a, b) => b.count - a.count || compareStrings(a.item, b.item));
    return all.slice(0, limit);
  }

  /** The estimate for one item, when monitored. */
  get(item: string): HeavyHitter<T> | undefined {
    const e = this.entries.get(item);
    return e && { item: e.item, data: e.data, count: e.bucket.count, error: e.error };
  }

  private increment(entry: Entry<T>): void {
    const from = entry.bucket;
    const target = from.next && from.next.count === from.count + 1 ? from.next : this.insertBucketAfter(from, from.count + 1);
    from.entries.delete(entry);
    target.entries.add(entry);
    entry.bucket = target;
    if (from.entries.size === 0) this.unlink(from);
  }

  private insertBucketAfter(prev: Bucket<T>, count: number): Bucket<T> {
    const bucket: Bucket<T> = { count, entries: new Set(), prev, next: prev.next };
    if (prev.next) prev.next.prev = bucket;
    prev.next = bucket;
    return bucket;
  }

  private insertBucketBefore(next: Bucket<T> | undefined, count: number): Bucket<T> {
    const bucket: Bucket<T> = { count, entries: new Set(), prev: undefined, next };
    if (next) next.prev = bucket;
    this.head = bucket;
    return bucket;
  }

  private unlink(bucket: Bucket<T>): void {
    if (bucket.prev) bucket.prev.next = bucket.next;
    else this.head = bucket.next;
    if (bucket.next) bucket.next.prev = bucket.prev;
  }
}
