import { randomUUID } from 'node:crypto';
import { CounterStoreUnavailableError, LeaseWaitTimeoutError } from '../errors.js';
import type { CounterResult, CounterStore, LeaseCounterResult, NamedTake } from '../counters/counter-store.js';
import type { CompiledLease, GlobalBudget, LeaseSpec, RateSpec } from '../counters/counter-spec.js';
import { connectRedisCounterStore, type CounterStoreErrorEvent, type RedisCounterStore } from '../counters/redis-store.js';
import type { RegionConfig } from '../config.js';
import type { MasterState } from '../redis/master-health.js';
import { chunkSize } from './chunk.js';
import type { LendingStore } from './process-leases.js';
import { poolKey, RegionPool, type PoolAnswer, type RegionPoolStore } from './region-pool.js';
import { storeParent, type LeasedSpec } from './store-parent.js';
import { leaseFailureLog } from './failures.js';
import { NamedTakes } from './named-takes.js';
import { ParentShortage, type RefusalTiming } from './parent-shortage.js';
import { DEFAULT_LEASE_MAX_WAIT_MS, expiredReason, systemClock, toStoreClock, waitTimeout, type ClockSample, type Grant, type LapseReason, type LeaseClock, type LeaseEvents, type LeaseParent, type UnitHolders } from './types.js';

/**
 * The counter store of a server in a region (docs/distribution.md). Policies with a regional budget
 * (every spec without `global`) count in the region's store, as without regions. A `budget: "global"`
 * counter lives in the global store; the region leases units from it into a pool in the region's store
 * (lua/lease_pool.lua), and every decision in the region is one call to the region's store, exact
 * against that pool. The region is the holder; the servers of the region run its logic:
 *
 * - Refill ahead: the spend that leaves the pool half empty (or finds it short) hands its server the
 *   region's refill lock (SET NX PX semantics, in the pool), and that server takes a chunk from the
 *   global counter (the algorithm's own script, partial take) off the decision's path.
 * - Waiting: only a decision the pool cannot serve waits, for the next refill of the region to start,
 *   whichever server makes it (that refill asks for what all of them want). Once it has landed, one the
 *   pool still cannot pay is refused if the global counter could not give them all (it admits no more
 *   now), as a holder refuses its waiters after a short take, with what is left of the counter's
 *   retry_after (at most max_hold); else it waits for the next. A server's own refill is awaited;
 *   another server's is looked for every WAIT_POLL_MS.
 * - The chunk rule (chunk.ts) without the max_units cap, on what the whole region spent lately (the
 *   pool measures it).
 * - Letting go: units unspent for max_hold, and those of a policy that changed, go back (the
 *   algorithm's window-checked return); units expire with the window (conservatively, see `expiresAtOf`).
 * - Parent unreachable: the pool keeps answering; once short, the failure mode answers.
 *
 * `sliding_window_log` and concurrency have no leases: with a global budget each of their operations
 * goes to the global store (exact, at the global store's latency).
 *
 * Stores, pool, clock and timers are injected: production wires Redis stores and the system clock
 * (`connectRegionCounterStore`); the lease simulation runs this very code against in-memory ones.
 */
export interface RegionStoreOptions<Regional extends RegionSideStore = RedisCounterStore> {
  /** This region's store (RL_COUNTERSTORE_ADDR). */
  regional: Regional;
  /** The pool of the region's units, in the region's store (RegionPool over `regional` in production). */
  pool: RegionPoolStore;
  /** The global store (RL_GLOBAL_COUNTERSTORE_ADDR). */
  global: RegionSideStore;
  /** RL_GLOBAL_COUNTERSTORE_TIMEOUT_MS: the longest a refill may take. */
  globalTimeoutMs: number;
  /** RL_COUNTERSTORE_TIMEOUT_MS: with the global timeout, how long the region's refill lock lasts. */
  regionalTimeoutMs: number;
  /** RL_LEASE_MAX_WAIT_MS: the longest a decision waits for a refill of the region's units (default 100). */
  maxWaitMs?: number;
  /** The metric hooks of the region holder of one policy (level `region`). */
  events?: (policyId: string) => LeaseEvents;
  /**
   * This server's clock (default systemClock: performance.now, unref'd timers). Only durations are taken
   * from it; its timers pace the idle sweep and a waiting decision's looks at the pool.
   */
  clock?: LeaseClock;
  /** How often units unspent for max_hold are looked for (default 250 ms; 0 = never, for tests). */
  sweepIntervalMs?: number;
}

