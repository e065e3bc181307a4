import type { CompiledLease } from '../counters/counter-spec.js';
import type { CounterResult, CounterStore } from '../counters/counter-store.js';
import type { CompiledPolicy } from '../matching/matcher.js';
import { LeaseHolder, unansweredTakes, type UnansweredTakes } from './lease-holder.js';
import { ProcessUnitPool } from './process-pool.js';
import { storeParent, type LeasedSpec } from './store-parent.js';
import { systemClock, type LeaseClock, type LeaseEvents, type UnitHolders } from './types.js';

/** A counter store that can lend units: the Redis store (the emulator can too, but memory mode needs no lease). */
export type LendingStore = CounterStore & Required<Pick<CounterStore, 'take' | 'giveBack'>>;

/** A holder's answers in the shape of the store's operations, so DecisionService calls both alike. */
export interface LeaseOperations {
  consume(keys: string[], spec: unknown, cost: number): CounterResult | Promise<CounterResult>;
  peek(keys: string[], spec: unknown): Promise<CounterResult>;
  refund(keys: string[], spec: unknown, amount: number): Promise<CounterResult>;
  acquire(): never;
  release(): never;
}

type Entry = { compiled: CompiledPolicy; holder: LeaseHolder; ops: LeaseOperations };

export interface ProcessLeasesOptions {
  store: LendingStore;
  /** RL_LEASE_MAX_WAIT_MS. */
  maxWaitMs: number;
  /** RL_COUNTERSTORE_TIMEOUT_MS: how long a take may take, its deadline at the store. */
  takeTimeoutMs: number;
  clock?: LeaseClock;
  /** Metric hooks for a holder of this policy (Metrics.leaseEvents('process', policyId)). */
  events?: (policyId: string) => LeaseEvents;
}

/**
 * Process leases (docs/reference.md "Slots, leases and pools"): this process holds every counter whose policy has a
 * `lease`, the counter store its parent. One LeaseHolder per counter key, made on the first decision,
 * dropped when it lets go: idle for max_hold, its policy changed (`policiesChanged`), or drain (`letGoAll`).
 */
export class ProcessLeases implements UnitHolders {
  private readonly entries = new Map<string, Entry>();
  private readonly clock: LeaseClock;
  /** One store, one clock to sample, and failed takes and gives outliving their holder: shared by the holders. */
  private readonly takes: UnansweredTakes;
  private closed = false;

  constructor(private readonly options: ProcessLeasesOptions) {
    this.clock = options.clock ?? systemClock;
    this.takes = unansweredTakes(this.clock);
  }

  /** Holders alive now (for tests and status). */
  get size(): number {
    return this.entries.size;
  }

  /** The holder's operations for this counter, or undefined when its policy takes no lease. */
  operationsFor(keys: string[], compiled: CompiledPolicy): LeaseOperations | undefined {
    if (compiled.lease === undefined || this.closed) return undefined;
    const entry = this.entries.get(keys[0]);
    if (entry !== undefined && entry.compiled === compiled) return entry.ops;
    // A changed policy on the same counter: the old holder returns its units first (off this path).
    if (entry !== undefined) void this.release(keys[0], entry);
    return this.open(keys, compiled, compiled.lease).ops;
  }

  /** Lets go of every holder whose policy is no longer `current(policy_id)` (changed, disabled or deleted). */
  policiesChanged(current: (policyId: string) => object | undefined): void {
    for (const [key, entry] of this.entries) {
      if (current(entry.compiled.policy.policy_id) !== entry.compiled) void this.release(key, entry);
    }
  }

  /** Drain: every holder returns its unspent units, and what failed on its way is settled; no new holder is made afterwards. */
  async letGoAll(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.entries].map(([key, entry]) => this.release(key, entry)));
    await this.takes.close();
  }

  private open(keys: string[], compiled: CompiledPolicy, lease: CompiledLease): Entry {
    const holder = new LeaseHolder({
      // A compiled lease exists only for the leasable algorithms (src/policy/lease-terms.ts).
      parent: storeParent(this.options.store, keys, compiled.spec as LeasedSpec, this.clock, lease.maxHoldMs),
      pool: new ProcessUnitPool(lease.shape === 'bucket'),
      clock: this.clock,
      maxWaitMs: this.options.maxWaitMs,
      takeTimeoutMs: this.options.takeTimeoutMs,
      takes: this.takes,
      events: this.options.events?.(compiled.policy.policy_id),
      lease,
    });
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
    holder.onIdle = () => void this.release(keys[0], entry);
    this.entries.set(keys[0], entry);
    return entry;
  }

  private release(key: string, entry: Entry): Promise<void> {
    if (this.entries.get(key) === entry) this.entries.delete(key);
    return entry.holder.letGo();
  }
}

function notLeased(): never {
  throw new Error('concurrency policies take no capacity lease');
}
