import type { CounterStoreUnavailableError } from '../errors.js';
import type { ScriptName } from './lua-scripts.js';

/** How the Redis counter store tells its failures apart (the `kind` of each error event) and reports them. */

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

export class TimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TimeoutError';
  }
}

export function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
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
export const UNAVAILABLE_REPLY = /^(LOADING|READONLY|CLUSTERDOWN|MASTERDOWN|TRYAGAIN|BUSY|OOM|NOREPLICAS|MISCONF)\b/;

export function isUnavailableReply(err: unknown): boolean {
  return UNAVAILABLE_REPLY.test((err as Error)?.message ?? '');
}

export function classify(err: unknown): CounterStoreErrorKind {
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

/** Counts failed operations and tells every subscriber of each (metrics: rl_counter_store_errors_total). */
export class ErrorReporter {
  private readonly listeners = new Set<(event: CounterStoreErrorEvent) => void>();
  private failures = 0;

  /** Failed operations so far, breaker rejections included. */
  get count(): number {
    return this.failures;
  }

  /** Returns the unsubscribe function. */
  subscribe(listener: (event: CounterStoreErrorEvent) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Counts one failed operation and tells every listener; returns its error, to throw or reject with. */
  failed(kind: CounterStoreErrorKind, operation: ScriptName, error: CounterStoreUnavailableError): CounterStoreUnavailableError {
    this.failures++;
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