/** A store on either side of a region: the counter operations with leases, and (Redis) its failures. */
export type RegionSideStore = LendingStore & { onError?(listener: (event: CounterStoreErrorEvent) => void): () => void };

/** How long a waiting decision sleeps between looks at the pool while another server refills it. */
const WAIT_POLL_MS = 2;

/** A global budget's spec whose algorithm leases (its region holder's compiled lease is there). */
type GlobalRateSpec = RateSpec & { global: GlobalBudget & { lease: CompiledLease } };

function isLeased(spec: RateSpec): spec is GlobalRateSpec {
  return spec.global?.lease !== undefined;
}

interface Tracked {
  keys: string[];
  spec: GlobalRateSpec;
  lastUsed: number;
}

/** A server's (or a sidecar's) store with regions configured: RL_COUNTERSTORE_ADDR is the region's, the global store RL_GLOBAL_COUNTERSTORE_ADDR. */
export function connectRegionCounterStore(options: {
  counterStoreAddr: string;
  counterStoreTimeoutMs: number;
  region: RegionConfig;
  maxWaitMs: number;
  events?: (policyId: string) => LeaseEvents;
}): RegionCounterStore {
  const { region } = options;
  const regional = connectRedisCounterStore(options.counterStoreAddr, { commandTimeoutMs: options.counterStoreTimeoutMs });
  return new RegionCounterStore({
    regional,
    pool: new RegionPool(regional),
    global: connectRedisCounterStore(region.globalStoreAddr, { commandTimeoutMs: region.globalTimeoutMs, connectionName: 'rl-global-counter-store' }),
    globalTimeoutMs: region.globalTimeoutMs,
    regionalTimeoutMs: options.counterStoreTimeoutMs,
    maxWaitMs: options.maxWaitMs,
    events: options.events,
  });
}

export class RegionCounterStore<Regional extends RegionSideStore = RedisCounterStore> implements CounterStore, UnitHolders {
  /** This region's store (RL_COUNTERSTORE_ADDR). */
  readonly regional: Regional;
  private readonly global: RegionSideStore;
  private readonly pool: RegionPoolStore;
  private readonly clock: LeaseClock;
  /** ms a refill may take, its lock held: one global call and one regional one. */
  private readonly lockMs: number;
  private readonly maxWaitMs: number;
  private readonly eventsOf: (policyId: string) => LeaseEvents;
  /** The hooks of each policy's holder, made once per policy version. */
  private readonly events = new WeakMap<GlobalBudget, LeaseEvents>();
  /** This server's name in the pool's refill lock. */
  private readonly token = randomUUID();
  /** Pools this server spent from lately, by pool key: the idle sweep and policy changes return their units. */
  private readonly tracked = new Map<string, Tracked>();
  /** This server's refill in flight, by pool key: its waiting decisions wait for it, not for a timer. */
  private readonly refills = new Map<string, Promise<void>>();
  /** The global counters' own retry_after and reset_after while they admit no more, by pool key. */
  private readonly shortage = new ParentShortage();
  /** This server's refills named, with deadlines in the global store's clock; those whose answer was lost, to reclaim. */
  private readonly takes: NamedTakes<Pick<Tracked, 'keys' | 'spec'>>;
  private reclaiming: Promise<void> | undefined;
  private sweeper: unknown;
  private sweeping = false;
  private closed = false;
  private lettingGo: Promise<void> | undefined;
  private closing: Promise<void> | undefined;

  constructor(private readonly options: RegionStoreOptions<Regional>) {
    this.regional = options.regional;
    this.global = options.global;
    this.pool = options.pool;
    this.clock = options.clock ?? systemClock;
    this.lockMs = options.globalTimeoutMs + options.regionalTimeoutMs;
    this.maxWaitMs = options.maxWaitMs ?? DEFAULT_LEASE_MAX_WAIT_MS;
    this.eventsOf = options.events ?? (() => ({}));
    this.takes = new NamedTakes(this.clock);
    const interval = options.sweepIntervalMs ?? 250;
    if (interval > 0) this.armSweep(interval);
  }

