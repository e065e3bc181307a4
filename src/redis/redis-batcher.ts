import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import { CounterStoreUnavailableError } from '../errors.js';
import { ANY_SLOT, type MasterGuard, type MasterHealth } from './master-health.js';
import { loadBatchScript, type BatchScript, type ScriptName } from './lua-scripts.js';
import { parseReply } from './redis-script-reply.js';
import { EncodedArgs, encodedScriptCommand } from './resp.js';
import { classify, isUnavailableReply, TimeoutError, UNAVAILABLE_REPLY, withDeadline, type ErrorReporter } from './redis-store-errors.js';

/** One operation waiting in a batch; `parse` reads its reply (parseReply unless given). */
interface PendingOperation {
  name: ScriptName;
  parse?: (reply: unknown) => unknown;
  resolve(result: unknown): void;
  reject(error: CounterStoreUnavailableError): void;
}

/**
 * One operation as lua/batch.lua reads it: its script's entry name (`batchName`, default `name`), its ARGV
 * count, then `now`, `operation` (a rate script's, or a concurrency slot id), its `units` (rate scripts only) and
 * the `rest`; `parse` reads its reply (parseReply unless given).
 */
export interface ScriptCall {
  name: ScriptName;
  keys: string[];
  argc: string;
  now: string;
  operation: string;
  units: string | undefined;
  /** The last arguments, or a spec's parameters kept encoded (resp.ts) beside them. */
  rest: string[] | EncodedParams;
  parse: ((reply: unknown) => unknown) | undefined;
  batchName: string | undefined;
}

/** Parameters sent call after call, encoded once. */
export interface EncodedParams {
  readonly params: readonly string[];
  readonly encodedParams: string;
}

/** Operations bound for one script call: their keys and ARGV laid out as lua/batch.lua reads them. */
interface Batch {
  /** The hash slot it collects for (ANY_SLOT outside a cluster). */
  readonly slot: number;
  readonly keys: string[];
  readonly argv: EncodedArgs;
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

/**
 * The script calls of the Redis counter store (redis-store.ts).
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
 * A batch that times out or cannot be sent fails each of its operations exactly as a lone call would
 * (one error and one error event per operation). Each batch has one deadline: `timeoutMs` from its
 * first operation. Its master's breaker hears one observation per script call (recordRoundTrip).
 */
export class ScriptBatcher {
  private readonly isCluster: boolean;
  private readonly script: BatchScript;
  /** Batches collecting operations until the next flush, by hash slot (ANY_SLOT outside a cluster). */
  private readonly pending = new Map<number, Batch>();
  /** Batches sent (or waiting for the first connection) and not yet settled; close() waits for them. */
  private readonly unsettled = new Set<Batch>();
  private readonly drainWaiters: (() => void)[] = [];
  private flushScheduled = false;
  private readonly flushPending = () => this.flush();
  /** Until the first `ready` (or the first connection error), operations wait for the connection. */
  private starting: boolean;
  private closed = false;
  private firstReady: Promise<void> | undefined;

  constructor(
    private readonly client: Redis | Cluster,
    private readonly health: MasterHealth,
    private readonly errors: ErrorReporter,
    private readonly timeoutMs: number,
    private readonly maxBatchSize: number,
  ) {
    this.isCluster = client.isCluster;
    this.script = loadBatchScript();
    this.starting = client.status !== 'ready';
    const started = () => {
      this.starting = false;
    };
    client.on('ready', started);
    client.on('error', started);
  }

  /** The client has neither connected nor failed to yet. */
  get startingUp(): boolean {
    return this.starting;
  }

  /**
   * Accepts no more operations; those accepted still go out. Resolves once every call has settled
   * (each does by its own deadline).
   */
  close(): Promise<void> {
    this.closed = true;
    this.flush();
    return this.drained();
  }

