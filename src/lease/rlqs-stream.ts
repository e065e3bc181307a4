import type { Matcher } from '../matching/matcher.js';
import type { RequestContext } from '../model/request-context.js';
import { chunkSize } from './chunk.js';
import { leaseFailed } from './failures.js';
import { FAILURE_TTL_MS, tokenBucket, type Assignment, type AssignmentStrategy } from './rlqs-assignment.js';
import { giveBackLayered, takeLayered, type LayerCounter } from './rlqs-grant.js';
import { BucketLedger, type HeldGrant } from './rlqs-ledger.js';
import { coverOf, type CoverDeps } from './rlqs-winners.js';
import type { LapseReason, LocalMs } from './types.js';
import { log } from '../util/log.js';

/** One bucket's line of a usage report, its id already a request context (the descriptor rule). */
export interface BucketUsage {
  /** The bucket id's canonical form: the same map, the same key. */
  key: string;
  bucketId: Record<string, string>;
  ctx: RequestContext;
  allowed: number;
  denied: number;
  /** `time_elapsed` as reported; 0 when absent. */
  elapsedMs: number;
}

/** What an RLQS stream reports, for the metrics of docs/envoy.md "RLQS" (named beside each). */
export interface RlqsEvents {
  report?(): void; // rl_rlqs_reports_total
  assigned?(strategy: AssignmentStrategy): void; // rl_rlqs_assignments_total{strategy}
  abandoned?(): void; // rl_rlqs_abandoned_total
  unsupported?(): void; // rl_rlqs_unsupported_total
  lapsed?(policyId: string, units: number, reason: LapseReason): void; // rl_lease_units_lapsed_total
  failed?(): void; // rl_counter_store_errors_total
}

export interface StreamDeps extends CoverDeps {
  policies: { current(): Matcher };
  /** RL_RLQS_BUCKET_IDLE_SECS in ms: a bucket with no requests reported for this long is abandoned. */
  idleMs: number;
  /** Wall clock for matching (valid_from/valid_to). */
  wallNow: () => number;
  events: RlqsEvents;
}

/** How far before a window's end an assignment ends: Envoy counts its life from receipt, a little later. */
const WINDOW_GUARD_MS = 50;
/** Reports closer together than this say too little of a rate (Envoy's own first report says nothing). */
const MIN_RATE_SPAN_MS = 5;
/** A token bucket shorter than this is not worth sending: the units go back, DENY_ALL to the window's end. */
const MIN_TTL_MS = 20;

interface Bucket {
  usage: BucketUsage;
  ledger: BucketLedger;
  assignment?: Assignment;
  expiresAt: LocalMs;
  /** When a request was last reported (or the bucket first seen). */
  lastDemandAt: LocalMs;
  lastReportAt: LocalMs;
  demandSinceAssigned: boolean;
  /** Requests per ms, as the last report said. */
  rate: number;
  /** The hold of its last grant's counters (a round trip stays within it); a second before any. */
  holdMs: number;
  /** What the counters could still admit at the last take (Infinity before the first). */
  remaining: number;
  coverKey?: string;
  matcher?: Matcher;
  busy?: Promise<void>;
  again: boolean;
  timer?: unknown;
  seq: number;
  gone: boolean;
}

/**
 * One Envoy's stream (docs/envoy.md "7. RLQS"): a capacity-lease holder whose units
 * sit in Envoy's token buckets. Each bucket is assigned from the counters of its winners: units taken
 * before Envoy may spend them, settled from the usage reports, given back when the bucket's grant is
 * replaced and reported on, when the bucket is abandoned, and when the stream ends after its last report.
 */
export class RlqsStream {
  private readonly buckets = new Map<string, Bucket>();
  /** Buckets abandoned lately, until when a report of theirs may have crossed the abandon on its way. */
  private readonly abandoned = new Map<string, LocalMs>();
  private closed = false;
  private asking = 0;
  private sweep: unknown;
  /** Set by `drain()`: no grant is taken any more, and `drained` resolves once nothing is held. */
  private draining?: { drained: Promise<void>; resolve: () => void };
  /** Give backs under way: the stream's end waits for them (the store closes after the streams). */
  private readonly settling = new Set<Promise<void>>();

  constructor(
    private readonly deps: StreamDeps,
    private readonly send: (bucketId: Record<string, string>, assignment: Assignment) => void,
  ) {
    this.sweep = deps.clock.setTimer(() => this.sweepIdle(), sweepEvery(deps.idleMs));
  }

  get bucketCount(): number {
    return this.buckets.size;
  }

  /** Units out with this Envoy and not yet reported spent, and those asked of the counters and not yet answered. */
  unitsHeld(): number {
    let held = this.asking;
    for (const bucket of this.buckets.values()) held += bucket.ledger.unitsHeld();
    return held;
  }

