import { randomUUID } from 'node:crypto';
import { CounterStoreUnavailableError, LeaseWaitTimeoutError } from '../errors.js';
import type { CounterResult, CounterStore, GiveBackRequest, LeaseCounterResult, NamedTake } from '../counters/counter-store.js';
import type { CompiledLease, GlobalBudget, ConcurrencySpec, RateSpec } from '../counters/counter-spec.js';
import type { CounterStoreErrorEvent, RedisCounterStore } from '../redis/redis-store.js';
import type { MasterState } from '../redis/master-health.js';
import { chunkSize } from '../lease/chunk.js';
import type { LendingStore } from '../lease/process-leases.js';
import { poolKey, type PoolAnswer, type RegionPoolStore } from './region-pool.js';
import { storeParent, type LeasedSpec } from '../lease/store-parent.js';
import { ShareViews } from './share-view.js';
import type { RegionShareUse } from '../schema/server-info.js';
import { leaseFailed } from '../lease/failures.js';
import { countUnits, HolderTakes, type UnitOwner } from '../lease/holder-takes.js';
import { ParentShortage, type RefusalTiming } from './parent-shortage.js';
import { DEFAULT_LEASE_MAX_WAIT_MS, systemClock, toStoreClock, waitTimeout, within } from '../lease/types.js';
import type { LeaseClock, LeaseEvents, LeaseParent, LocalMs, UnitHolders } from '../lease/types.js';

/**
 * The counter store of a server in a region (docs/distribution.md "How it works"): a `budget: "global"`
 * counter's units are taken into a pool in the region's store (lua/region_pool.lua), which the region's
 * servers spend from, refill and let go together. Injected stores and clock: the simulation runs this code.
 */
export interface RegionStoreOptions<Regional extends RegionSideStore = RedisCounterStore> {
  regional: Regional;
  pool: RegionPoolStore;
  global: RegionSideStore;
  /** RL_GLOBAL_COUNTERSTORE_TIMEOUT_MS, and with RL_COUNTERSTORE_TIMEOUT_MS how long a refill lock lasts. */
  globalTimeoutMs: number;
  regionalTimeoutMs: number;
  /** RL_LEASE_MAX_WAIT_MS (default 100). */
  maxWaitMs?: number;
  events?: (policyId: string) => LeaseEvents;
  clock?: LeaseClock;
  /** How often pools unspent for max_hold are looked for (default 250 ms; 0: never, for tests). */
  sweepIntervalMs?: number;
  /** RL_REGION: the region a global budget with shares counts this region's takes under. */
  region?: string;
}

/** A store on either side of a region: the counter operations with leases, and (Redis) its failures. */
export type RegionSideStore = LendingStore & { onError?(listener: (event: CounterStoreErrorEvent) => void): () => void };

/** How long a waiting decision sleeps between looks at the pool while another server refills it. */
const WAIT_POLL_MS = 2;

/** A global budget's spec whose algorithm leases. */
type GlobalRateSpec = RateSpec & { global: GlobalBudget & { lease: CompiledLease } };

const isLeased = (spec: RateSpec): spec is GlobalRateSpec => spec.global?.lease !== undefined;

/** A leased counter: its pool's key, its keys, its spec. */
type Leased = { key: string; keys: string[]; spec: GlobalRateSpec };
type Tracked = Leased & { lastUsed: LocalMs };

