import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import type { PeriodPair } from '../util/calendar-period.js';
import { CounterStoreUnavailableError } from '../errors.js';
import { log } from '../util/log.js';
import type { CircuitBreaker, CircuitBreakerOptions } from './circuit-breaker.js';
import { ANY_SLOT, MasterHealth } from './master-health.js';
import type { CounterResult, CounterStore, GiveBackRequest, GroupOperation, GroupOutcome, LeaseCounterResult, NamedTake, TakeReclaim } from '../counters/counter-store.js';
import { groupArgs, parseGroupReply, settleShare, slotGroups, type GroupArgs, type SlotGroup } from './redis-group.js';
import { parseAcquireReply } from './redis-script-reply.js';
import { specParams } from './counter-script-protocols.js';
import { sharesKey, takesKey } from '../counters/keys.js';
import { logShareOf, regionShareOf, shareArgs } from '../counters/shares.js';
import { checkTakeId } from '../counters/parent-take-ledger.js';
import { calendarParams, isCalendarSpec, type CounterSpec, type ConcurrencySpec, type RateSpec } from '../counters/counter-spec.js';
import { SCRIPT_KEY_COUNTS, withShareLedger, withTakeLedger, type ScriptName } from './lua-scripts.js';
import { ScriptBatcher, type ScriptCall } from './redis-batcher.js';
import { ErrorReporter, withDeadline, type CounterStoreErrorEvent } from './redis-store-errors.js';
import {
  createRedisClient,
  DEFAULT_COMMAND_TIMEOUT_MS,
  describeAddress,
  parseCounterStoreAddress,
  type RedisClientOptions,
} from './redis-connection.js';

/**
 * The Redis backend of CounterStore: every operation is one atomic Lua script (lua/*.lua). The scripts
 * are ports of MemoryCounterStore and must give the same numbers.
 *
 * Operations issued in the same event-loop turn share one script call per hash slot (redis-batcher.ts,
 * which says how); the results are those of running them one by one in arrival order.
 *
 * Failure is explicit and fast. Any error (not connected, timeout, Redis error) is thrown as
 * CounterStoreUnavailableError, so the decision applies the policy's failure_mode; nothing is queued
 * while disconnected and a command that timed out is never sent again. A batch that times out or
 * cannot be sent fails each of its operations exactly as a lone call would (one error and one error
 * event per operation). Each batch has one deadline: `operationTimeoutMs` from its first operation.
 *
 * Health is per master (redis/master-health.ts): on a Cluster each master has its own circuit breaker
 * and count of calls in flight, found through the slot's current owner, so a dead master refuses only
 * its own slots' operations; standalone and Sentinel have one. A breaker counts round trips, not
 * operations: a failed batch is ONE failure and an answered batch one success, whatever their size, so
 * the threshold ("5 consecutive failures") counts failed script calls, not the decisions in them
 * (counting each operation would let a single timed-out batch of five open the breaker). While a
 * master's breaker is open its operations fail in microseconds without touching Redis; the half-open
 * trial is a single operation.
 */

/** The store's error events are part of its interface (onError): importers find them here. */
export type { CounterStoreErrorEvent, CounterStoreErrorKind } from './redis-store-errors.js';

export interface RedisCounterStoreOptions {
  /**
   * Options for each master's breaker (default: 5 failures, 1 s cool-down), or, outside a Cluster,
   * the one breaker to use.
   */
  breaker?: CircuitBreaker | CircuitBreakerOptions;
  /**
   * Deadline for one operation, ms (default 100), counted from the arrival of its batch's first
   * operation: one timer per script call, which also bounds cluster redirections and the wait for the
   * very first connection. (connectRedisCounterStore's client has no per-command timer of its own.)
   */
  operationTimeoutMs?: number;
  /** close() quits the client (default true). */
  ownsClient?: boolean;
  /** Most operations in one script call (default 100); a full batch is sent at once. */
  maxBatchSize?: number;
}

export interface ConnectRedisCounterStoreOptions extends RedisClientOptions {
  breaker?: CircuitBreaker | CircuitBreakerOptions;
  maxBatchSize?: number;
}

const DEFAULT_MAX_BATCH_SIZE = 100;
/** A script call's `rest` until it is given one (never written: the batcher only reads it). */
const NO_ARGS: string[] = [];