  /** One message of usage reports: each bucket's usage counted, settled and, where due, assessed. */
  report(usages: readonly BucketUsage[]): void {
    if (this.closed) return;
    const now = this.deps.clock.now();
    for (const usage of usages) {
      this.deps.events.report?.();
      let bucket = this.buckets.get(usage.key);
      const first = bucket === undefined;
      // A bucket's first report counts the request that made it: an empty one was sent before an abandon arrived.
      if (first && usage.allowed + usage.denied === 0) continue;
      // So may one with requests, within a round trip of the abandon: Envoy has no bucket left to spend a grant of
      // it, which would only lapse. A bucket Envoy really made again is reported again, and assigned then.
      if (first && (this.abandoned.get(usage.key) ?? -Infinity) > now) continue;
      this.abandoned.delete(usage.key);
      bucket ??= this.newBucket(usage, now);
      const requests = usage.allowed + usage.denied;
      // The first report only says the bucket exists (its rate is unknown: one grant of what it asked for).
      const elapsed = Math.max(usage.elapsedMs, now - bucket.lastReportAt);
      if (!first && elapsed >= MIN_RATE_SPAN_MS) bucket.rate = requests / elapsed;
      bucket.lastReportAt = now;
      if (requests > 0) {
        bucket.lastDemandAt = now;
        bucket.demandSinceAssigned = true;
      }
      void this.settle(bucket.ledger.report(usage.allowed, now));
      if (first || this.due(bucket, now)) this.assess(bucket);
    }
    this.checkDrained();
  }

  /**
   * The server drains: every bucket holding units is assigned DENY_ALL (a new strategy: Envoy reports
   * what it spent and stops spending), and no grant is taken any more. Resolves once the reports have
   * settled every grant, or the stream ended; then the stream can be ended without cutting anything.
   */
  drain(): Promise<void> {
    if (this.draining === undefined) {
      let resolve!: () => void;
      const drained = new Promise<void>((r) => (resolve = r));
      this.draining = { drained, resolve };
      for (const bucket of this.buckets.values()) {
        const holds = bucket.ledger.unitsHeld() > 0 || bucket.busy !== undefined || bucket.assignment?.strategy === 'token_bucket';
        if (holds) this.assess(bucket);
      }
      this.checkDrained();
    }
    return this.draining.drained;
  }