export class RegionCounterStore<Regional extends RegionSideStore = RedisCounterStore> implements CounterStore, UnitHolders {
  readonly regional: Regional;
  private readonly global: RegionSideStore;
  private readonly pool: RegionPoolStore;
  private readonly clock: LeaseClock;
  private readonly maxWaitMs: number;
  /** Where each policy version's units and failures are counted (its hooks, why its units lapse, its logs' fields), made once. */
  private readonly counting = new WeakMap<GlobalBudget, Omit<UnitOwner, 'parent' | 'timeoutMs'>>();
  private readonly token = randomUUID();
  /** Pools this server spent from, by pool key: the sweep and policy changes return their units. */
  private readonly tracked = new Map<string, Tracked>();
  /** This server's refill in flight, by pool key: its waiting decisions await it. */
  private readonly refills = new Map<string, Promise<void>>();
  private readonly shortage = new ParentShortage();
  /** What the global counter last said of each shared budget's regions (/rl/v1/info). */
  private readonly shareViews: ShareViews;
  /** Refills and gives named, with deadlines by the global store's clock; those whose answer was lost, to settle. */
  private readonly takes: HolderTakes<Leased>;
  private sweeper: unknown;
  private sweeping: Promise<void> | undefined;
  private closed = false;
  private lettingGo: Promise<void> | undefined;
  private closing: Promise<void> | undefined;

  constructor(private readonly options: RegionStoreOptions<Regional>) {
    this.regional = options.regional;
    this.global = options.global;
    this.pool = options.pool;
    this.clock = options.clock ?? systemClock;
    this.maxWaitMs = options.maxWaitMs ?? DEFAULT_LEASE_MAX_WAIT_MS;
    this.shareViews = new ShareViews(this.clock);
    this.takes = new HolderTakes(this.clock, (counter) => this.ownerOf(counter));
    const interval = options.sweepIntervalMs ?? 250;
    if (interval > 0) this.armSweep(interval);
  }

  async consume(keys: string[], spec: RateSpec, cost: number, nowMs?: number): Promise<CounterResult> {
    if (!isLeased(spec)) return this.unleased(spec, (region) => this.storeOf(spec).consume(keys, spec, cost, nowMs, region));
    // Bounded wait (docs/reference.md "Slots, leases and pools"): one deadline from arrival, for the wait and a refusal's peek.
    const deadline = this.clock.now() + this.maxWaitMs;
    const answer = await this.fromPool('spend', keys, spec, cost, deadline);
    if (!answer.spent) {
      const { retryAfterMs, resetAfterMs } = await this.refusal(keys, spec, answer, deadline);
      return { allowed: false, remaining: answer.left, retryAfterMs, resetAfterMs };
    }
    return { allowed: true, remaining: answer.left + Math.max(0, answer.parentRemaining), retryAfterMs: 0, resetAfterMs: answer.resetAfterMs };
  }

  /** A peek: the parent's (units held by regions count as used) plus this region's unspent units. */
  async peek(keys: string[], spec: RateSpec, nowMs?: number): Promise<CounterResult> {
    if (!isLeased(spec)) return this.unleased(spec, (region) => this.storeOf(spec).peek(keys, spec, nowMs, region));
    const [parent, held] = await Promise.all([this.global.peek(keys, spec), this.pool.peek(poolKey(keys[0]))]);
    this.lapsed(spec.global, held.lapsed);
    const remaining = parent.remaining + held.left;
    if (held.left >= 1) return { allowed: true, remaining, retryAfterMs: 0, resetAfterMs: Math.max(parent.resetAfterMs, held.resetAfterMs) };
    return { ...parent, remaining };
  }

  /** A refund: back among this region's unspent units. */
  async refund(keys: string[], spec: RateSpec, amount: number, nowMs?: number): Promise<CounterResult> {
    if (!isLeased(spec)) return this.unleased(spec, (region) => this.storeOf(spec).refund(keys, spec, amount, nowMs, region));
    const held = await this.pool.refund(poolKey(keys[0]), amount);
    this.lapsed(spec.global, held.lapsed);
    return { allowed: true, remaining: Math.max(0, held.parentRemaining), retryAfterMs: 0, resetAfterMs: held.resetAfterMs };
  }