/** The ARGV of an operation after `now` and its operation (lease id), and its ARGV count, as strings. */
interface SpecArgs extends GroupArgs {
  /** A calendar spec's: the period pair the params end with (they are made again for the next pair). */
  pair?: PeriodPair;
}

/**
 * One counter operation as `run` and `runLease` read it: its script, keys and clock, `operation` (a rate
 * script's, or a concurrency slot id) and its `units` (rate scripts only), the spec, then `extra` (a lease
 * operation's own arguments, lua/includes/lease.lua, or a sliding log's share), whether the counter's
 * take `ledger` goes along (a named take or give, a reclaim), the `region` of a lease operation on a
 * global budget with shares, and `parse` for its reply (parseReply unless given).
 */
interface CounterOperation {
  name: ScriptName;
  keys: string[];
  nowMs: number | undefined;
  operation: string;
  units: string | undefined;
  spec: CounterSpec;
  extra: string[] | undefined;
  ledger: boolean;
  region: string | undefined;
  parse: ((reply: unknown) => CounterResult) | undefined;
}

export class RedisCounterStore implements CounterStore {
  readonly client: Redis | Cluster;
  /** Breaker and calls in flight per master. */
  readonly health: MasterHealth;
  private readonly ownsClient: boolean;
  private readonly isCluster: boolean;
  private readonly errors = new ErrorReporter();
  private readonly batcher: ScriptBatcher;
  /** String ARGV per spec, built on first use: specs are built once per policy version (counter-spec.ts). */
  private readonly specArgs = new WeakMap<CounterSpec, SpecArgs>();
  private connectionLost = false;
  private closed = false;
  /**
   * One operation and one script call, refilled by each call: both are read before the call returns
   * (the batcher copies what it keeps), so no object is made per operation for them.
   */
  private readonly op: CounterOperation = {
    name: 'fixed_window', keys: [], nowMs: undefined, operation: '', units: undefined, spec: { type: 'concurrency', maxConcurrency: 0, leaseTtlMs: 0 },
    extra: undefined, ledger: false, region: undefined, parse: undefined,
  };
  private readonly call: ScriptCall = { name: 'fixed_window', keys: [], argc: '', now: '', operation: '', units: undefined, rest: NO_ARGS, parse: undefined, batchName: undefined };