  consume(keys: string[], spec: RateSpec, cost: number, nowMs?: number): Promise<CounterResult> {
    if (!spec.global) return this.regional.consume(keys, spec, cost, nowMs);
    if (!isLeased(spec)) return this.global.consume(keys, spec, cost, nowMs);
    return this.spend(keys, spec, cost);
  }

  /** CONTRACT "Peek": the parent (units held by regions count as used) plus this region's unspent units. */
  async peek(keys: string[], spec: RateSpec, nowMs?: number): Promise<CounterResult> {
    if (!spec.global) return this.regional.peek(keys, spec, nowMs);
    if (!isLeased(spec)) return this.global.peek(keys, spec, nowMs);
    const [parent, held] = await Promise.all([this.global.peek(keys, spec), this.pool.peek(poolKey(keys[0]))]);
    this.noteLapsed(spec.global, held.lapsed);
    const remaining = parent.remaining + held.left;
    if (held.left >= 1) return { allowed: true, remaining, retryAfterMs: 0, resetAfterMs: Math.max(parent.resetAfterMs, held.resetAfterMs) };
    return { ...parent, remaining };
  }

  /** CONTRACT "Refund": the units go back to this region's unspent units. */
  async refund(keys: string[], spec: RateSpec, amount: number, nowMs?: number): Promise<CounterResult> {
    if (!spec.global) return this.regional.refund(keys, spec, amount, nowMs);
    if (!isLeased(spec)) return this.global.refund(keys, spec, amount, nowMs);
    const held = await this.pool.refund(poolKey(keys[0]), amount);
    this.noteLapsed(spec.global, held.lapsed);
    return { allowed: true, remaining: Math.max(0, held.parentRemaining), retryAfterMs: 0, resetAfterMs: held.resetAfterMs };
  }

  /**
   * A process lease's take (CONTRACT: process leases below the region's): up to `n` units out of the
   * region pool, under the pool's tag (a bucket's: so a return goes back only into the units it came
   * from), spendable until their window ends, a bucket's for the taker's hold (docs/distribution.md).
   */
  async take(keys: string[], spec: RateSpec, n: number, nowMs?: number, named?: NamedTake): Promise<LeaseCounterResult> {
    if (!spec.global) return this.regional.take(keys, spec, n, nowMs, named);
    if (!isLeased(spec)) return this.global.take(keys, spec, n, nowMs, named);
    const answer = await this.fromPool('take', keys, spec, n);
    const window = spec.global.lease.shape === 'window';
    return {
      allowed: answer.spent,
      remaining: Math.max(0, answer.parentRemaining),
      ...(answer.spent ? { retryAfterMs: 0, resetAfterMs: answer.resetAfterMs } : await this.refusal(keys, spec, answer)),
      units: answer.spent ? answer.left : 0,
      windowTag: answer.tag ?? 0,
      windowLeftMs: !answer.spent ? 0 : window ? answer.resetAfterMs : (named?.holdMs ?? 0),
      storeNow: answer.storeNow,
      outcome: 'done',
      lapsed: 0,
    };
  }

  /** A process lease's return: back into the region pool, only into live units of the same tag (take). */
  async giveBack(keys: string[], spec: RateSpec, units: number, windowTag: number | null, nowMs?: number): Promise<LeaseCounterResult> {
    if (!spec.global) return this.regional.giveBack(keys, spec, units, windowTag, nowMs);
    if (!isLeased(spec)) return this.global.giveBack(keys, spec, units, windowTag, nowMs);
    const answer = await this.pool.refund(poolKey(keys[0]), units, { tag: windowTag });
    this.noteLapsed(spec.global, answer.lapsed);
    const passedOn = units > answer.left ? await this.passOnToGlobal(keys, spec, units - answer.left, windowTag) : 0;
    return {
      allowed: true, remaining: Math.max(0, answer.parentRemaining), retryAfterMs: 0, resetAfterMs: 0, units: answer.left + passedOn, windowTag: windowTag ?? 0, windowLeftMs: 0,
      storeNow: answer.storeNow, outcome: 'done', lapsed: units - answer.left - passedOn,
    };
  }

