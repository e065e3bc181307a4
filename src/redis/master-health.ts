import type { Cluster, Redis } from 'ioredis';
import { log } from '../util/log.js';
import { CircuitBreaker, type BreakerState, type CircuitBreakerOptions } from './circuit-breaker.js';

/**
 * Health per Redis master: one circuit breaker and one count of calls in flight for each master, so a
 * dead or failing master costs only the keys it serves.
 *
 * In a Cluster a call belongs to the master that owns its slot in the client's slot map as it is now.
 * ioredis keeps that map current (MOVED replies, lost connections, a periodic refresh), so after a
 * failover or a resharding the slot's calls count for its new master at once: the dead master's open
 * breaker stays with the dead master. An open breaker also asks for a fresh slot map (each time it
 * opens, so at most once per cool-down): the breaker keeps calls away from the dead master, so no
 * MOVED reply would tell the client that its replica took over. Standalone and Sentinel have one master (whichever server
 * Sentinel names), so one breaker, as before.
 */

/** One master as callers see it. */
export interface MasterGuard {
  /** `host:port` of a Cluster master; `master` for a standalone or Sentinel deployment. */
  readonly master: string;
  readonly breaker: CircuitBreaker;
  /** Calls sent to this master and not yet answered, failed or timed out. */
  pendingCalls: number;
}

/** A master's state for metrics and /rl/v1/info. */
export interface MasterState {
  master: string;
  breaker: BreakerState;
  consecutive_failures: number;
  pending_calls: number;
}

/** The slot of every call outside a Cluster. */
export const ANY_SLOT = -1;
/** Label of the one master outside a Cluster. */
export const SINGLE_MASTER = 'master';
/** A Cluster slot whose owner the client does not know yet (before the first slot map). */
export const UNKNOWN_MASTER = 'unknown';

export class MasterHealth {
  private readonly guards = new Map<string, MasterGuard>();
  private readonly cluster: Cluster | undefined;
  private readonly breakerOptions: CircuitBreakerOptions;

  /**
   * `breaker`: options for each master's breaker, or (standalone and Sentinel only) the one breaker
   * to use.
   */
  constructor(client: Redis | Cluster, breaker: CircuitBreaker | CircuitBreakerOptions = {}) {
    this.cluster = client.isCluster ? (client as Cluster) : undefined;
    if (breaker instanceof CircuitBreaker) {
      if (this.cluster) throw new Error('a Redis Cluster has one breaker per master: pass breaker options, not a CircuitBreaker');
      this.guards.set(SINGLE_MASTER, { master: SINGLE_MASTER, breaker, pendingCalls: 0 });
      this.breakerOptions = {};
    } else {
      this.breakerOptions = breaker;
      // The one master is known from the start; a Cluster's appear with its slot map.
      if (!this.cluster) this.newGuard(SINGLE_MASTER);
    }
  }

  get isCluster(): boolean {
    return this.cluster !== undefined;
  }

  /** The guard of the master serving `slot` now (ANY_SLOT outside a Cluster). */
  guardFor(slot: number): MasterGuard {
    const master = this.cluster ? (this.cluster.slots[slot]?.[0] ?? UNKNOWN_MASTER) : SINGLE_MASTER;
    return this.guards.get(master) ?? this.newGuard(master);
  }

  /** Every master seen so far (a failed-over master stays listed with its last state), by name. */
  states(): MasterState[] {
    return [...this.guards.values()]
      .sort((a, b) => (a.master < b.master ? -1 : a.master > b.master ? 1 : 0))
      .map(({ master, breaker, pendingCalls }) => ({
        master,
        breaker: breaker.state,
        consecutive_failures: breaker.consecutiveFailures,
        pending_calls: pendingCalls,
      }));
  }

  /** Some master that currently serves slots has an open breaker. */
  anyOpen(): boolean {
    const open = [...this.guards.values()].filter((guard) => guard.breaker.state === 'open');
    if (open.length === 0 || !this.cluster) return open.length > 0;
    const serving = new Set(this.cluster.slots.map((owners) => owners?.[0]));
    return open.some((guard) => serving.has(guard.master));
  }

  private newGuard(master: string): MasterGuard {
    const breaker = new CircuitBreaker({
      ...this.breakerOptions,
      onStateChange: (to, from) => {
        this.breakerOptions.onStateChange?.(to, from);
        if (to === 'open') {
          log.warn('counter store breaker open', { master });
          this.cluster?.refreshSlotsCache();
        } else if (to === 'closed') {
          log.info('counter store breaker closed', { master });
        }
      },
    });
    const guard: MasterGuard = { master, breaker, pendingCalls: 0 };
    this.guards.set(master, guard);
    return guard;
  }
}