  constructor(client: Redis | Cluster, options: RedisCounterStoreOptions = {}) {
    this.client = client;
    this.health = new MasterHealth(client, options.breaker);
    const timeoutMs = options.operationTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
    if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) {
      throw new Error(`operationTimeoutMs must be a positive number, got ${timeoutMs}`);
    }
    const maxBatchSize = options.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE;
    if (!Number.isInteger(maxBatchSize) || maxBatchSize < 1) {
      throw new Error(`maxBatchSize must be a positive integer, got ${maxBatchSize}`);
    }
    this.ownsClient = options.ownsClient ?? true;
    this.isCluster = client.isCluster;
    this.batcher = new ScriptBatcher(client, this.health, this.errors, timeoutMs, maxBatchSize);
    client.on('ready', () => {
      if (this.connectionLost) {
        this.connectionLost = false;
        log.info('counter store connection restored');
      }
    });
    // Without a listener ioredis prints every connection error; report each outage once instead.
    client.on('error', (err: Error) => {
      if (!this.connectionLost && !this.closed) {
        this.connectionLost = true;
        log.warn('counter store connection error', { error: err.message });
      }
    });
    client.on('close', () => {
      if (!this.batcher.startingUp && !this.closed && !this.connectionLost) {
        this.connectionLost = true;
        log.warn('counter store connection closed');
      }
    });
  }

  consume(keys: string[], spec: RateSpec, cost: number, nowMs?: number, region?: string): Promise<CounterResult> {
    const op = this.prepared(spec.type, keys, spec, nowMs, 'consume');
    op.units = String(cost);
    op.extra = logShareArgs(spec, region);
    return this.run(op);
  }

  /** The algorithm's own script in its read-only mode (lua/includes/mode.lua). */
  peek(keys: string[], spec: RateSpec, nowMs?: number, region?: string): Promise<CounterResult> {
    const op = this.prepared(spec.type, keys, spec, nowMs, 'peek');
    op.units = '1';
    op.extra = logShareArgs(spec, region);
    return this.run(op);
  }

  refund(keys: string[], spec: RateSpec, amount: number, nowMs?: number, region?: string): Promise<CounterResult> {
    const op = this.prepared(spec.type, keys, spec, nowMs, 'refund');
    op.units = String(amount);
    op.extra = logShareArgs(spec, region);
    return this.run(op);
  }

  /** The algorithm's own script, its partial take (lua/includes/mode.lua), named or not (lua/includes/lease.lua). */
  async take(keys: string[], spec: RateSpec, n: number, nowMs?: number, named: NamedTake = {}): Promise<LeaseCounterResult> {
    const { takeId, deadline, holdMs } = named;
    if (takeId !== undefined) checkTakeId(takeId);
    const op = this.prepared(spec.type, keys, spec, nowMs, 'take');
    op.units = String(n);
    return this.lease(op, [takeId ?? '', optionalNumber(deadline), String(holdMs ?? 0)], named);
  }

  /** The algorithm's own script: settles a named take or give (lua/includes/lease.lua). */
  async reclaim(keys: string[], spec: RateSpec, take: TakeReclaim, nowMs?: number): Promise<LeaseCounterResult> {
    checkTakeId(take.takeId);
    if (take.by !== undefined) checkTakeId(take.by, 'a reclaimer');
    const op = this.prepared(spec.type, keys, spec, nowMs, 'reclaim');
    op.units = '0';
    return this.lease(op, [take.takeId, optionalNumber(take.deadline), take.by ?? ''], take);
  }

  /** The algorithm's own script, its window-checked return (lua/includes/mode.lua), named or not (lua/includes/lease.lua). */
  async giveBack(keys: string[], spec: RateSpec, { units, windowTag, nowMs, named = {} }: GiveBackRequest): Promise<LeaseCounterResult> {
    const { takeId, deadline } = named;
    if (takeId !== undefined) checkTakeId(takeId);
    const op = this.prepared(spec.type, keys, spec, nowMs, 'give');
    op.units = String(units);
    return this.lease(op, [takeId ?? '', optionalNumber(deadline), String(windowTag ?? 0)], named);
  }

  acquire(keys: string[], spec: ConcurrencySpec, slotId: string, nowMs?: number): Promise<CounterResult> {
    const op = this.prepared('concurrency_acquire', keys, spec, nowMs, slotId);
    op.parse = parseAcquireReply;
    return this.run(op);
  }

  release(keys: string[], spec: ConcurrencySpec, slotId: string, nowMs?: number): Promise<CounterResult> {
    const op = this.prepared('concurrency_release', keys, spec, nowMs, slotId);
    return this.run(op);
  }

  /**
   * All or nothing (redis-group.ts): one group entry per hash slot in that slot's batch, checked then
   * run by lua/batch.lua; a slot that fails fails its operations alone.
   */
  group(operations: readonly GroupOperation[], nowMs?: number): Promise<GroupOutcome> {
    let shares: SlotGroup[];
    try {
      shares = slotGroups(operations, nowArg(nowMs), (o) => this.argsOf(o.spec, nowMs), this.isCluster);
    } catch (err) {
      return Promise.reject(err);
    }
    const outcome: GroupOutcome = { results: new Array(operations.length), committed: new Array(operations.length).fill(false) };
    const soft = operations.map((o) => o.soft === true);
    // Each share settles its own positions as its slot answers (or fails).
    const settled = (share: SlotGroup) =>
      this.batcher.enqueueGroup(share.name, share.keys, share.argv, (reply) => parseGroupReply(reply, share.acquires)).then(
        (answer) => settleShare(outcome, share, answer, soft),
        (error: Error) => settleShare(outcome, share, error, soft),
      );
    // One share (outside a Cluster, or one slot's layers): no Promise.all.
    if (shares.length === 1) return settled(shares[0]).then(() => outcome);
    return Promise.all(shares.map(settled)).then(() => outcome);
  }

  /** Connected and no serving master's breaker open. */
  isHealthy(): boolean {
    return !this.closed && this.client.status === 'ready' && !this.health.anyOpen();
  }

  /** The one breaker of a standalone or Sentinel store (a Cluster has one per master: breakerFor). */
  get breaker(): CircuitBreaker {
    if (this.isCluster) throw new Error('a Redis Cluster store has one breaker per master: use breakerFor(key)');
    return this.health.guardFor(ANY_SLOT).breaker;
  }

  /** The breaker of the master that serves `key` now. */
  breakerFor(key: string): CircuitBreaker {
    return this.health.guardFor(this.isCluster ? calculateSlot(key) : ANY_SLOT).breaker;
  }

  /**
   * Subscribes to every failed operation (metrics: rl_counter_store_errors_total). `breaker_open`
   * events are operations refused without asking Redis. Returns the unsubscribe function.
   */
  onError(listener: (event: CounterStoreErrorEvent) => void): () => void {
    return this.errors.subscribe(listener);
  }

  /** Failed operations so far, breaker rejections included. */
  get errorCount(): number {
    return this.errors.count;
  }

  /** Resolves once the client is connected; rejects after `timeoutMs` (for start-up and tests). */
  waitUntilReady(timeoutMs = 5_000): Promise<void> {
    if (this.client.status === 'ready') return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.client.off('ready', onReady);
        reject(new CounterStoreUnavailableError(`counter store not connected within ${timeoutMs} ms`));
      }, timeoutMs);
      const onReady = () => {
        clearTimeout(timer);
        resolve();
      };
      this.client.once('ready', onReady);
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Operations accepted before close() still go out, and QUIT waits for every call in flight (one
    // answered NOSCRIPT must still be resent as EVAL); each settles by its own deadline.
    await this.batcher.close();
    if (!this.ownsClient) return;
    try {
      await withDeadline(this.client.quit(), 1_000, 'QUIT');
    } catch {
      // Not connected (no offline queue) or slow: drop the connection instead.
    }
    this.client.disconnect();
  }

  // ---------------------------------------------------------------------------------------------

  /** The store's one operation (`op`), refilled for `name`: no units, extra, ledger, region or parser yet. */
  private prepared(name: ScriptName, keys: string[], spec: CounterSpec, nowMs: number | undefined, operation: string): CounterOperation {
    const op = this.op;
    op.name = name;
    op.keys = keys;
    op.nowMs = nowMs;
    op.operation = operation;
    op.units = undefined;
    op.spec = spec;
    op.extra = undefined;
    op.ledger = false;
    op.region = undefined;
    op.parse = undefined;
    return op;
  }

  /** A lease operation with its own arguments (`extra`): an id takes the counter's take ledger along. */
  private lease(op: CounterOperation, extra: string[], named: { takeId?: string; region?: string }): Promise<LeaseCounterResult> {
    op.extra = extra;
    op.ledger = named.takeId !== undefined;
    op.region = named.region;
    return this.runLease(op);
  }

  /** The store's one script call, refilled (batchName: the script's own). */
  private scriptCall(name: ScriptName, keys: string[], argc: string, now: string): ScriptCall {
    const call = this.call;
    call.name = name;
    call.keys = keys;
    call.argc = argc;
    call.now = now;
    call.operation = '';
    call.units = undefined;
    call.rest = NO_ARGS;
    call.parse = undefined;
    call.batchName = undefined;
    return call;
  }

  /**
   * Queues one operation (CounterOperation) into the batch of its slot; the returned promise settles
   * when that batch has answered (or failed, or timed out). ARGV: `now`, the operation (a slot id),
   * its units (rate scripts only), the spec's parameters, then `extra`.
   */
  private run(op: CounterOperation): Promise<CounterResult> {
    const { name, keys } = op;
    if (keys.length !== SCRIPT_KEY_COUNTS[name]) {
      // A caller bug, not an outage: keys come from counterKeys().
      return Promise.reject(new Error(`${name} takes ${SCRIPT_KEY_COUNTS[name]} key(s), got ${keys.length}`));
    }
    let now: string;
    try {
      now = nowArg(op.nowMs);
    } catch (err) {
      return Promise.reject(err);
    }
    const args = this.argsOf(op.spec, op.nowMs);
    const extra = op.extra;
    const call = this.scriptCall(name, keys, args.argc, now);
    call.operation = op.operation;
    call.units = op.units;
    if (extra === undefined) {
      call.rest = args;
      call.parse = op.parse;
      return this.batcher.enqueue(call);
    }
    call.argc = String(Number(args.argc) + extra.length);
    call.rest = [...args.params, ...extra];
    if (op.ledger) {
      call.keys = [...keys, takesKey(keys[0])];
      call.batchName = withTakeLedger(name);
    }
    return this.batcher.enqueue(call);
  }

  /**
   * A lease operation: with a region's share of a global budget (counters/shares.ts), its share goes
   * before the operation's own arguments and the take and share ledgers along as two keys more.
   */
  private runLease(op: CounterOperation): Promise<LeaseCounterResult> {
    const { name, keys, spec } = op;
    const share = regionShareOf(spec as RateSpec, op.region);
    if (share === undefined || keys.length !== SCRIPT_KEY_COUNTS[name]) return this.run(op) as Promise<LeaseCounterResult>;
    let now: string;
    try {
      now = nowArg(op.nowMs);
    } catch (err) {
      return Promise.reject(err);
    }
    const args = this.argsOf(spec, op.nowMs);
    const extra = op.extra ?? [];
    const call = this.scriptCall(name, [...keys, takesKey(keys[0]), sharesKey(keys[0])], String(Number(args.argc) + shareArgs(share).length + extra.length), now);
    call.operation = op.operation;
    call.units = op.units;
    call.rest = [...args.params, ...shareArgs(share), ...extra];
    call.batchName = withShareLedger(name);
    return this.batcher.enqueue(call);
  }

  /**
   * One operation of `lua/region_pool.lua` (a region's units of a global budget, src/regions/region-pool.ts),
   * batched with the counter operations of the same turn: `args` after `now`, its reply as `parse` reads it.
   */
  runRegionPool<T>(key: string, args: string[], parse: (reply: unknown) => T, nowMs?: number): Promise<T> {
    let now: string;
    try {
      now = nowArg(nowMs);
    } catch (err) {
      return Promise.reject(err);
    }
    const call = this.scriptCall('region_pool', [key], String(1 + args.length), now);
    call.operation = args[0];
    call.rest = args.slice(1);
    call.parse = parse;
    return this.batcher.enqueue(call);
  }

  private argsOf(spec: CounterSpec, nowMs: number | undefined): SpecArgs {
    let args = this.specArgs.get(spec);
    if (isCalendarSpec(spec)) {
      // The server's clock chooses the pair; the script's clock chooses the period in it.
      const pair = spec.calendar.around(nowMs ?? Date.now());
      if (args?.pair === pair) return args;
      const params = [...specParams(spec), ...calendarParams(pair)];
      args = { ...groupArgs(String(3 + params.length), params), pair };
      this.specArgs.set(spec, args);
      return args;
    }
    if (!args) {
      const params = specParams(spec);
      // now, the operation and its units (a lease operation: the lease id), then the parameters.
      args = groupArgs(String((spec.type === 'concurrency' ? 2 : 3) + params.length), params);
      this.specArgs.set(spec, args);
    }
    return args;
  }
}