  /** A process lease's take, under the pool's tag: a bucket's return then goes only into the units it came from. */
  async take(keys: string[], spec: RateSpec, n: number, nowMs?: number, named?: NamedTake): Promise<LeaseCounterResult> {
    if (!isLeased(spec)) return this.storeOf(spec).take(keys, spec, n, nowMs, named);
    const answer = await this.fromPool('take', keys, spec, n, this.clock.now() + this.maxWaitMs);
    // A process holder refuses its waiters with this timing until it takes again, and bounds their waits itself:
    // its peek gets a max wait of its own, not what the take's wait left of one.
    const peekBy = this.clock.now() + this.maxWaitMs;
    const timing = answer.spent ? { retryAfterMs: 0, resetAfterMs: answer.resetAfterMs } : await this.refusal(keys, spec, answer, peekBy);
    const spendMs = spec.global.lease.shape === 'window' ? answer.resetAfterMs : (named?.holdMs ?? 0);
    const taken = { units: answer.spent ? answer.left : 0, windowTag: answer.tag ?? 0, windowLeftMs: answer.spent ? spendMs : 0, lapsed: 0 };
    return { allowed: answer.spent, remaining: Math.max(0, answer.parentRemaining), ...timing, ...taken, storeNow: answer.storeNow, outcome: 'done' };
  }

  /** A process lease's return: into the pool's live units of the same tag; a window's the pool no longer takes, on to the global counter. */
  async giveBack(keys: string[], spec: RateSpec, { units, windowTag, nowMs }: GiveBackRequest): Promise<LeaseCounterResult> {
    // A give's name is not passed on (nor was it before the request was one object).
    if (!isLeased(spec)) return this.storeOf(spec).giveBack(keys, spec, { units, windowTag, nowMs });
    const answer = await this.pool.refund(poolKey(keys[0]), units, { tag: windowTag });
    this.lapsed(spec.global, answer.lapsed);
    // A bucket's tag names the pool's units, not the global counter's: those stay lapsed (the caller counts them).
    const passOn = units > answer.left && spec.global.lease.shape === 'window' && windowTag !== null;
    // Passed on, they are this region's to count (returned, lapsed, or once settled).
    if (passOn) await this.takes.give({ key: poolKey(keys[0]), keys, spec }, units - answer.left, windowTag);
    const taken = passOn ? units : answer.left;
    const given = { units: taken, windowTag: windowTag ?? 0, windowLeftMs: 0, lapsed: units - taken };
    return { allowed: true, remaining: Math.max(0, answer.parentRemaining), retryAfterMs: 0, resetAfterMs: 0, ...given, storeNow: answer.storeNow, outcome: 'done' };
  }

  acquire(keys: string[], spec: ConcurrencySpec, slotId: string, nowMs?: number): Promise<CounterResult> {
    return this.storeOf(spec).acquire(keys, spec, slotId, nowMs);
  }

  release(keys: string[], spec: ConcurrencySpec, slotId: string, nowMs?: number): Promise<CounterResult> {
    return this.storeOf(spec).release(keys, spec, slotId, nowMs);
  }

  /** The global store as this server sees it (/rl/v1/info, the dashboard). */
  globalStoreHealth(): { reachable: boolean; masters: MasterState[] } {
    const masters = (this.global as { health?: { states(): MasterState[] } }).health?.states() ?? [];
    return { reachable: this.global.isHealthy(), masters };
  }

  /** Each shared global budget's regions, as the global counter last answered this server (/rl/v1/info). */
  shareStatus(): RegionShareUse[] {
    return this.shareViews.status();
  }

  /** Decisions need the region's store; the global store only for refills. */
  isHealthy(): boolean {
    return this.regional.isHealthy();
  }

  onError(listener: (event: CounterStoreErrorEvent) => void): () => void {
    const off = [this.regional.onError?.(listener), this.global.onError?.(listener)];
    return () => off.forEach((unsubscribe) => unsubscribe?.());
  }

  /** The pools whose policy is gone or compiles to another spec go back, under the limit they were taken for. */
  async policiesChanged(current: (policyId: string) => { spec: unknown } | undefined): Promise<void> {
    const changed = [...this.tracked].filter(([, t]) => current(t.spec.global.policyId)?.spec !== t.spec);
    await Promise.all(changed.map(([, t]) => this.returnUnits(t, 0)));
  }

