import { CounterStoreUnavailableError, LeaseWaitTimeoutError } from '../errors.js';
import type { CounterResult, CounterStore, SyncCounterOperations } from '../counters/counter-store.js';
import type { RateSpec } from '../counters/counter-spec.js';
import { CounterKeyCache } from '../counters/keys.js';
import type { PolicyMatch } from '../matching/matcher.js';
import type { RequestContext } from '../model/request-context.js';
import type { ProcessLeases } from '../lease/process-leases.js';
import { deniedCostOf, refundCall, releaseCall } from './counter-calls.js';
import type { CounterCall, Evaluation, Operation } from './decision-types.js';
import type { DenyCache } from './deny-cache.js';

/** What one decision asks of each counter it evaluates: the same for its enforcing and its shadow policy. */
export interface CounterAsk {
  readonly operation: Operation;
  readonly call: CounterCall;
  readonly ctx: RequestContext;
  readonly slotId: string;
  /** The decision's clock reading: when its refusals are cached from, and what a test's store counts at (clockToStore). */
  readonly nowMs: number;
}

/** What a synchronous store's call needs (it counts at the time it is handed, or its own clock). */
type SyncAsk = Pick<CounterAsk, 'call' | 'ctx' | 'slotId'>;
/** What the deny cache learns an answer from: the operation, the request and when it was sent. */
type Asked = Pick<CounterAsk, 'operation' | 'ctx' | 'nowMs'>;
/** An operation of a refused plan that took something, to give back (a synchronous store needs no time). */
type Taken = Omit<CounterAsk, 'call'>;
type SyncTaken = Omit<Taken, 'nowMs'>;

export interface CounterEvaluatorDeps {
  counters: CounterStore;
  keyPrefix: string;
  counterKeyCacheSize?: number;
  denyCache: DenyCache | undefined;
  leases: ProcessLeases | undefined;
  onCounterStoreError?: (error: CounterStoreUnavailableError) => void;
  /** Tests only (DecisionTestSeams.clockToStore): the store counts at the decision's clock reading. */
  clockToStore: boolean;
}

/**
 * Runs one matched policy's counter operation and turns its answer (or failure) into an Evaluation: the
 * counter keys, the store or this process's lease of the counter, the deny cache's learning, and which
 * errors a failure mode decides.
 */
export class CounterEvaluator {
  private readonly keys: CounterKeyCache;

  constructor(private readonly deps: CounterEvaluatorDeps) {
    this.keys = new CounterKeyCache(deps.keyPrefix, deps.counterKeyCacheSize);
  }

  /** A new policy snapshot brings new CompiledPolicy objects: the keys cached for the older will not be asked for again. */
  forgetKeys(): void {
    this.keys.clear();
  }

  keysOf(match: PolicyMatch): string[] {
    const { compiled } = match;
    return this.keys.keysOf(compiled, compiled.policy.policy_id, compiled.spec, match.identity);
  }

  /** A synchronous store, counting at `nowMs` (undefined: its own clock). */
  evaluateSync(ops: SyncCounterOperations, ask: SyncAsk, match: PolicyMatch, nowMs: number | undefined): Evaluation {
    try {
      return { match, result: ask.call(ops, this.keysOf(match), match, ask.ctx, ask.slotId, nowMs) };
    } catch (error) {
      return this.failedEvaluation(match, error);
    }
  }

  /**
   * A store that has to wait: the counter store, or this process's lease of the counter (which answers
   * at once while it holds units).
   */
  evaluate(ask: CounterAsk, match: PolicyMatch): Evaluation | Promise<Evaluation> {
    const { operation, call, ctx, slotId } = ask;
    const keys = this.keysOf(match);
    const leases = this.deps.leases;
    const lease = leases && operation !== 'acquire' && operation !== 'release' ? leases.operationsFor(keys, match.compiled) : undefined;
    let answer: CounterResult | Promise<CounterResult>;
    try {
      // The store reads its own clock (Redis: TIME), unless a test hands it this service's.
      answer = lease ? call(lease, keys, match, ctx, slotId, undefined) : call(this.deps.counters, keys, match, ctx, slotId, this.deps.clockToStore ? ask.nowMs : undefined);
    } catch (error) {
      return this.failedOperation(match, keys, error);
    }
    const leased = lease !== undefined;
    if (answer instanceof Promise) {
      return answer.then(
        (result) => this.evaluated(ask, match, keys[0], result, leased),
        (error) => this.failedOperation(match, keys, error),
      );
    }
    return this.evaluated(ask, match, keys[0], answer, leased);
  }