  /**
   * A window's units a process lease gives back that the region's pool no longer takes (the region
   * gave its units of that window back meanwhile, after max_hold unspent): they left the global counter
   * for this region, so they go back there, under the window they were taken for (the global counter
   * takes them only while it lasts). A bucket's tag names the pool's units, not the global counter's:
   * those stay lapsed. Answers how many went back; the rest is the caller's to count.
   */
  private async passOnToGlobal(keys: string[], spec: GlobalRateSpec, units: number, windowTag: number | null): Promise<number> {
    if (spec.global.lease.shape !== 'window' || windowTag === null) return 0;
    try {
      const back = await this.parentOf(keys, spec).giveBack(units, windowTag);
      if (back > 0) this.eventsFor(spec.global).returned?.(back);
      return back;
    } catch (error) {
      this.eventsFor(spec.global).failed?.('give_back');
      leaseFailureLog.failed('give_back', error, { holder: 'region', policy_id: spec.global.policyId });
      return 0;
    }
  }

  acquire(keys: string[], spec: LeaseSpec, leaseId: string, nowMs?: number): Promise<CounterResult> {
    return (spec.global ? this.global : this.regional).acquire(keys, spec, leaseId, nowMs);
  }

  release(keys: string[], spec: LeaseSpec, leaseId: string, nowMs?: number): Promise<CounterResult> {
    return (spec.global ? this.global : this.regional).release(keys, spec, leaseId, nowMs);
  }

  /** The global store as this server sees it (for /rl/v1/info and the dashboard): reachable, and each master's breaker. */
  globalStoreHealth(): { reachable: boolean; masters: MasterState[] } {
    const masters = (this.global as { health?: { states(): MasterState[] } }).health?.states() ?? [];
    return { reachable: this.global.isHealthy(), masters };
  }

  /** The region's store: decisions need it; the global store only for refills. */
  isHealthy(): boolean {
    return this.regional.isHealthy();
  }

  /** Failed operations of either store (the dashboard shows the last one's kind). */
  onError(listener: (event: CounterStoreErrorEvent) => void): () => void {
    const off = [this.regional.onError?.(listener), this.global.onError?.(listener)];
    return () => off.forEach((unsubscribe) => unsubscribe?.());
  }

  /**
   * A policy changed (or went): the pools whose policy is gone or no longer compiles to the spec they
   * were spent under go back, counted under the limit they were taken for (DecisionService calls this
   * on every policy change, in server, sidecar and embedded use alike).
   */
  async policiesChanged(current: (policyId: string) => { spec: unknown } | undefined): Promise<void> {
    const changed = [...this.tracked].filter(([, t]) => current(t.spec.global.policyId)?.spec !== t.spec);
    await Promise.all(changed.map(([key, t]) => this.returnUnits(key, t, 0)));
  }

  /**
   * Drain (CONTRACT "Letting go"): the units of the pools this server spent from go back to the global
   * counter, so the last server of a region to stop leaves none held until the window ends; the
   * region's other servers refill on their next need.
   */
  letGoAll(): Promise<void> {
    this.lettingGo ??= (async () => {
      this.closed = true;
      if (this.sweeper !== undefined) this.clock.clearTimer(this.sweeper);
      await Promise.all([...[...this.tracked].map(([key, t]) => this.returnUnits(key, t, 0)), this.reclaimUnanswered()]);
    })();
    return this.lettingGo;
  }

  /** Lets go (if not yet done), then closes both stores. */
  close(): Promise<void> {
    this.closing ??= this.letGoAll().then(() => Promise.all([this.regional.close(), this.global.close()])).then(() => undefined);
    return this.closing;
  }

  // -------------------------------------------------------------------------------------------------

  /** One decision against the region's pool. */
  private async spend(keys: string[], spec: GlobalRateSpec, cost: number): Promise<CounterResult> {
    const answer = await this.fromPool('spend', keys, spec, cost);
    if (!answer.spent) return { allowed: false, remaining: answer.left, ...(await this.refusal(keys, spec, answer)) };
    return { allowed: true, remaining: answer.left + Math.max(0, answer.parentRemaining), retryAfterMs: 0, resetAfterMs: answer.resetAfterMs };
  }