  /** Drain: the pools this server spent from go back, so the region's last server leaves none held. */
  letGoAll(): Promise<void> {
    this.lettingGo ??= (async () => {
      this.closed = true;
      if (this.sweeper !== undefined) this.clock.clearTimer(this.sweeper);
      await Promise.all([...this.tracked.values()].map((t) => this.returnUnits(t, 0)));
      await this.takes.close();
    })();
    return this.lettingGo;
  }

  close(): Promise<void> {
    this.closing ??= this.letGoAll().then(() => Promise.all([this.regional.close(), this.global.close()])).then(() => undefined);
    return this.closing;
  }

  private storeOf(spec: { global?: unknown }): RegionSideStore {
    return spec.global ? this.global : this.regional;
  }

  /**
   * An operation on a counter this region does not lease from: a global budget with shares (a sliding log)
   * names the region to the global counter, and what it answers of the regions is noted (/rl/v1/info).
   */
  private async unleased(spec: RateSpec, operation: (region: string | undefined) => Promise<CounterResult>): Promise<CounterResult> {
    const shares = spec.global?.shares;
    if (shares === undefined) return operation(undefined);
    const answer = await operation(this.options.region);
    const slidingMs = spec.type === 'sliding_window_log' ? spec.windowMs : 0;
    this.shareViews.note({ ...spec.global!, shares }, answer.shareTaken, this.clock.now() + answer.resetAfterMs, slidingMs);
    return answer;
  }

  /** docs/distribution.md "Refusals tell the truth": the global counter's own timing, as kept, else peeked (once for all refusals meanwhile) by the deadline. */
  private async refusal(keys: string[], spec: GlobalRateSpec, answer: PoolAnswer, deadline: LocalMs): Promise<RefusalTiming> {
    const peek = this.maxWaitMs > 0 ? () => this.global.peek(keys, spec) : undefined;
    // Not short, or no answer: kept one max wait (a burst asks once; a stale answer misleads no longer).
    const kept = this.shortage.look(poolKey(keys[0]), () => this.clock.now(), peek, this.maxWaitMs);
    const parent = kept instanceof Promise ? await within(this.clock, deadline - this.clock.now(), () => kept) : kept;
    // The later of the parent's timing and the pool's: its retry_after (> 0, a refusal's), for both.
    return { retryAfterMs: Math.max(parent?.retryAfterMs ?? 0, answer.retryAfterMs), resetAfterMs: Math.max(parent?.resetAfterMs ?? 0, answer.retryAfterMs) };
  }

  /**
   * Spends `cost` from the pool (`take`: up to `cost`), waiting only when the pool cannot serve it, for the region's next
   * refill (this server's, awaited; another's, looked for) until `deadline` (max wait after the decision's arrival).
   */
  private async fromPool(op: 'spend' | 'take', keys: string[], spec: GlobalRateSpec, cost: number, deadline: LocalMs): Promise<PoolAnswer> {
    const key = poolKey(keys[0]);
    const { maxHoldMs } = spec.global.lease;
    const lockMs = this.options.globalTimeoutMs + this.options.regionalTimeoutMs;
    let waitingSince: LocalMs | undefined;
    let waitsFor = 0;
    for (;;) {
      const answer = await this.pool.spend(key, { cost, lockMs, token: this.token, measureMs: maxHoldMs, fresh: waitingSince === undefined, op, waitsFor });
      // With the store's clock it read, per answer, not per server: a regional Redis Cluster's pools live on nodes whose clocks differ.
      const arrivedAt = this.clock.now();
      const counter = this.track(key, keys, spec);
      this.lapsed(spec.global, answer.lapsed);
      if (answer.stale !== undefined) void this.takes.reclaim({ takeId: answer.stale }, counter, 'holder_lost');
      if (answer.lock) {
        // For the cost the pool could not pay (a process lease's take: either way).
        const started: Promise<void> = this.refill(counter, answer, arrivedAt, answer.spent && op === 'spend' ? 0 : cost).finally(() => {
          if (this.refills.get(key) === started) this.refills.delete(key);
        });
        this.refills.set(key, started);
      }
      const refill = this.refills.get(key);
      const done = answer.spent || answer.retryAfterMs > 0;
      if (done || (answer.down && !answer.lock)) {
        this.waited(spec.global, waitingSince);
        if (done) return answer;
        throw new CounterStoreUnavailableError('global store unreachable, and this region holds too few units of the global budget');
      }
      waitsFor = answer.waitsFor;
      waitingSince ??= this.clock.now();
      const leftMs = deadline - this.clock.now();
      if (leftMs <= 0) {
        this.waited(spec.global, waitingSince);
        throw new LeaseWaitTimeoutError(waitTimeout(this.maxWaitMs, maxHoldMs));
      }
      await within(this.clock, refill ? leftMs : Math.min(WAIT_POLL_MS, leftMs), refill && (() => refill));
    }
  }

