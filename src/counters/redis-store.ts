import calculateSlot from 'cluster-key-slot';
import { Command, type Cluster, type Redis } from 'ioredis';
import { CounterStoreUnavailableError } from '../errors.js';
import { log } from '../util/log.js';
import type { CircuitBreaker, CircuitBreakerOptions } from '../redis/circuit-breaker.js';
import { ANY_SLOT, MasterHealth, type MasterGuard } from '../redis/master-health.js';
import type { CounterResult, CounterStore, LeaseCounterResult, NamedTake, TakeReclaim } from './counter-store.js';
import { takesKey } from './keys.js';
import { checkTakeId, LEASE_OUTCOMES } from './named-takes.js';
import { scriptParams, type CounterSpec, type LeaseSpec, type RateSpec } from './counter-spec.js';
import { loadBatchScript, SCRIPT_KEY_COUNTS, withTakeLedger, type BatchScript, type ScriptName } from '../redis/lua-scripts.js';
import {
  createRedisClient,
  DEFAULT_COMMAND_TIMEOUT_MS,
  describeAddress,
  parseCounterStoreAddress,
  type RedisClientOptions,
} from '../redis/redis-connection.js';

/**
 * The Redis backend of CounterStore: every operation is one atomic Lua script (lua/*.lua). The scripts
 * are ports of MemoryCounterStore and must give the same numbers.
 *
 * Batching. Operations issued in the same event-loop turn are collected (until `setImmediate`, at
 * most `maxBatchSize` per call) and sent as ONE EVALSHA of the batch script (lua/batch.lua, built from
 * the operation scripts by lua-scripts.ts), which runs each operation's script in turn and returns
 * every result. The whole call is atomic, so each operation is, and the results are those of running
 * the operations one by one in arrival order; an operation whose script fails fails alone. One
 * operation alone is a batch of one. The call is EVALSHA; when Redis answers NOSCRIPT (a fresh
 * server, SCRIPT FLUSH, a restart, a failover: nothing ran) it is sent once more as EVAL.
 *
 * Redis Cluster: a script's keys must live in one slot, so operations are batched per hash slot
 * (every key of one counter shares its `{tag}`, keys.ts); each slot's batch goes to its master, and a
 * batch never mixes masters.
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

export type CounterStoreErrorKind =
  /** Rejected by the open circuit breaker; Redis was not asked. */
  | 'breaker_open'
  /** No answer within the timeout (the command may or may not have run; it is not retried). */
  | 'timeout'
  /** Not connected: the command was not sent. */
  | 'not_connected'
  /** Redis answered with an error (or an unreadable reply). */
  | 'redis_error';

export interface CounterStoreErrorEvent {
  kind: CounterStoreErrorKind;
  /** The script that was to run. */
  operation: ScriptName;
  error: CounterStoreUnavailableError;
}

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

/** One operation waiting in a batch; `parse` reads its reply (parseReply unless given). */
interface PendingOperation {
  name: ScriptName;
  parse?: (reply: unknown) => unknown;
  resolve(result: unknown): void;
  reject(error: CounterStoreUnavailableError): void;
}

/** Operations bound for one script call: their keys and ARGV laid out as lua/batch.lua reads them. */
interface Batch {
  readonly keys: string[];
  readonly argv: string[];
  readonly operations: PendingOperation[];
  /** The master the batch goes to: its breaker let the operations in and hears how the call went. */
  readonly guard: MasterGuard;
  /** performance.now() by which the call must have answered: its first operation's deadline. */
  readonly deadline: number;
  timer?: NodeJS.Timeout;
  /** Answered, failed or timed out: whatever comes later is ignored. */
  settled: boolean;
  /** The script was sent in full (EVAL) after NOSCRIPT; a second NOSCRIPT is an error. */
  resent: boolean;
}

/** The ARGV of an operation after `now` and its operation (lease id), and its ARGV count, as strings. */
interface SpecArgs {
  argc: string;
  params: string[];
}