  /**
   * A refusal's timing (CONTRACT "Honest refusals"): the global counter's own retry_after and reset_after,
   * not the pool's pause (at most max_hold, after which the pool asks the parent again and finds units
   * other regions gave back). Known from this server's last refill or peek while it lasts; else one peek
   * of the global counter, bounded by RL_LEASE_MAX_WAIT_MS (slow or failed: the pool's own).
   */
  private async refusal(keys: string[], spec: GlobalRateSpec, answer: PoolAnswer): Promise<RefusalTiming> {
    const key = poolKey(keys[0]);
    const pool = { retryAfterMs: answer.retryAfterMs, resetAfterMs: answer.retryAfterMs };
    const known = this.shortage.at(key, this.clock.now());
    if (known) return longer(known, pool);
    if (this.maxWaitMs <= 0) return pool;
    const peek = await Promise.race([this.global.peek(keys, spec).catch(() => undefined), this.sleep(this.maxWaitMs)]);
    if (peek === undefined) return pool;
    this.shortage.note(key, peek, this.clock.now());
    return longer(peek, pool);
  }

  /**
   * Spends `cost` from the region's pool (`take`: up to `cost`, for a process lease below the region),
   * waiting only when the pool cannot serve it: for this server's refill of the pool, or for another
   * server's. Answers once served or refused (the parent admits nothing now); throws
   * CounterStoreUnavailableError when the pool is short and the global store unreachable (the failure
   * mode then answers).
   */
  private async fromPool(op: 'spend' | 'take', keys: string[], spec: GlobalRateSpec, cost: number): Promise<PoolAnswer> {
    const key = poolKey(keys[0]);
    const { maxHoldMs } = spec.global.lease;
    const lockMs = this.lockMs;
    let waitingSince: number | undefined;
    /** The refill of the region this decision waits for (the pool counts it there; 0: none yet). */
    let waitsFor = 0;
    for (;;) {
      const answer = await this.pool.spend(key, cost, lockMs, this.token, maxHoldMs, waitingSince === undefined, op, waitsFor);
      // The pool's store clock as this answer read it, and this server's when it arrived: from then on
      // that store's clock reads at least storeNow + elapsed. Per answer, not per server: a regional
      // Redis Cluster's pools live on nodes whose clocks may differ.
      const storeClock: ClockSample = { storeNow: answer.storeNow, localAt: this.clock.now() };
      this.track(key, keys, spec);
      this.noteLapsed(spec.global, answer.lapsed);
      // The lock is this server's: refill (even with a refill of its own on its way, whose add may have
      // released an earlier lock already): for this decision's cost if the pool could not pay it, for
      // none if it did (a refill ahead: the chunk rule alone, never more than half of what the parent
      // has left), for a process lease's whole take either way (what the process below asks for). Else
      // wait for this server's refill of the pool, if any.
      const waiting = answer.spent && op === 'spend' ? 0 : cost;
      const refill = answer.lock ? this.startRefill(key, keys, spec, answer, storeClock, waiting) : this.refills.get(key);
      if (answer.spent || answer.retryAfterMs > 0) {
        this.waited(spec.global, waitingSince);
        return answer;
      }
      if (answer.down && !answer.lock) {
        this.waited(spec.global, waitingSince);
        throw new CounterStoreUnavailableError('global store unreachable, and this region holds too few units of the global budget');
      }
      waitsFor = answer.waitsFor;
      waitingSince ??= this.clock.now();
      // CONTRACT "Bounded wait": refused, not failed (a slow parent is not a failed one); the refill goes on.
      const leftMs = waitingSince + this.maxWaitMs - this.clock.now();
      if (leftMs <= 0) {
        this.waited(spec.global, waitingSince);
        throw new LeaseWaitTimeoutError(waitTimeout(this.maxWaitMs, maxHoldMs));
      }
      // This server refills the pool: wait for that refill. Another server does: look again shortly
      // (its refill's end reaches this server only through the pool).
      if (refill) await Promise.race([refill, this.sleep(leftMs)]);
      else await this.sleep(Math.min(WAIT_POLL_MS, leftMs));
    }
  }

