import { PassThrough } from 'node:stream';
import { Registry } from 'prom-client';
import type { CounterStore } from '../counters/counter-store.js';
import type { CounterStoreErrorEvent } from '../redis/redis-store.js';
import { RlError } from '../errors.js';
import type { PolicyService } from '../policy-service/policy-service.js';
import type { Analytics, AnalyticsSummary, AnalyticsView } from './analytics.js';
import type { Hello, OutcomeRates, RlqsPanel, Snapshot } from '../schema/dashboard-stream.js';
import type { LeaseTotals, RegionStatus, RlqsStatus, StoreState } from '../schema/server-info.js';
import type { DeniedIdentities } from './denied-identities.js';
import type { Metrics } from '../observability/metrics.js';
import { SeriesRing } from './series-ring.js';

/**
 * What the live dashboard streams (GET /rl/v1/stream, http/routes/dashboard.ts): ONE shared timer, running
 * from start-up whether or not anyone watches, builds a snapshot per tick (an analytics summary cut to the
 * top policies, the counter store state, a policy-set revision), keeps its rates in a fixed-size ring (the
 * last hour by default: a viewer's charts start filled), and writes it, serialised once, to every
 * subscriber, so the stream costs the same whatever the number of viewers. Subscribers are capped (a
 * further one is refused as unavailable). The messages' shapes are src/schema/dashboard-stream.ts.
 *
 * A viewer limited to organisations (docs/tenants.md) subscribes to a hub of its own per set of
 * organisations, built over the same sources seen through its OrgView (`viewDeps`): its decisions, its
 * policies, its denied identities, and none of the service-wide figures. Such a hub ticks from its first
 * viewer until the parent's first tick after its last one left; the cap counts every stream.
 */

/** The server's lifecycle as the hub reads it (lifecycle/readiness.ts): a draining server ends every stream. */
export interface Lifecycle {
  readonly state: string;
  onChange(listener: (state: string) => void): void;
}

export type { StoreState, LeaseTotals, RegionStatus };
export type { OutcomeRates };
export type DashboardSnapshot = Snapshot;
export type DashboardHello = Hello;

export interface DashboardStreamDeps {
  analytics: Pick<Analytics, 'summary'>;
  /** Read for the service-wide figures: the fail-open rate and the lease totals. */
  metrics: Pick<Metrics, 'registry' | 'leaseTotals'>;
  /** The policy set (PolicyService): which fail open, and its revision. */
  policies: Pick<PolicyService, 'list' | 'revision'>;
  counters: CounterStore;
  readiness: Lifecycle;
  /** Fed by the decision path; its top entries go into every snapshot. */
  deniedIdentities?: Pick<DeniedIdentities, 'top'>;
  /** What a viewer limited to organisations sees (analytics/org-view.ts); without it such viewers are refused. */
  viewOf?: (orgs: readonly string[]) => AnalyticsView;
  /** Tick length; default 1000 ms. */
  intervalMs?: number;
  /** Concurrent streams; default 16. */
  maxSubscribers?: number;
  /** Policies per snapshot (the busiest); default 50. */
  topPolicies?: number;
  /** Ticks kept in the ring for a new subscriber's charts; default 3600 (an hour of 1 s ticks). */
  historyLength?: number;
  /** Policies per tick kept in the ring (the busiest); default 10. */
  historyPolicies?: number;
  /** Region mode: the region and the global store's state, read each tick. */
  region?: () => RegionStatus;
  /** Envoy's rate limit quota service, where the server serves it: its streams, read each tick (the assignments from the metrics). */
  rlqs?: () => RlqsStatus;
  /** Bytes a subscriber may leave unread before it is dropped (a stalled viewer must not pin memory); default 1 MiB. */
  maxBufferedBytes?: number;
  /** Clock in epoch ms (tests pin it to get exact rates); default Date.now. */
  now?: () => number;
}

/** Anything a Redis store reports about its failures (only RedisCounterStore has this). */
type ErrorSource = { onError(listener: (event: CounterStoreErrorEvent) => void): () => void };

/**
 * The shared producer of snapshots. Subscribers are writable streams; the timer runs from `start()` to
 * `stop()`, viewers or not. Draining ends every stream so clients reconnect to a node that stays.
 */
export class DashboardHub {
  private readonly subscribers = new Set<PassThrough>();
  /** The hubs of viewers limited to organisations, by their sorted organisations. */
  private readonly views = new Map<string, DashboardHub>();
  private readonly ring: SeriesRing;
  private timer: NodeJS.Timeout | undefined;
  private previous: Reading;
  private lastStoreError: CounterStoreErrorEvent['kind'] | undefined;
  readonly intervalMs: number;
  private readonly maxSubscribers: number;
  private readonly topPolicies: number;
  private readonly topIdentities = 100;
  private readonly maxBufferedBytes: number;