  /**
   * Adds one operation to the batch of its slot. `call` is read at once and may be refilled for the next
   * operation (the store keeps one, redis-store.ts).
   */
  enqueue<T>(call: ScriptCall): Promise<T> {
    const batch = this.batchFor(call.name, call.keys[0]);
    if (!('keys' in batch)) return batch;
    for (const key of call.keys) batch.keys.push(key);
    const argv = batch.argv;
    argv.addWord(call.batchName ?? call.name);
    argv.addWord(call.argc);
    // A `now` given (tests, replays) differs call by call; the store's own ('') never does.
    if (call.now === '') argv.addWord('');
    else argv.add(call.now);
    if (call.units === undefined) {
      argv.add(call.operation); // a slot id, or a region pool's operation
    } else {
      argv.addWord(call.operation);
      argv.add(call.units);
    }
    const { rest } = call;
    if (Array.isArray(rest)) for (const arg of rest) argv.add(arg);
    else argv.addEncoded(rest.encodedParams, rest.params.length);
    return this.queued(batch, call.name, call.parse as ((reply: unknown) => T) | undefined);
  }

  /**
   * An all-or-nothing group (lua/batch.lua, "A group") as one entry of the batch of its slot: `keys`
   * and `argv` laid out as the script reads a group (every key of it in one hash slot), `name` the
   * first operation's (for errors and breaker events).
   */
  enqueueGroup<T>(name: ScriptName, keys: string[], argv: EncodedArgs, parse: (reply: unknown) => T): Promise<T> {
    const batch = this.batchFor(name, keys[0]);
    if (!('keys' in batch)) return batch;
    for (const key of keys) batch.keys.push(key);
    batch.argv.append(argv);
    return this.queued(batch, name, parse);
  }

  /** Adds the operation to `batch` (which already holds its keys and ARGV); sends a full batch at once. */
  private queued<T>(batch: Batch, name: ScriptName, parse?: (reply: unknown) => T): Promise<T> {
    const result = new Promise<T>((resolve, reject) => {
      batch.operations.push({ name, parse, resolve: resolve as (value: unknown) => void, reject });
    });
    if (batch.operations.length >= this.maxBatchSize) {
      this.pending.delete(batch.slot);
      this.send(batch);
    }
    return result;
  }

  /** The batch collecting for the slot of `key`, or the rejection of an operation that cannot go out. */
  private batchFor(name: ScriptName, key: string): Batch | Promise<never> {
    if (this.closed) {
      return Promise.reject(this.errors.failed('not_connected', name, new CounterStoreUnavailableError('counter store is closed')));
    }
    const slot = this.isCluster ? calculateSlot(key) : ANY_SLOT;
    const guard = this.health.guardFor(slot);
    if (!guard.breaker.tryAcquire()) {
      return Promise.reject(
        this.errors.failed(
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
      batch = { slot, keys: [], argv: new EncodedArgs(), operations: [], guard, deadline: performance.now() + this.timeoutMs, settled: false, resent: false };
      this.pending.set(slot, batch);
      this.scheduleFlush();
    }
    return batch;
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
    if (this.starting && this.client.status !== 'ready') {
      this.firstConnection(batch.deadline).then(
        () => this.send(batch),
        (err: unknown) => this.batchFailed(batch, err),
      );
      return;
    }
    batch.timer ??= setTimeout(this.onDeadline, Math.max(1, batch.deadline - performance.now()), batch);
    const command = batch.resent ? encodedScriptCommand('eval', this.script.lua, batch.keys, batch.argv) : encodedScriptCommand('evalsha', this.script.sha1, batch.keys, batch.argv);
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
      operation.reject(this.errors.failed(kind, operation.name, new CounterStoreUnavailableError(`counter store unavailable (${kind}): ${message}`, err)));
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
        operation.reject(this.errors.failed('redis_error', operation.name, new CounterStoreUnavailableError(message)));
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
        operation.reject(this.errors.failed('redis_error', operation.name, new CounterStoreUnavailableError(`counter store unavailable (redis_error): ${entry}`)));
        continue;
      }
      let result: unknown;
      try {
        result = (operation.parse ?? parseReply)(entry);
      } catch (err) {
        operation.reject(this.errors.failed('redis_error', operation.name, new CounterStoreUnavailableError((err as Error).message, err)));
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

}