  private startRefill(key: string, keys: string[], spec: GlobalRateSpec, seen: PoolAnswer, storeClock: ClockSample, waiting: number): Promise<void> {
    const refill = this.refill(key, keys, spec, seen, storeClock, waiting).finally(() => {
      if (this.refills.get(key) === refill) this.refills.delete(key);
    });
    this.refills.set(key, refill);
    return refill;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.clock.setTimer(resolve, ms));
  }

  /**
   * Takes a chunk from the global counter into the pool (this server holds the region's refill lock).
   * Never rejects: a failure marks the pool's parent unreachable for a moment and releases the lock.
   */
  private async refill(key: string, keys: string[], spec: GlobalRateSpec, seen: PoolAnswer, storeClock: ClockSample, waiting: number): Promise<void> {
    const parentRemaining = seen.parentRemaining < 0 ? Infinity : seen.parentRemaining;
    const asked = chunkSize({
      recent: seen.recent,
      // The decisions of the region waiting for this refill (CONTRACT: at least the cost of the decisions
      // waiting), but no more than the parent had left, if that is more than this one's cost: asking
      // for more gets nothing more, and a parent's retry_after for it would pause the pool for longer.
      waiting: Math.max(waiting, Math.min(seen.waiting, parentRemaining)),
      maxUnits: Infinity,
      parentRemaining,
    });
    if (asked === 0) {
      // Nothing worth asking for ahead of need: let the lock go.
      await this.pool.fail(key, this.token, 0).catch(() => undefined);
      return;
    }
    let grant: Grant;
    const parent = this.parentOf(keys, spec);
    // Named, with a deadline by the global store's clock: held up on the link past this server's
    // timeout it takes nothing there; its answer lost, it is reclaimed once the store answers again.
    const named = parent.reclaim ? this.takes.name(this.options.globalTimeoutMs) : undefined;
    try {
      grant = await parent.take(asked, named);
      this.takes.sampled(grant.parentNow);
    } catch (error) {
      if (named) this.takes.failed(named, { keys, spec });
      this.eventsFor(spec.global).failed?.('refill');
      leaseFailureLog.failed('refill', error, { holder: 'region', policy_id: spec.global.policyId });
      // The global store's own breaker paces the next attempts; until then, short decisions fail at once.
      await this.pool.fail(key, this.token, this.options.globalTimeoutMs).catch(() => undefined);
      return;
    }
    if (this.takes.pending() > 0) void this.reclaimUnanswered();
    if (grant.outcome === 'late') {
      // It reached the global store past its deadline (a slow link) and took nothing: not a short
      // parent, whose retry_after would pause the pool. The lock goes; the next decision refills again.
      await this.pool.fail(key, this.token, 0).catch(() => undefined);
      return;
    }
    this.eventsFor(spec.global).refilled?.(grant.granted);
    // Short (less than asked, or its last units): what its refusals tell, until the parent's retry_after.
    this.shortage.note(key, grant, this.clock.now());
    try {
      const added = await this.pool.add(
        key,
        {
          units: grant.granted,
          expiresAt: toStoreClock(grant.spendBy, storeClock),
          tag: grant.windowTag,
          window: spec.global.lease.shape === 'window',
          parentRemaining: grant.remaining,
          // Less than asked, or the last units: the parent admits no more until its retry_after, or for
          // at most max_hold (other regions may return units before the window ends). Nothing taken,
          // the pool refuses without asking again until then; else the waiting decisions it refuses
          // are told so.
          retryAfterMs: grant.granted < asked || grant.retryAfterMs > 0 ? Math.max(1, Math.min(grant.retryAfterMs, spec.global.lease.maxHoldMs)) : 0,
          asked,
        },
        this.token,
        spec.global.lease.maxHoldMs,
      );
      this.noteLapsed(spec.global, added.lapsed);
    } catch (error) {
      // The region's store did not confirm: the units may be in the pool or lost (never twice).
      this.eventsFor(spec.global).failed?.('refill');
      leaseFailureLog.failed('refill', error, { holder: 'region', policy_id: spec.global.policyId, units: grant.granted });
    }
  }

  private track(key: string, keys: string[], spec: GlobalRateSpec): void {
    const known = this.tracked.get(key);
    if (known && known.spec === spec) known.lastUsed = this.clock.now();
    else this.tracked.set(key, { keys, spec, lastUsed: this.clock.now() });
  }

  /** The global counter of `keys` as this region's parent. */
  private parentOf(keys: string[], spec: GlobalRateSpec): LeaseParent {
    return storeParent(this.global, keys, spec as LeasedSpec & GlobalRateSpec, this.clock, spec.global.lease.maxHoldMs);
  }

  /**
   * Gives back what this server's refills whose answer was lost took (off the decision path: after a
   * refill the global store answered, on the sweep, on drain). Units that went back are counted
   * returned; those that could not (their window ended, a bucket's hold passed, before the store could
   * be reached again) lapsed, parent unreachable. `ahead`: the take never ran, and now never will.
   * Never rejects: a reclaim that fails again is tried at the next chance.
   */
  private reclaimUnanswered(): Promise<void> {
    this.reclaiming ??= (async () => {
      await Promise.all(
        this.takes.toReclaim().map(async (take) => {
          const { keys, spec } = take.context;
          try {
            const answer = await this.parentOf(keys, spec).reclaim!(take.takeId, take.deadline);
            this.takes.sampled(answer.parentNow);
            if (answer.outcome !== 'done') return;
            if (answer.returned > 0) this.eventsFor(spec.global).returned?.(answer.returned);
            this.noteLapsed(spec.global, answer.lapsed, 'parent_unreachable');
          } catch {
            this.takes.retry(take);
          }
        }),
      );
    })().finally(() => {
      this.reclaiming = undefined;
    });
    return this.reclaiming;
  }

  /** Every `interval` ms, as long as this store is open (a timer of the injected clock, re-armed). */
  private armSweep(interval: number): void {
    this.sweeper = this.clock.setTimer(() => {
      if (this.closed) return;
      this.armSweep(interval);
      void this.sweep();
      if (this.takes.pending() > 0) void this.reclaimUnanswered();
    }, interval);
  }

  /** Returns the units of pools unspent for max_hold (whichever server of the region looks first). */
  private async sweep(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      const now = this.clock.now();
      for (const [key, tracked] of this.tracked) {
        const idleMs = tracked.spec.global.lease.maxHoldMs;
        if (now - tracked.lastUsed < idleMs) continue;
        await this.returnUnits(key, tracked, idleMs);
        // Forgotten once returned: this server spends from it again only if a decision comes.
        this.tracked.delete(key);
      }
    } finally {
      this.sweeping = false;
    }
  }

  /** Drains the pool (if unspent for `idleMs`) and gives its units back to the global counter. */
  private async returnUnits(key: string, tracked: Tracked, idleMs: number): Promise<void> {
    const { keys, spec } = tracked;
    let drained: PoolAnswer;
    try {
      drained = await this.pool.drain(key, idleMs, spec.global.lease.shape === 'window');
    } catch (error) {
      // The region's store did not answer: the units stay in the pool (the next drain, or their expiry, counts them).
      this.eventsFor(spec.global).failed?.('drain');
      leaseFailureLog.failed('drain', error, { holder: 'region', policy_id: spec.global.policyId });
      return;
    }
    this.noteLapsed(spec.global, drained.lapsed);
    if (!drained.spent || drained.left <= 0) return;
    try {
      const back = await this.parentOf(keys, spec).giveBack(drained.left, drained.tag);
      this.eventsFor(spec.global).returned?.(back);
      this.noteLapsed(spec.global, drained.left - back);
    } catch (error) {
      // Unreachable: the units are lost to this window (under-admission only).
      this.noteLapsed(spec.global, drained.left, 'parent_unreachable');
      this.eventsFor(spec.global).failed?.('give_back');
      leaseFailureLog.failed('give_back', error, { holder: 'region', policy_id: spec.global.policyId });
    }
  }

  private eventsFor(budget: GlobalBudget): LeaseEvents {
    let events = this.events.get(budget);
    if (!events) {
      events = this.eventsOf(budget.policyId);
      this.events.set(budget, events);
    }
    return events;
  }

  /** Units that lapsed: by default those whose spend-by came (their window ended, a bucket's max_hold passed). */
  private noteLapsed(budget: GlobalRateSpec['global'], units: number, reason: LapseReason = expiredReason(budget.lease.shape)): void {
    if (units > 0) this.eventsFor(budget).lapsed?.(units, reason);
  }

  private waited(budget: GlobalBudget, since: number | undefined): void {
    if (since !== undefined) this.eventsFor(budget).waited?.((this.clock.now() - since) / 1000);
  }
}

/** The later of two refusals' timings. */
function longer(a: RefusalTiming, b: RefusalTiming): RefusalTiming {
  return { retryAfterMs: Math.max(a.retryAfterMs, b.retryAfterMs), resetAfterMs: Math.max(a.resetAfterMs, b.resetAfterMs) };
}