export class RedisCounterStore implements CounterStore {
  readonly client: Redis | Cluster;
  /** Breaker and calls in flight per master. */
  readonly health: MasterHealth;
  private readonly timeoutMs: number;
  private readonly ownsClient: boolean;
  private readonly maxBatchSize: number;
  private readonly isCluster: boolean;
  private readonly script: BatchScript;
  private readonly listeners = new Set<(event: CounterStoreErrorEvent) => void>();
  /** Batches collecting operations until the next flush, by hash slot (ANY_SLOT outside a cluster). */
  private readonly pending = new Map<number, Batch>();
  /** Batches sent (or waiting for the first connection) and not yet settled; close() waits for them. */
  private readonly unsettled = new Set<Batch>();
  private readonly drainWaiters: (() => void)[] = [];
  private flushScheduled = false;
  private readonly flushPending = () => this.flush();
  /** String ARGV per spec, built on first use: specs are built once per policy version (counter-spec.ts). */
  private readonly specArgs = new WeakMap<CounterSpec, SpecArgs>();
  private errors = 0;
  /** Until the first `ready` (or the first connection error), operations wait for the connection. */
  private startingUp: boolean;
  private connectionLost = false;
  private closed = false;
  private firstReady: Promise<void> | undefined;

  constructor(client: Redis | Cluster, options: RedisCounterStoreOptions = {}) {
    this.client = client;
    this.health = new MasterHealth(client, options.breaker);
    this.timeoutMs = options.operationTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
    if (!(this.timeoutMs > 0) || !Number.isFinite(this.timeoutMs)) {
      throw new Error(`operationTimeoutMs must be a positive number, got ${this.timeoutMs}`);
    }
    this.maxBatchSize = options.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE;
    if (!Number.isInteger(this.maxBatchSize) || this.maxBatchSize < 1) {
      throw new Error(`maxBatchSize must be a positive integer, got ${this.maxBatchSize}`);
    }
    this.ownsClient = options.ownsClient ?? true;
    this.isCluster = client.isCluster;
    this.script = loadBatchScript();
    this.startingUp = client.status !== 'ready';
    client.on('ready', () => {
      this.startingUp = false;
      if (this.connectionLost) {
        this.connectionLost = false;
        log.info('counter store connection restored');
      }
    });
    // Without a listener ioredis prints every connection error; report each outage once instead.
    client.on('error', (err: Error) => {
      this.startingUp = false;
      if (!this.connectionLost && !this.closed) {
        this.connectionLost = true;
        log.warn('counter store connection error', { error: err.message });
      }
    });
    client.on('close', () => {
      if (!this.startingUp && !this.closed && !this.connectionLost) {
        this.connectionLost = true;
        log.warn('counter store connection closed');
      }
    });
  }

  consume(keys: string[], spec: RateSpec, cost: number, nowMs?: number): Promise<CounterResult> {
    return this.run(spec.type, keys, nowMs, 'consume', String(cost), spec);
  }

  /** The algorithm's own script in its read-only mode (lua/includes/mode.lua). */
  peek(keys: string[], spec: RateSpec, nowMs?: number): Promise<CounterResult> {
    return this.run(spec.type, keys, nowMs, 'peek', '1', spec);
  }

  refund(keys: string[], spec: RateSpec, amount: number, nowMs?: number): Promise<CounterResult> {
    return this.run(spec.type, keys, nowMs, 'refund', String(amount), spec);
  }

  /** The algorithm's own script, its partial take (lua/includes/mode.lua), named or not (lua/includes/lease.lua). */
  async take(keys: string[], spec: RateSpec, n: number, nowMs?: number, named: NamedTake = {}): Promise<LeaseCounterResult> {
    const { takeId, deadline, holdMs } = named;
    if (takeId !== undefined) checkTakeId(takeId);
    const extra = [takeId ?? '', optionalNumber(deadline), String(holdMs ?? 0)];
    return this.run(spec.type, keys, nowMs, 'take', String(n), spec, extra, takeId !== undefined) as Promise<LeaseCounterResult>;
  }

  /** The algorithm's own script: gives back what a named take took (lua/includes/lease.lua). */
  async reclaim(keys: string[], spec: RateSpec, take: TakeReclaim, nowMs?: number): Promise<LeaseCounterResult> {
    checkTakeId(take.takeId);
    return this.run(spec.type, keys, nowMs, 'reclaim', '0', spec, [take.takeId, optionalNumber(take.deadline)], true) as Promise<LeaseCounterResult>;
  }