  /** Takes a chunk from the global counter into the pool (this server holds the lock). Never rejects. */
  private async refill(counter: Leased, seen: PoolAnswer, seenAt: LocalMs, waiting: number): Promise<void> {
    const { key, spec: { global: budget } } = counter;
    const id = seen.refill!;
    const parentRemaining = seen.parentRemaining < 0 ? Infinity : seen.parentRemaining;
    // What the region's decisions wait for, but not more than the parent had left (it would pause the pool longer).
    const waitingAll = Math.max(waiting, Math.min(seen.waiting, parentRemaining));
    const asked = chunkSize({ recent: seen.recent, waiting: waitingAll, maxUnits: Infinity, parentRemaining });
    if (asked === 0) return this.unlock(counter, id, 0);
    const parent = this.parentOf(counter);
    // Held up past this server's timeout, it takes nothing; its answer lost, it is reclaimed later. Named
    // as the pool knows it: whoever takes over its lock, should it expire first, reclaims it.
    const named = parent.reclaim ? { ...this.takes.name(this.options.globalTimeoutMs), takeId: id } : undefined;
    const grant = await parent.take(asked, named).catch((error: unknown) => {
      if (named) this.takes.failed(named, counter);
      leaseFailed(this.on(budget), 'refill', error);
    });
    // Failed: the global store's breaker paces the next attempts; until then short decisions fail at once.
    if (!grant) return this.unlock(counter, id, this.options.globalTimeoutMs);
    this.takes.answered(grant.parentNow);
    // Late (a slow link) or reclaimed (its lock taken over), it took nothing: not a short parent, whose
    // retry_after would pause the pool.
    if (grant.outcome === 'late' || grant.outcome === 'reclaimed') return this.unlock(counter, id, 0);
    this.on(budget).events.refilled?.(grant.granted);
    this.shortage.note(key, grant, this.clock.now());
    // Short (less than asked, or its last units): no more until its retry_after, at most max_hold (others may give back).
    const short = grant.granted < asked || grant.retryAfterMs > 0;
    const { maxHoldMs, shape } = budget.lease;
    const retryAfterMs = short ? Math.max(1, Math.min(grant.retryAfterMs, maxHoldMs)) : 0;
    const units = { units: grant.granted, expiresAt: toStoreClock(grant.spendBy, seen.storeNow, seenAt), tag: grant.windowTag, window: shape === 'window' };
    try {
      const added = await this.pool.add(key, { ...units, parentRemaining: grant.remaining, retryAfterMs, asked }, id, maxHoldMs);
      this.lapsed(budget, added.lapsed);
      // Refused, its lock taken over: the taker reclaims the take too (its first reclaimer counts it).
      if (!added.spent && named) return this.takes.reclaim(named, counter, 'holder_lost');
      // Tracked again: a sweep may have drained and forgotten the pool while this refill was out.
      if (!this.tracked.has(key)) this.tracked.set(key, { ...counter, lastUsed: this.clock.now() });
    } catch (error) {
      // Not confirmed: the units are in the pool, or (never added) reclaimed by whoever takes the lock over.
      leaseFailed(this.on(budget), 'refill', error, { units: grant.granted });
    }
  }