/**
 * A RedisCounterStore connected to an RL_COUNTERSTORE_ADDR address (every form of docs/deployment.md "Redis addresses").
 * Throws an Error naming RL_COUNTERSTORE_ADDR when the address is bad. The client starts connecting
 * at once; operations issued before it is ready wait for it within their timeout (use
 * `waitUntilReady()` to wait at start-up).
 */
export function connectRedisCounterStore(addr: string, options: ConnectRedisCounterStoreOptions = {}): RedisCounterStore {
  const address = parseCounterStoreAddress(addr);
  const { breaker, maxBatchSize, ...clientOptions } = options;
  const client = createRedisClient(address, {
    // The store batches by itself; auto-pipelining would only wrap each script call in a Pipeline.
    enableAutoPipelining: false,
    // The store bounds each script call with its own deadline; a second timer per call buys nothing.
    perCommandTimeout: false,
    ...clientOptions,
  });
  log.debug('counter store connecting', { counter_store: describeAddress(address) });
  return new RedisCounterStore(client, {
    breaker,
    operationTimeoutMs: options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
    maxBatchSize,
  });
}

// ---------------------------------------------------------------------------------------------------

/** A sliding log's share as its script reads it after the parameters (lua/includes/shares_log.lua); undefined without one. */
function logShareArgs(spec: RateSpec, region: string | undefined): string[] | undefined {
  const share = logShareOf(spec, region);
  return share && shareArgs(share);
}

/** An optional number as a script reads it: '' when absent. */
function optionalNumber(value: number | undefined): string {
  if (value === undefined) return '';
  if (!Number.isFinite(value)) throw new Error(`expected a finite number, got ${value}`);
  return String(value);
}

function nowArg(nowMs: number | undefined): string {
  if (nowMs === undefined) return '';
  if (!Number.isFinite(nowMs)) throw new Error(`nowMs must be a finite number, got ${nowMs}`);
  return String(nowMs);
}