  /** The algorithm's own script, its window-checked return (lua/includes/mode.lua). */
  giveBack(keys: string[], spec: RateSpec, units: number, windowTag: number | null, nowMs?: number): Promise<LeaseCounterResult> {
    return this.run(spec.type, keys, nowMs, 'give', String(units), spec, [String(windowTag ?? 0)]) as Promise<LeaseCounterResult>;
  }

  acquire(keys: string[], spec: LeaseSpec, leaseId: string, nowMs?: number): Promise<CounterResult> {
    return this.run('concurrency_acquire', keys, nowMs, leaseId, undefined, spec);
  }

  release(keys: string[], spec: LeaseSpec, leaseId: string, nowMs?: number): Promise<CounterResult> {
    return this.run('concurrency_release', keys, nowMs, leaseId, undefined, spec);
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
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Failed operations so far, breaker rejections included. */
  get errorCount(): number {
    return this.errors;
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
    this.flush();
    await this.drained();
    if (!this.ownsClient) return;
    try {
      await withDeadline(this.client.quit(), 1_000, 'QUIT');
    } catch {
      // Not connected (no offline queue) or slow: drop the connection instead.
    }
    this.client.disconnect();
  }

  // ---------------------------------------------------------------------------------------------

  /**
   * Queues one operation into the batch of its slot; the returned promise settles when that batch
   * has answered (or failed, or timed out). ARGV: `now`, `operation` (a rate script's operation, or a
   * lease id), its `units` (rate scripts only), the spec's parameters, then `extra` (a lease
   * operation's own arguments, lua/includes/lease.lua). `ledger`: the counter's take ledger goes along
   * as one key more (a named take, a reclaim).
   */
  private run(
    name: ScriptName, keys: string[], nowMs: number | undefined, operation: string, units: string | undefined, spec: CounterSpec,
    extra?: string[], ledger = false,
  ): Promise<CounterResult> {
    if (keys.length !== SCRIPT_KEY_COUNTS[name]) {
      // A caller bug, not an outage: keys come from counterKeys().
      return Promise.reject(new Error(`${name} takes ${SCRIPT_KEY_COUNTS[name]} key(s), got ${keys.length}`));
    }
    let now: string;
    try {
      now = nowArg(nowMs);
    } catch (err) {
      return Promise.reject(err);
    }
    const args = this.argsOf(spec);
    if (extra === undefined) return this.enqueue(name, keys, args.argc, now, operation, units, args.params);
    const argc = String(Number(args.argc) + extra.length);
    if (!ledger) return this.enqueue(name, keys, argc, now, operation, units, [...args.params, ...extra]);
    return this.enqueue(name, [...keys, takesKey(keys[0])], argc, now, operation, units, [...args.params, ...extra], undefined, withTakeLedger(name));
  }

  /**
   * One operation of `lua/lease_pool.lua` (a region's units of a global budget, src/lease/region-pool.ts),
   * batched with the counter operations of the same turn: `args` after `now`, its reply as `parse` reads it.
   */
  leasePool<T>(key: string, args: string[], parse: (reply: unknown) => T, nowMs?: number): Promise<T> {
    let now: string;
    try {
      now = nowArg(nowMs);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.enqueue('lease_pool', [key], String(1 + args.length), now, args[0], undefined, args.slice(1), parse);
  }

  /**
   * Queues one operation into the batch of its slot, its ARGV as lua/batch.lua reads them: the count,
   * `now`, the operation (lease id, pool operation), its units (rate scripts only), the rest.
   */
  private enqueue<T>(
    name: ScriptName,
    keys: string[],
    argc: string,
    now: string,
    operation: string,
    units: string | undefined,
    rest: string[],
    parse?: (reply: unknown) => T,
    batchName: string = name,
  ): Promise<T> {
    if (this.closed) {
      return Promise.reject(this.failed('not_connected', name, new CounterStoreUnavailableError('counter store is closed')));
    }
    const slot = this.isCluster ? calculateSlot(keys[0]) : ANY_SLOT;
    const guard = this.health.guardFor(slot);
    if (!guard.breaker.tryAcquire()) {
      return Promise.reject(
        this.failed(
          'breaker_open',
          name,
          new CounterStoreUnavailableError(
            `counter store unavailable: circuit breaker of ${guard.master} open after repeated failures`,
          ),
        ),
      );
    }
    let batch = this.pending.get(slot);
    if (batch && batch.guard !== guard) {
      // The slot changed hands since the batch began: the batch goes out now (the client routes it by
      // its current slot map) and its outcome counts for the master whose breaker admitted its
      // operations; the new master's operations start a batch of their own.
      this.pending.delete(slot);
      this.send(batch);
      batch = undefined;
    }
    if (!batch) {
      batch = { keys: [], argv: [], operations: [], guard, deadline: performance.now() + this.timeoutMs, settled: false, resent: false };
      this.pending.set(slot, batch);
      this.scheduleFlush();
    }
    for (const key of keys) batch.keys.push(key);
    batch.argv.push(batchName, argc, now, operation);
    if (units !== undefined) batch.argv.push(units);
    for (const arg of rest) batch.argv.push(arg);
    const queued = batch;
    const result = new Promise<T>((resolve, reject) => {
      queued.operations.push({ name, parse, resolve: resolve as (value: unknown) => void, reject });
    });
    if (batch.operations.length >= this.maxBatchSize) {
      this.pending.delete(slot);
      this.send(batch);
    }
    return result;
  }

  private argsOf(spec: CounterSpec): SpecArgs {
    let args = this.specArgs.get(spec);
    if (!args) {
      const params = scriptParams(spec).map(String);
      // now, the operation and its units (a lease operation: the lease id), then the parameters.
      args = { argc: String((spec.type === 'concurrency' ? 2 : 3) + params.length), params };
      this.specArgs.set(spec, args);
    }
    return args;
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    // After the I/O callbacks of this loop turn: every request read in this turn joins the batch.
    setImmediate(this.flushPending);
  }

  /** Sends every pending batch. */
  private flush(): void {
    this.flushScheduled = false;
    if (this.pending.size === 0) return;
    const batches = [...this.pending.values()];
    this.pending.clear();
    for (const batch of batches) this.send(batch);
  }

  /**
   * One script call for the batch (EVALSHA; EVAL after NOSCRIPT), under one deadline: the batch's own
   * timer, the only one (the client built by connectRedisCounterStore has no per-command timer).
   */
  private send(batch: Batch): void {
    if (batch.settled) return;
    if (!this.unsettled.has(batch)) {
      this.unsettled.add(batch);
      batch.guard.pendingCalls++;
    }
    if (!batch.resent && performance.now() >= batch.deadline) {
      // The event loop stalled past the deadline before the flush (a long GC, say): its callers have
      // waited long enough. Failing it unsent keeps Redis from running what they were told failed,
      // and Redis was never slow, so the breaker does not count it.
      this.batchFailed(batch, new TimeoutError(`counter script not sent: its ${this.timeoutMs} ms deadline passed first`), false);
      return;
    }
    if (this.startingUp && this.client.status !== 'ready') {
      this.firstConnection(batch.deadline).then(
        () => this.send(batch),
        (err: unknown) => this.batchFailed(batch, err),
      );
      return;
    }
    batch.timer ??= setTimeout(this.onDeadline, Math.max(1, batch.deadline - performance.now()), batch);
    const command = scriptCommand(batch.resent ? 'eval' : 'evalsha', this.scriptArgs(batch));
    let reply: Promise<unknown>;
    try {
      reply = this.client.sendCommand(command) as Promise<unknown>;
    } catch (err) {
      this.batchFailed(batch, err);
      return;
    }
    reply.then(
      (value) => this.batchAnswered(batch, value),
      (err: unknown) => {
        if (!batch.resent && !batch.settled && /^NOSCRIPT/.test((err as Error)?.message ?? '')) {
          // SCRIPT FLUSH, a restart or a failover emptied the script cache; nothing ran. Send the script.
          batch.resent = true;
          this.send(batch);
          return;
        }
        this.batchFailed(batch, err);
      },
    );
  }

  /** EVALSHA/EVAL arguments: the script (digest or text), the key count, every key, every ARGV. */
  private scriptArgs(batch: Batch): string[] {
    const args = [batch.resent ? this.script.lua : this.script.sha1, String(batch.keys.length)];
    for (const key of batch.keys) args.push(key);
    for (const arg of batch.argv) args.push(arg);
    return args;
  }

  /** The batch's deadline passed without an answer (the call may still run: it is never resent). */
  private readonly onDeadline = (batch: Batch): void => {
    this.batchFailed(batch, new TimeoutError(`counter script timed out after ${this.timeoutMs} ms`));
  };

  /** The call failed as a whole (not sent, timed out, or an error reply): every operation fails. */
  private batchFailed(batch: Batch, err: unknown, reachedForRedis = true): void {
    if (!this.settle(batch)) return;
    const kind = classify(err);
    // Only a Redis that cannot serve trips the breaker. An error reply means Redis answered.
    if (reachedForRedis) this.recordRoundTrip(batch, kind !== 'redis_error' || isUnavailableReply(err));
    const message = (err as Error)?.message ?? String(err);
    for (const operation of batch.operations) {
      operation.reject(this.failed(kind, operation.name, new CounterStoreUnavailableError(`counter store unavailable (${kind}): ${message}`, err)));
    }
  }

  /** Redis answered the call: one entry per operation, a reply or that operation's error. */
  private batchAnswered(batch: Batch, reply: unknown): void {
    if (!this.settle(batch)) return;
    if (!Array.isArray(reply) || reply.length !== batch.operations.length) {
      // Redis answered, with something the script never returns: a bug, not an outage.
      batch.guard.breaker.recordSuccess();
      const message = `unexpected batch reply for ${batch.operations.length} operation(s): ${JSON.stringify(reply)}`;
      for (const operation of batch.operations) {
        operation.reject(this.failed('redis_error', operation.name, new CounterStoreUnavailableError(message)));
      }
      return;
    }
    let unavailable = false;
    for (let i = 0; i < reply.length; i++) {
      const operation = batch.operations[i];
      const entry: unknown = reply[i];
      if (typeof entry === 'string') {
        // That operation's script failed (lua/batch.lua returns its error message); the others ran.
        if (UNAVAILABLE_REPLY.test(entry)) unavailable = true;
        operation.reject(this.failed('redis_error', operation.name, new CounterStoreUnavailableError(`counter store unavailable (redis_error): ${entry}`)));
        continue;
      }
      let result: unknown;
      try {
        result = (operation.parse ?? parseReply)(entry);
      } catch (err) {
        operation.reject(this.failed('redis_error', operation.name, new CounterStoreUnavailableError((err as Error).message, err)));
        continue;
      }
      operation.resolve(result);
    }
    this.recordRoundTrip(batch, unavailable);
  }

  /** Marks the batch settled and stops its timer; false when it already was. */
  private settle(batch: Batch): boolean {
    if (batch.settled) return false;
    batch.settled = true;
    if (batch.timer) clearTimeout(batch.timer);
    if (this.unsettled.delete(batch)) batch.guard.pendingCalls--;
    if (this.unsettled.size === 0) for (const drained of this.drainWaiters.splice(0)) drained();
    return true;
  }

  /** Resolves once every batch sent so far has settled (each does by its deadline). */
  private drained(): Promise<void> {
    if (this.unsettled.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /** One observation per script call for its master's breaker (see the class comment). */
  private recordRoundTrip(batch: Batch, failed: boolean): void {
    if (failed) batch.guard.breaker.recordFailure();
    else batch.guard.breaker.recordSuccess();
  }

  /** Waits (until the deadline) for the connection that is being set up when the store starts. */
  private firstConnection(deadline: number): Promise<void> {
    // One shared wait, however many operations arrive during start-up.
    this.firstReady ??= new Promise<void>((resolve, reject) => {
      const onReady = () => {
        this.client.off('error', onError);
        resolve();
      };
      const onError = (err: Error) => {
        this.client.off('ready', onReady);
        this.firstReady = undefined;
        reject(err);
      };
      this.client.once('ready', onReady);
      this.client.once('error', onError);
    });
    return withDeadline(
      this.firstReady,
      Math.max(1, deadline - performance.now()),
      'waiting for the first connection',
    );
  }

  private failed(kind: CounterStoreErrorKind, operation: ScriptName, error: CounterStoreUnavailableError) {
    this.errors++;
    for (const listener of this.listeners) {
      try {
        listener({ kind, operation, error });
      } catch {
        // A metrics hook must not turn an outage into a crash.
      }
    }
    return error;
  }
}

/**
 * A RedisCounterStore connected to an RL_COUNTERSTORE_ADDR address (every form of CONTRACT.md).
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

class TimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TimeoutError';
  }
}

/**
 * An ioredis Command with `args` as given. Every argument is a string already; the constructor would
 * copy them all again with Array#flat (the largest cost of building the command; BENCHMARKS.md), and
 * its other argument handling (key prefix, argument transformers) does not apply.
 */
function scriptCommand(name: 'eval' | 'evalsha', args: string[]): Command {
  const command = new Command(name, [], { replyEncoding: 'utf8' });
  command.args = args;
  return command;
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

function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new TimeoutError(`${what} timed out after ${Math.round(ms)} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/** Error replies that mean Redis cannot serve right now (loading, failover, cluster down, out of memory). */
const UNAVAILABLE_REPLY = /^(LOADING|READONLY|CLUSTERDOWN|MASTERDOWN|TRYAGAIN|BUSY|OOM|NOREPLICAS|MISCONF)\b/;

function isUnavailableReply(err: unknown): boolean {
  return UNAVAILABLE_REPLY.test((err as Error)?.message ?? '');
}

function classify(err: unknown): CounterStoreErrorKind {
  if (err instanceof TimeoutError) return 'timeout';
  const message = err instanceof Error ? err.message : String(err);
  if (/timed? ?out/i.test(message)) return 'timeout';
  if (
    /enableOfflineQueue|Connection is closed|isn't ready|max retries per request|Cluster is ended|ECONNREFUSED|ECONNRESET|EPIPE|ENOTFOUND|EHOSTUNREACH/i.test(
      message,
    ) ||
    (err instanceof Error && err.name === 'MaxRetriesPerRequestError')
  ) {
    return 'not_connected';
  }
  return 'redis_error';
}

/**
 * The script reply: {allowed 1/0, remaining, retry_after_ms, reset_after_ms}, and for a lease operation
 * {units, window tag, window left ms, store now, outcome, lapsed} after it; see lua/includes/lease.lua.
 */
function parseReply(reply: unknown): CounterResult {
  if (!Array.isArray(reply) || (reply.length !== 4 && reply.length !== 10)) {
    throw new Error(`unexpected script reply ${JSON.stringify(reply)}`);
  }
  if (reply.length === 10) {
    const outcome = LEASE_OUTCOMES[toNumber(reply[8])];
    if (outcome === undefined) throw new Error(`unexpected lease outcome in script reply ${JSON.stringify(reply)}`);
    const lease: LeaseCounterResult = {
      allowed: toNumber(reply[0]) === 1,
      remaining: toNumber(reply[1]),
      retryAfterMs: toNumber(reply[2]),
      resetAfterMs: toNumber(reply[3]),
      units: toNumber(reply[4]),
      windowTag: toNumber(reply[5]),
      windowLeftMs: toNumber(reply[6]),
      storeNow: toNumber(reply[7]),
      outcome,
      lapsed: toNumber(reply[9]),
    };
    return lease;
  }
  return {
    allowed: toNumber(reply[0]) === 1,
    remaining: toNumber(reply[1]),
    retryAfterMs: toNumber(reply[2]),
    resetAfterMs: toNumber(reply[3]),
  };
}

function toNumber(value: unknown): number {
  if (typeof value === 'number') return value;
  if (typeof value === 'string') {
    // Lua's %.17g spells the special values the C way.
    if (value === 'inf') return Infinity;
    if (value === '-inf') return -Infinity;
    if (value === 'nan' || value === '-nan') return NaN;
    const n = Number(value);
    if (value.trim() !== '' && !Number.isNaN(n)) return n;
  }
  throw new Error(`unexpected number ${JSON.stringify(value)} in script reply`);
}
