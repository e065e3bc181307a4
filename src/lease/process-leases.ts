import type { CounterResult, CounterStore } from '../counters/counter-store.js';
import type { CompiledPolicy } from '../matching/matcher.js';
import { LeaseHolder } from './lease-holder.js';
import { ProcessUnitPool } from './process-pool.js';
import { storeParent, type LeasedSpec } from './store-parent.js';
import { systemClock, type LeaseClock, type LeaseEvents, type MaybePromise, type UnitHolders } from './types.js';

/** A counter store that can lend units: the Redis store (the emulator can too, but memory mode needs no lease). */
export type LendingStore = CounterStore & Required<Pick<CounterStore, 'take' | 'giveBack'>>;

/** A holder's answers in the shape of the store's operations, so DecisionService calls both alike. */
export interface LeaseOperations {
  consume(keys: string[], spec: unknown, cost: number): MaybePromise<CounterResult>;
  peek(keys: string[], spec: unknown): Promise<CounterResult>;
  refund(keys: string[], spec: unknown, amount: number): Promise<CounterResult>;
  acquire(): never;
  release(): never;
}

interface Entry {
  compiled: CompiledPolicy;
  holder: LeaseHolder;
  ops: LeaseOperations;
}

export interface ProcessLeasesOptions {
  store: LendingStore;
  /** RL_LEASE_MAX_WAIT_MS. */
  maxWaitMs: number;
  clock?: LeaseClock;
  /** Metric hooks for a holder of this policy (Metrics.leaseEvents('process', policyId)). */
  events?: (policyId: string) => LeaseEvents;
}

/**
 * Process leases (CONTRACT "Process leases"): this server process is the holder of every counter whose
 * policy has a `lease`, the counter store its parent. One LeaseHolder per counter key, made on the
 * first decision, dropped when it lets go: after max_hold without use, when its policy changes
 * (`policiesChanged`), and on drain (`letGoAll`).
 */
export class ProcessLeases implements UnitHolders {
  private readonly entries = new Map<string, Entry>();
  private readonly store: LendingStore;
  private readonly maxWaitMs: number;
  private readonly clock: LeaseClock;
  private readonly events: ((policyId: string) => LeaseEvents) | undefined;
  private closed = false;

  constructor(options: ProcessLeasesOptions) {
    this.store = options.store;
    this.maxWaitMs = options.maxWaitMs;
    this.clock = options.clock ?? systemClock;
    this.events = options.events;
  }

  /** Holders alive now (for tests and status). */
  get size(): number {
    return this.entries.size;
  }

  /** The holder's operations for this counter, or undefined when its policy takes no lease. */
  operationsFor(keys: string[], compiled: CompiledPolicy): LeaseOperations | undefined {
    if (compiled.lease === undefined || this.closed) return undefined;
    const key = keys[0];
    const entry = this.entries.get(key);
    if (entry !== undefined && entry.compiled === compiled && !entry.holder.isClosed) return entry.ops;
    // A changed policy on the same counter: the old holder returns its units first (off this path).
    if (entry !== undefined) this.release(key, entry);
    return this.open(keys, compiled)?.ops;
  }

  /** Lets go of every holder whose policy is no longer `current(policy_id)` (changed, disabled or deleted). */
  policiesChanged(current: (policyId: string) => object | undefined): void {
    for (const [key, entry] of this.entries) {
      if (current(entry.compiled.policy.policy_id) !== entry.compiled) this.release(key, entry);
    }
  }

  /** Drain: every holder returns its unspent units; no new holder is made afterwards. */
  async letGoAll(): Promise<void> {
    this.closed = true;
    const all = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(all.map((entry) => entry.holder.letGo()));
  }

  private open(keys: string[], compiled: CompiledPolicy): Entry | undefined {
    const { spec, policy, lease } = compiled;
    if (lease === undefined) return undefined;
    const holder = new LeaseHolder({
      // A compiled lease exists only for the leasable algorithms (src/policy/lease-terms.ts).
      parent: storeParent(this.store, keys, spec as LeasedSpec, this.clock, lease.maxHoldMs),
      pool: new ProcessUnitPool(lease.shape === 'bucket'),
      clock: this.clock,
      maxWaitMs: this.maxWaitMs,
      events: this.events?.(policy.policy_id),
      lease,
    });
    const key = keys[0];
    const entry: Entry = {
      compiled,
      holder,
      ops: {
        consume: (_keys, _spec, cost) => holder.consume(cost),
        peek: () => holder.peek(),
        refund: (_keys, _spec, amount) => holder.refund(amount),
        acquire: notLeased,
        release: notLeased,
      },
    };
    holder.onIdle = () => {
      if (this.entries.get(key) === entry) this.entries.delete(key);
    };
    this.entries.set(key, entry);
    return entry;
  }

  private release(key: string, entry: Entry): void {
    if (this.entries.get(key) === entry) this.entries.delete(key);
    void entry.holder.letGo();
  }
}

function notLeased(): never {
  throw new Error('concurrency policies take no capacity lease');
}