  /**
   * The stream ended. `reported`: Envoy closed it after its last report, so what it did not report it
   * did not spend: every grant goes back. Otherwise (cut, cancelled) its units stay with Envoy until
   * their assignments end, and then lapse (holder_lost).
   */
  async end(reported: boolean): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.deps.clock.clearTimer(this.sweep);
    const held: HeldGrant[] = [];
    for (const bucket of this.buckets.values()) {
      bucket.gone = true;
      this.deps.clock.clearTimer(bucket.timer);
      held.push(...bucket.ledger.takeAll());
    }
    this.buckets.clear();
    if (reported) await this.settle(held);
    else for (const grant of held) this.lapseAtEnd(grant, 'holder_lost');
    await Promise.all(this.settling);
    this.draining?.resolve();
  }

  private newBucket(usage: BucketUsage, now: LocalMs): Bucket {
    const bucket: Bucket = {
      usage,
      ledger: new BucketLedger(),
      expiresAt: now,
      lastDemandAt: now,
      lastReportAt: now,
      demandSinceAssigned: true,
      rate: 0,
      holdMs: FAILURE_TTL_MS,
      remaining: Infinity,
      again: false,
      seq: 0,
      gone: false,
    };
    this.buckets.set(usage.key, bucket);
    return bucket;
  }

  /** Whether a report should bring a new assignment: none yet, the policies changed, a token bucket half spent, or one in use near its end. */
  private due(bucket: Bucket, now: LocalMs): boolean {
    const { assignment } = bucket;
    if (assignment === undefined || bucket.matcher !== this.deps.policies.current()) return true;
    // Near its end, only a bucket still in use is assigned again: an unused one's assignment runs out.
    if (bucket.expiresAt - leadOf(assignment) <= now) return bucket.demandSinceAssigned;
    const held = bucket.ledger.current;
    return assignment.strategy === 'token_bucket' && held !== undefined && held.spent * 2 >= held.grant.units;
  }

  /** One assessment at a time per bucket; one asked for meanwhile runs after it. */
  private assess(bucket: Bucket): void {
    if (bucket.busy !== undefined) {
      bucket.again = true;
      return;
    }
    // An assessment that throws (a bug, a matcher that cannot match) must not become an unhandled
    // rejection: it is logged, the bucket keeps its assignment, and its next report assesses it again.
    bucket.busy = this.assessNow(bucket).catch((error: unknown) => log.warn('RLQS bucket assessment failed', { error: String(error) })).finally(() => {
      bucket.busy = undefined;
      if (bucket.again && !bucket.gone) {
        bucket.again = false;
        this.assess(bucket);
      }
      this.checkDrained();
    });
  }

  private async assessNow(bucket: Bucket): Promise<void> {
    const matcher = this.deps.policies.current();
    bucket.matcher = matcher;
    const cover = coverOf(matcher, bucket.usage.ctx, this.deps.wallNow(), this.deps);
    if (cover.kind !== 'counters') {
      if (cover.kind === 'unsupported') this.deps.events.unsupported?.();
      bucket.coverKey = undefined;
      bucket.ledger.replace(undefined, this.deps.clock.now());
      return this.assign(bucket, { strategy: 'allow_all', ttlMs: this.deps.idleMs });
    }
    if (this.draining) return this.stopSpending(bucket, cover.layers);
    const now = this.deps.clock.now();
    const held = bucket.ledger.current;
    const sameCover = bucket.coverKey === cover.key;
    if (sameCover && held !== undefined && bucket.assignment !== undefined && !this.due(bucket, now)) return;
    if (sameCover && bucket.assignment?.strategy === 'deny_all' && bucket.expiresAt > now) return;
    bucket.coverKey = cover.key;
    await this.grant(bucket, cover.layers);
  }

  /** Takes the next grant of `layers` for the bucket and assigns it, or DENY_ALL / the failure mode when none comes. */
  private async grant(bucket: Bucket, layers: LayerCounter[]): Promise<void> {
    const holdMs = Math.min(...layers.map((layer) => layer.holdMs));
    bucket.holdMs = holdMs;
    const want = chunkSize({
      recent: Math.ceil(bucket.rate * holdMs),
      waiting: 1,
      maxUnits: Math.min(...layers.map((layer) => layer.maxUnits)),
      parentRemaining: bucket.remaining,
    });
    this.asking += want;
    const lapse = (layer: LayerCounter, units: number, reason: LapseReason) => this.deps.events.lapsed?.(layer.policyId, units, reason);
    const answer = await takeLayered(layers, want, lapse).finally(() => (this.asking -= want));
    const now = this.deps.clock.now();
    if (answer.refused === 'spent') {
      bucket.remaining = 0;
      bucket.ledger.replace(undefined, this.deps.clock.now());
      // Never past the counter's own retry_after; within a hold, since units other streams hold may come back sooner.
      return this.assign(bucket, { strategy: 'deny_all', ttlMs: Math.min(answer.retryAfterMs, holdMs) });
    }
    if (answer.refused === 'failed') {
      leaseFailed({ events: { failed: this.deps.events.failed }, fields: { holder: 'rlqs_stream' } }, 'refill', answer.error);
      bucket.ledger.replace(undefined, this.deps.clock.now());
      const strategy = answer.failureMode === 'fail_open' ? 'allow_all' : 'deny_all';
      return this.assign(bucket, { strategy, ttlMs: Math.min(FAILURE_TTL_MS, holdMs) });
    }
    const grant: HeldGrant = { grant: answer, layers: answer.layers, expiresAt: now, spent: 0, counter: `${bucket.coverKey}\n${answer.windowTags.join(',')}` };
    if (this.draining) {
      // Taken as the drain began, never sent.
      await this.settle([grant]);
      return this.stopSpending(bucket, layers);
    }
    // A layer that failed open is retried soon: the assignment lives no longer than a failure mode's.
    const lifeMs = answer.failedOpen ? Math.min(holdMs, FAILURE_TTL_MS) : holdMs;
    const ttlMs = Math.floor(Math.min(lifeMs, answer.spendBy - now - WINDOW_GUARD_MS));
    if (bucket.gone || ttlMs < MIN_TTL_MS) {
      // Never sent: nothing of it can have been spent.
      await this.settle([grant]);
      if (!bucket.gone) this.assign(bucket, { strategy: 'deny_all', ttlMs: Math.max(1, Math.ceil(answer.spendBy - now)) });
      return;
    }
    grant.expiresAt = (now + ttlMs) as LocalMs;
    bucket.remaining = answer.remaining;
    bucket.ledger.replace(grant, now);
    this.assign(bucket, tokenBucket(answer.units, ttlMs, ++bucket.seq));
  }

  /** Draining: the bucket's grant ends and Envoy is told DENY_ALL (once), so its next report says what it spent. */
  private stopSpending(bucket: Bucket, layers: LayerCounter[]): void {
    bucket.ledger.replace(undefined, this.deps.clock.now());
    if (bucket.assignment?.strategy === 'deny_all' && bucket.expiresAt > this.deps.clock.now()) return;
    // Its next stream (on another server) brings the next assignment; a hold's life covers the way there.
    this.assign(bucket, { strategy: 'deny_all', ttlMs: Math.min(...layers.map((layer) => layer.holdMs)) });
  }

  private checkDrained(): void {
    if (this.draining === undefined || this.unitsHeld() > 0) return;
    for (const bucket of this.buckets.values()) if (bucket.busy !== undefined) return;
    // The give backs of the last reports are done before the stream is ended and the store closed.
    void Promise.all(this.settling).then(this.draining.resolve);
  }

  private assign(bucket: Bucket, assignment: Assignment): void {
    if (bucket.gone || assignment.strategy === 'abandon') return;
    const now = this.deps.clock.now();
    bucket.assignment = assignment;
    bucket.expiresAt = (now + assignment.ttlMs) as LocalMs;
    bucket.demandSinceAssigned = false;
    this.deps.clock.clearTimer(bucket.timer);
    // Near its end, a bucket that saw requests since gets its next assignment without waiting for a report.
    bucket.timer = this.deps.clock.setTimer(() => {
      if (!bucket.gone && bucket.demandSinceAssigned) this.assess(bucket);
    }, Math.max(1, assignment.ttlMs - leadOf(assignment)));
    this.deps.events.assigned?.(assignment.strategy);
    this.send(bucket.usage.bucketId, assignment);
  }

  /** Abandons every bucket with no request reported for RL_RLQS_BUCKET_IDLE_SECS. */
  private sweepIdle(): void {
    if (this.closed) return;
    const now = this.deps.clock.now();
    for (const [key, bucket] of this.buckets) {
      if (now - bucket.lastDemandAt < this.deps.idleMs || bucket.busy !== undefined) continue;
      // Units still out wait for the reports that settle them (a report a hold after the grant ended), unless the reports stopped too.
      if (bucket.ledger.unitsHeld() > 0 && now - bucket.lastReportAt < this.deps.idleMs) continue;
      this.buckets.delete(key);
      bucket.gone = true;
      this.deps.clock.clearTimer(bucket.timer);
      this.deps.events.abandoned?.();
      this.abandoned.set(key, (now + bucket.holdMs) as LocalMs);
      this.send(bucket.usage.bucketId, { strategy: 'abandon' });
      // Reports stopped with units out: they may have been spent after the last report, so they lapse.
      for (const grant of bucket.ledger.takeAll()) this.lapseAtEnd(grant, undefined);
    }
    for (const [key, until] of this.abandoned) if (until <= now) this.abandoned.delete(key);
    this.sweep = this.deps.clock.setTimer(() => this.sweepIdle(), sweepEvery(this.deps.idleMs));
  }

  /** Gives each grant's unreported units back to every layer; what a layer cannot take back is counted lapsed. */
  private settle(grants: readonly HeldGrant[]): Promise<void> {
    if (grants.length === 0) return Promise.resolve();
    const done = this.giveBackEach(grants).finally(() => this.settling.delete(done));
    this.settling.add(done);
    return done;
  }

  private async giveBackEach(grants: readonly HeldGrant[]): Promise<void> {
    await Promise.all(
      grants.map(async (held) => {
        const given = await giveBackLayered(held.layers, held.grant, held.grant.units - held.spent);
        given.forEach((answer, i) => {
          const layer = held.layers[i]!;
          if (answer.lapsed > 0) this.deps.events.lapsed?.(layer.policyId, answer.lapsed, layer.expiry);
        });
      }),
    );
  }

  /** Units no report will account for: counted lapsed once the grant's assignment has ended. */
  private lapseAtEnd(held: HeldGrant, reason: LapseReason | undefined): void {
    const units = held.grant.units - held.spent;
    if (units <= 0) return;
    const count = () => held.layers.forEach((layer) => this.deps.events.lapsed?.(layer.policyId, units, reason ?? layer.expiry));
    const wait = held.expiresAt - this.deps.clock.now();
    if (wait <= 0) count();
    else this.deps.clock.setTimer(count, wait);
  }
}

/** How long before an assignment's end the next one is prepared; a DENY_ALL is waited out. */
function leadOf(assignment: Assignment): number {
  if (assignment.strategy === 'abandon' || assignment.strategy === 'deny_all') return 0;
  return Math.min(250, assignment.ttlMs / 4);
}

/** How often idle buckets are looked for: a quarter of the idle time, between 0.1 and 1 s. */
function sweepEvery(idleMs: number): number {
  return Math.max(100, Math.min(1000, idleMs / 4));
}
