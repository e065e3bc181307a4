import type { Cluster, Redis } from 'ioredis';
import { CounterStoreUnavailableError } from '../errors.js';
import { log } from '../util/log.js';
import { CircuitBreaker, type CircuitBreakerOptions } from './circuit-breaker.js';
import type { CounterResult, CounterStore } from './counter-store.js';
import { scriptParams, type LeaseSpec, type RateSpec } from './counter-spec.js';
import { loadScripts, type LuaScript, type ScriptName } from './lua-scripts.js';
import {
  createRedisClient,
  DEFAULT_COMMAND_TIMEOUT_MS,
  describeAddress,
  parseCounterStoreAddress,
  type RedisClientOptions,
} from './redis-connection.js';

/**
 * The Redis backend of CounterStore: every operation is one atomic Lua script (lua/*.lua), run with
 * EVALSHA through ioredis `defineCommand` (which falls back to EVAL when the server answers NOSCRIPT:
 * after SCRIPT FLUSH, a restart or a failover). The scripts are ports of MemoryCounterStore and must
 * give the same numbers.
 *
 * Failure is explicit and fast. Any error (not connected, timeout, Redis error) is thrown as
 * CounterStoreUnavailableError, so the decision applies the policy's failure_mode; nothing is queued
 * while disconnected and a command that timed out is never sent again. A circuit breaker counts the
 * failures: once open, operations fail in microseconds without touching Redis until a trial succeeds.
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
  /** A breaker to use, or options for the store's own (default: 5 failures, 1 s cool-down). */
  breaker?: CircuitBreaker | CircuitBreakerOptions;
  /**
   * Deadline for one operation, ms (default 100): a backstop over the client's own commandTimeout
   * that also bounds cluster redirections and the wait for the very first connection.
   */
  operationTimeoutMs?: number;
  /** close() quits the client (default true). */
  ownsClient?: boolean;
}

export interface ConnectRedisCounterStoreOptions extends RedisClientOptions {
  breaker?: CircuitBreaker | CircuitBreakerOptions;
}

type ScriptCommand = (...args: string[]) => Promise<unknown>;

const COMMAND_PREFIX = 'rl_';

export class RedisCounterStore implements CounterStore {
  readonly client: Redis | Cluster;
  readonly breaker: CircuitBreaker;
  private readonly timeoutMs: number;
  private readonly ownsClient: boolean;
  private readonly scripts: Readonly<Record<ScriptName, LuaScript>>;
  private readonly listeners = new Set<(event: CounterStoreErrorEvent) => void>();
  private errors = 0;
  /** Until the first `ready` (or the first connection error), operations wait for the connection. */
  private startingUp: boolean;
  private connectionLost = false;
  private closed = false;
  private firstReady: Promise<void> | undefined;

  constructor(client: Redis | Cluster, options: RedisCounterStoreOptions = {}) {
    this.client = client;
    this.breaker = options.breaker instanceof CircuitBreaker ? options.breaker : new CircuitBreaker(options.breaker);
    this.timeoutMs = options.operationTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
    if (!(this.timeoutMs > 0) || !Number.isFinite(this.timeoutMs)) {
      throw new Error(`operationTimeoutMs must be a positive number, got ${this.timeoutMs}`);
    }
    this.ownsClient = options.ownsClient ?? true;
    this.scripts = loadScripts();
    const registered = client as unknown as { scriptsSet?: Record<string, unknown> };
    for (const script of Object.values(this.scripts)) {
      const command = COMMAND_PREFIX + script.name;
      if (!registered.scriptsSet?.[command]) {
        client.defineCommand(command, { numberOfKeys: script.numberOfKeys, lua: script.lua });
      }
    }
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

  async consume(keys: string[], spec: RateSpec, cost: number, nowMs?: number): Promise<CounterResult> {
    return this.run(spec.type, keys, [nowArg(nowMs), String(cost), ...scriptParams(spec).map(String)]);
  }

  async acquire(keys: string[], spec: LeaseSpec, leaseId: string, nowMs?: number): Promise<CounterResult> {
    return this.run('concurrency_acquire', keys, [nowArg(nowMs), leaseId, ...scriptParams(spec).map(String)]);
  }

  async release(keys: string[], spec: LeaseSpec, leaseId: string, nowMs?: number): Promise<CounterResult> {
    return this.run('concurrency_release', keys, [nowArg(nowMs), leaseId, ...scriptParams(spec).map(String)]);
  }

  /** Connected and the breaker not open. */
  isHealthy(): boolean {
    return !this.closed && this.client.status === 'ready' && this.breaker.state !== 'open';
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
    if (!this.ownsClient) return;
    try {
      await withDeadline(this.client.quit(), 1_000, 'QUIT');
    } catch {
      // Not connected (no offline queue) or slow: drop the connection instead.
    }
    this.client.disconnect();
  }

  // ---------------------------------------------------------------------------------------------

  private async run(name: ScriptName, keys: string[], args: string[]): Promise<CounterResult> {
    const script = this.scripts[name];
    if (keys.length !== script.numberOfKeys) {
      // A caller bug, not an outage: keys come from counterKeys().
      throw new Error(`${name} takes ${script.numberOfKeys} key(s), got ${keys.length}`);
    }
    if (this.closed) {
      throw this.failed('not_connected', name, new CounterStoreUnavailableError('counter store is closed'));
    }
    if (!this.breaker.tryAcquire()) {
      throw this.failed(
        'breaker_open',
        name,
        new CounterStoreUnavailableError('counter store unavailable: circuit breaker open after repeated failures'),
      );
    }
    const deadline = performance.now() + this.timeoutMs;
    let reply: unknown;
    try {
      if (this.startingUp && this.client.status !== 'ready') await this.firstConnection(deadline);
      const command = (this.client as unknown as Record<string, ScriptCommand>)[COMMAND_PREFIX + name];
      const pending = command.call(this.client, ...keys, ...args);
      reply = await withDeadline(pending, Math.max(1, deadline - performance.now()), name);
    } catch (err) {
      const kind = classify(err);
      // Only a Redis that cannot serve trips the breaker. An error reply from a script means Redis
      // answered: that decision fails by its failure mode, but one bad policy must not take every
      // other decision down with it.
      if (kind !== 'redis_error' || UNAVAILABLE_REPLY.test((err as Error)?.message ?? '')) this.breaker.recordFailure();
      else this.breaker.recordSuccess();
      const message = (err as Error)?.message ?? String(err);
      throw this.failed(kind, name, new CounterStoreUnavailableError(`counter store unavailable (${kind}): ${message}`, err));
    }
    let result: CounterResult;
    try {
      result = parseReply(reply);
    } catch (err) {
      // Redis answered, with something the scripts never return: a bug, not an outage.
      this.breaker.recordSuccess();
      throw this.failed('redis_error', name, new CounterStoreUnavailableError((err as Error).message, err));
    }
    this.breaker.recordSuccess();
    return result;
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
  const { breaker, ...clientOptions } = options;
  const client = createRedisClient(address, clientOptions);
  log.debug('counter store connecting', { counter_store: describeAddress(address) });
  return new RedisCounterStore(client, {
    breaker,
    operationTimeoutMs: options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
  });
}

// ---------------------------------------------------------------------------------------------------

class TimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TimeoutError';
  }
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

/** The script reply: {allowed 1/0, remaining, retry_after_ms, reset_after_ms}; see lua/includes/number.lua. */
function parseReply(reply: unknown): CounterResult {
  if (!Array.isArray(reply) || reply.length !== 4) {
    throw new Error(`unexpected script reply ${JSON.stringify(reply)}`);
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