  constructor(private readonly deps: DashboardStreamDeps) {
    this.intervalMs = deps.intervalMs ?? 1000;
    this.maxSubscribers = deps.maxSubscribers ?? 16;
    this.topPolicies = deps.topPolicies ?? 50;
    this.maxBufferedBytes = deps.maxBufferedBytes ?? 1024 * 1024;
    this.ring = new SeriesRing(deps.historyLength ?? 3600, deps.historyPolicies ?? 10);
    const source = deps.counters as Partial<ErrorSource>;
    if (typeof source.onError === 'function') source.onError((event) => (this.lastStoreError = event.kind));
    deps.readiness.onChange((state) => {
      if (state === 'draining') this.endAll();
    });
    this.previous = this.reading();
  }

  /** Ticks every `intervalMs` from now until `stop()`, viewers or not (the server calls it at start-up). */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    for (const hub of this.views.values()) hub.stop();
  }

  /** Streams open, restricted viewers' included. */
  get size(): number {
    let size = this.subscribers.size;
    for (const hub of this.views.values()) size += hub.size;
    return size;
  }

  /** Ticks held for a new viewer's charts. */
  get historySize(): number {
    return this.ring.size;
  }

  /**
   * A new stream that starts with `hello` (who the caller is, the history so far); 503 past the cap.
   * `orgs`: the viewer's organisations when its credential is limited to some.
   */
  subscribe(viewer: Omit<DashboardHello, 'interval_ms' | 'history'>, orgs?: readonly string[]): PassThrough {
    if (this.size >= this.maxSubscribers) {
      throw new RlError('unavailable', `too many dashboard streams (at most ${this.maxSubscribers}); close another dashboard tab`);
    }
    if (orgs !== undefined) return this.viewHub(orgs).subscribe(viewer);
    const stream = new PassThrough();
    const hello: DashboardHello = { ...viewer, interval_ms: this.intervalMs, history: this.ring.history() };
    stream.write(sseEvent('hello', hello));
    this.subscribers.add(stream);
    stream.once('close', () => this.unsubscribe(stream));
    return stream;
  }

  /** Builds the next snapshot now (the timer calls this); exposed for tests. */
  tick(): DashboardSnapshot {
    const current = this.reading();
    const previous = this.previous;
    this.previous = current;
    const snapshot = this.snapshot(previous, current);
    this.ring.push(snapshot.at, snapshot.rates, busiestInTick(snapshot.policies));
    this.dropIdleViews();
    if (this.subscribers.size === 0) return snapshot;
    const frame = sseEvent('snapshot', snapshot);
    for (const stream of [...this.subscribers]) {
      // A viewer that stopped reading is dropped (its page reconnects) rather than buffered for without end.
      if (stream.writableLength + stream.readableLength > this.maxBufferedBytes) {
        this.unsubscribe(stream);
        stream.destroy();
      } else {
        stream.write(frame);
      }
    }
    return snapshot;
  }

  endAll(): void {
    for (const hub of this.views.values()) hub.endAll();
    for (const stream of [...this.subscribers]) {
      this.unsubscribe(stream);
      stream.end();
    }
  }

  /** The hub of viewers limited to exactly these organisations, ticking while it has viewers. */
  private viewHub(orgs: readonly string[]): DashboardHub {
    const key = JSON.stringify([...orgs].sort());
    let hub = this.views.get(key);
    if (hub === undefined) {
      const viewOf = this.deps.viewOf;
      if (viewOf === undefined) throw new RlError('permission_denied', 'this dashboard stream has no view for credentials limited to organisations');
      hub = new DashboardHub(viewDeps(this.deps, viewOf(orgs), orgs));
      hub.start();
      this.views.set(key, hub);
    }
    return hub;
  }

  private dropIdleViews(): void {
    for (const [key, hub] of this.views) {
      if (hub.size > 0) continue;
      hub.stop();
      this.views.delete(key);
    }
  }

  private unsubscribe(stream: PassThrough): void {
    this.subscribers.delete(stream);
  }

  private reading(): Reading {
    return { at: (this.deps.now ?? Date.now)(), summary: this.deps.analytics.summary(this.topPolicies), failOpen: failOpenCount(this.deps.metrics) };
  }

  private snapshot(previous: Reading, current: Reading): DashboardSnapshot {
    const seconds = Math.max((current.at - previous.at) / 1000, 0.001);
    const rate = (now: number, before: number) => round(Math.max(now - before, 0) / seconds);
    const before = new Map(previous.summary.by_policy.map((p) => [p.policy_id, p]));
    // A policy missing from an uncut earlier list had made no decisions then; from a cut one, its count is unknown.
    const earlierWasComplete = previous.summary.by_policy.length < this.topPolicies;
    const { summary } = current;
    const store = this.storeState();
    return {
      at: current.at,
      totals: { total: summary.total, allowed: summary.allowed, denied: summary.denied, shadow: summary.shadow, since: summary.since },
      rates: {
        allowed: rate(summary.allowed, previous.summary.allowed),
        denied: rate(summary.denied, previous.summary.denied),
        shadow: rate(summary.shadow, previous.summary.shadow),
      },
      policies: summary.by_policy.map((p) => {
        // Unknown earlier count (new to a cut top list): its first rates are 0, not its lifetime count.
        const b = before.get(p.policy_id) ?? (earlierWasComplete ? NO_DECISIONS : p);
        return { policy_id: p.policy_id, allowed: rate(p.allowed, b.allowed), denied: rate(p.denied, b.denied), shadow: rate(p.shadow, b.shadow) };
      }),
      store,
      fail_open_rate: rate(current.failOpen, previous.failOpen),
      failing_open:
        store.state === 'up'
          ? []
          : this.deps.policies
              .list()
              .filter((p) => p.enabled && p.failure_mode === 'fail_open')
              .map((p) => p.policy_id),
      denied_identities: this.deps.deniedIdentities?.top(this.topIdentities) ?? [],
      policies_revision: this.deps.policies.revision(),
      readiness: this.deps.readiness.state,
      leases: this.deps.metrics.leaseTotals(),
      region: this.deps.region?.() ?? null,
      rlqs: this.deps.rlqs ? { ...this.deps.rlqs(), assignments: assignmentCounts(this.deps.metrics) } : null,
    };
  }

  private storeState(): DashboardSnapshot['store'] {
    const counters = this.deps.counters;
    const kind = typeof (counters as Partial<ErrorSource>).onError === 'function' ? 'redis' : 'memory';
    if (counters.isHealthy()) return { kind, state: 'up' };
    return { kind, state: this.lastStoreError === 'breaker_open' ? 'circuit_open' : 'down' };
  }
}