  /** Lets refill `id`'s lock go (units whose spend-by came meanwhile lapse); `downMs` > 0: short decisions fail at once that long. */
  private async unlock({ key, spec }: Leased, id: string, downMs: number): Promise<void> {
    const answer = await this.pool.fail(key, id, downMs).catch(() => undefined);
    if (answer) this.lapsed(spec.global, answer.lapsed);
  }

  private track(key: string, keys: string[], spec: GlobalRateSpec): Tracked {
    let tracked = this.tracked.get(key);
    if (tracked?.spec === spec) tracked.lastUsed = this.clock.now();
    else this.tracked.set(key, (tracked = { key, keys, spec, lastUsed: this.clock.now() }));
    return tracked;
  }

  private parentOf({ keys, spec }: Leased): LeaseParent {
    const parent = storeParent(this.global, keys, spec as LeasedSpec & GlobalRateSpec, this.clock, spec.global.lease.maxHoldMs, this.options.region);
    const { global: budget } = spec;
    const slidingMs = spec.type === 'sliding_window_counter' ? spec.windowMs : 0;
    return budget.shares ? this.shareViews.observe(parent, { ...budget, shares: budget.shares }, slidingMs) : parent;
  }

  /** The global counter as a lease parent, with where to count its units. */
  private ownerOf(counter: Leased): UnitOwner {
    return { ...this.on(counter.spec.global), parent: this.parentOf(counter), timeoutMs: this.options.globalTimeoutMs };
  }

  private armSweep(interval: number): void {
    this.sweeper = this.clock.setTimer(() => {
      if (this.closed) return;
      this.armSweep(interval);
      void this.sweep();
      void this.takes.settleAll();
    }, interval);
  }

  /** Returns the units of pools unspent for max_hold (whichever server of the region looks first). */
  private sweep(): Promise<void> {
    this.sweeping ??= (async () => {
      const now = this.clock.now();
      for (const [key, tracked] of this.tracked) {
        const idleMs = tracked.spec.global.lease.maxHoldMs;
        if (now - tracked.lastUsed < idleMs) continue;
        // Forgotten first: a decision or a refill meanwhile tracks it again.
        this.tracked.delete(key);
        this.shortage.forget(key);
        await this.returnUnits(tracked, idleMs);
      }
    })().finally(() => (this.sweeping = undefined));
    return this.sweeping;
  }

  /** Drains the pool (if unspent for `idleMs`) and gives its units back to the global counter. */
  private async returnUnits(counter: Leased, idleMs: number): Promise<void> {
    const { global: budget } = counter.spec;
    const drained = await this.pool.drain(counter.key, idleMs, budget.lease.shape === 'window').catch((error: unknown) => {
      // Unanswered: the units stay in the pool (the next drain, or their expiry, counts them).
      leaseFailed(this.on(budget), 'drain', error);
    });
    if (!drained) return;
    this.lapsed(budget, drained.lapsed);
    if (drained.spent && drained.left > 0) await this.takes.give(counter, drained.left, drained.tag);
  }

  private on(budget: GlobalRateSpec['global']) {
    if (!this.counting.has(budget)) {
      const fields = { holder: 'region', policy_id: budget.policyId };
      this.counting.set(budget, { events: this.options.events?.(budget.policyId) ?? {}, shape: budget.lease.shape, fields });
    }
    return this.counting.get(budget)!;
  }

  /** Units whose spend-by came (window ended, a bucket's max_hold passed); their counting looked up only when there are some. */
  private lapsed(budget: GlobalRateSpec['global'], units: number): void {
    if (units > 0) countUnits(this.on(budget), 0, units);
  }

  private waited(budget: GlobalRateSpec['global'], since: LocalMs | undefined): void {
    if (since !== undefined) this.on(budget).events.waited?.((this.clock.now() - since) / 1000);
  }
}