  /** A group's answer for one operation (CounterStore.group), as evaluate() would have made it. */
  grouped(asked: Asked, match: PolicyMatch, answer: CounterResult | Error): Evaluation {
    const keys = this.keysOf(match);
    return answer instanceof Error ? this.failedOperation(match, keys, answer) : this.evaluated(asked, match, keys[0], answer, false);
  }

  /** Gives back what an operation of a refused plan took: a consume's units (refund) or an acquire's slot (release). */
  giveBack(taken: Taken, match: PolicyMatch): Evaluation | Promise<Evaluation> {
    return this.evaluate(giveBackAsk(taken), match);
  }

  /** The same, on a synchronous store. */
  giveBackSync(sync: SyncCounterOperations, taken: SyncTaken, match: PolicyMatch, nowMs: number | undefined): Evaluation {
    return this.evaluateSync(sync, giveBackAsk(taken), match, nowMs);
  }

  /** The deny cache's answer for this match's counter, as an Evaluation, when it has one. */
  cachedRefusal(cache: DenyCache, match: PolicyMatch, ctx: RequestContext, nowMs: number): Evaluation | undefined {
    const result = cache.lookup(this.keysOf(match)[0], match.compiled, deniedCostOf(match, ctx), nowMs);
    return result === undefined ? undefined : { match, result };
  }

  /** `leased`: answered by this process's lease of the counter. */
  private evaluated(asked: Asked, match: PolicyMatch, key: string, result: CounterResult, leased: boolean): Evaluation {
    // Answers arrive in the order the store ran them (one connection per slot), so the cache
    // learns each counter's changes in order.
    const cache = this.deps.denyCache;
    if (cache && asked.operation !== 'acquire' && asked.operation !== 'release') tellDenyCache(cache, asked, match, key, result);
    return leased ? { match, result, leased } : { match, result };
  }

  /** The operation may or may not have run: whatever was cached for the counter is in doubt. */
  private failedOperation(match: PolicyMatch, keys: string[], error: unknown): Evaluation {
    this.deps.denyCache?.changed(keys[0]);
    return this.failedEvaluation(match, error);
  }

  /**
   * The counter store could not answer: the policy's failure mode will decide. A lease refill that took
   * too long: refused (a slow parent is not a failed one). Anything else is a bug, rethrown.
   */
  private failedEvaluation(match: PolicyMatch, error: unknown): Evaluation {
    if (error instanceof LeaseWaitTimeoutError) {
      const result = { allowed: false, remaining: 0, retryAfterMs: error.retryAfterMs, resetAfterMs: error.retryAfterMs };
      return { match, result, waitTimedOut: true };
    }
    if (!(error instanceof CounterStoreUnavailableError)) throw error;
    this.deps.onCounterStoreError?.(error);
    return { match, failed: error };
  }
}

/** The operation that gives back what `taken` took: a release for an acquire, else a refund. */
function giveBackAsk<T extends SyncTaken>(taken: T): T & Pick<CounterAsk, 'operation' | 'call'> {
  return taken.operation === 'acquire' ? { ...taken, operation: 'release', call: releaseCall } : { ...taken, operation: 'refund', call: refundCall };
}

/** What a rate counter's answer means for its cached refusal. */
function tellDenyCache(cache: DenyCache, { operation, ctx, nowMs }: Asked, match: PolicyMatch, key: string, result: CounterResult): void {
  const peek = operation === 'check' && ctx.quantity === 0;
  if (result.allowed) {
    // An admitted consume or a refund changed the counter; an admitting peek changed nothing.
    if (!peek) cache.changed(key);
  } else if (operation === 'check') {
    const { compiled } = match;
    const spec = compiled.spec as RateSpec;
    const lease = compiled.lease ?? spec.global?.lease;
    cache.refused(key, compiled, spec, deniedCostOf(match, ctx), result, nowMs, lease?.maxHoldMs);
  }
}