/** What one tick reads; rates are the difference between two readings. */
interface Reading {
  at: number;
  summary: AnalyticsSummary;
  failOpen: number;
}

const NO_DECISIONS: OutcomeRates = { allowed: 0, denied: 0, shadow: 0 };

/**
 * The snapshot's policies by their rates in this tick, busiest first (the snapshot lists them by their
 * totals since start-up): the ring keeps the busiest of each tick, so a policy busy now is in the history
 * even while others lead on lifetime totals.
 */
function busiestInTick(policies: readonly (OutcomeRates & { policy_id: string })[]): (OutcomeRates & { policy_id: string })[] {
  const busy = (p: OutcomeRates) => p.allowed + p.denied + p.shadow;
  return [...policies].sort((a, b) => busy(b) - busy(a));
}

/** The service-wide figures (fail-open rate, lease totals) are no one organisation's: a restricted view reads 0. */
const NO_SERVICE_FIGURES: DashboardStreamDeps['metrics'] = {
  registry: new Registry(),
  leaseTotals: () => ({ refills: 0, units_returned: 0, units_lapsed: 0, units_lapsed_by_reason: {}, waits: 0 }),
};

/**
 * The sources of a restricted view's hub: the same ones seen through `view`. Its lifecycle is read
 * from the parent's, which ends its streams on draining (no listener of its own to leak).
 */
function viewDeps(deps: DashboardStreamDeps, view: AnalyticsView, orgs: readonly string[]): DashboardStreamDeps {
  const { analytics, policies, deniedIdentities, readiness } = deps;
  const caller = { subject: 'dashboard', orgs };
  return {
    ...deps,
    analytics: { summary: (top) => analytics.summary(top, view) },
    metrics: NO_SERVICE_FIGURES,
    policies: { list: () => policies.list(caller), revision: () => policies.revision() },
    deniedIdentities: deniedIdentities && { top: (limit) => deniedIdentities.top(limit, view) },
    rlqs: undefined,
    readiness: { get state() { return readiness.state; }, onChange: () => undefined },
    viewOf: undefined,
  };
}

function sseEvent(name: string, data: unknown): string {
  return `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** The samples of one series of the registry, read without rendering the exposition (none when it is not registered). */
function samples(metrics: Pick<Metrics, 'registry'>, name: string): { labels: Record<string, string>; value: number }[] {
  const metric = metrics.registry.getSingleMetric(name) as unknown as { get(): { values: { labels: Record<string, string>; value: number }[] } } | undefined;
  return metric?.get().values ?? [];
}

/** rl_failure_mode_decisions_total{mode="fail_open"}. */
function failOpenCount(metrics: Pick<Metrics, 'registry'>): number {
  return samples(metrics, 'rl_failure_mode_decisions_total').find((v) => v.labels.mode === 'fail_open')?.value ?? 0;
}

/** rl_rlqs_assignments_total by strategy (0 for a strategy not sent yet). */
function assignmentCounts(metrics: Pick<Metrics, 'registry'>): RlqsPanel['assignments'] {
  const values = samples(metrics, 'rl_rlqs_assignments_total');
  const of = (strategy: string) => values.find((v) => v.labels.strategy === strategy)?.value ?? 0;
  return { allow_all: of('allow_all'), deny_all: of('deny_all'), token_bucket: of('token_bucket') };
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
