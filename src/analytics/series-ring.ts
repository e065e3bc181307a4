import type { OutcomeRates, SeriesHistory } from '../schema/dashboard-stream.js';

/**
 * The dashboard's per-tick series (decisions per second by outcome, and the same for the busiest
 * policies of each tick) for a fixed number of ticks, in preallocated arrays: pushing a tick allocates
 * nothing, and memory is fixed at construction whatever the traffic (docs/dashboard.md states the bound).
 * The oldest tick is overwritten once the ring is full.
 */
export class SeriesRing {
  private readonly at: Float64Array;
  /** allowed, denied, shadow of each tick. */
  private readonly totals: Float64Array;
  /** `policiesPerTick` policy ids per tick (undefined past the tick's last), references to the ids the analytics hold. */
  private readonly policyIds: (string | undefined)[];
  /** allowed, denied, shadow of each of those policies. */
  private readonly policyRates: Float64Array;
  /** Where the next tick goes. */
  private next = 0;
  private filled = 0;

  constructor(
    readonly capacity: number,
    readonly policiesPerTick: number,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
    if (!Number.isInteger(policiesPerTick) || policiesPerTick < 0) throw new RangeError(`policiesPerTick must be a non-negative integer, got ${policiesPerTick}`);
    this.at = new Float64Array(capacity);
    this.totals = new Float64Array(capacity * 3);
    this.policyIds = new Array<string | undefined>(capacity * policiesPerTick).fill(undefined);
    this.policyRates = new Float64Array(capacity * policiesPerTick * 3);
  }

  /** Ticks held: up to `capacity`. */
  get size(): number {
    return this.filled;
  }

  /** One tick: its time, its rates, and its policies busiest first (only the first `policiesPerTick` are kept). */
  push(at: number, rates: OutcomeRates, policies: readonly (OutcomeRates & { policy_id: string })[]): void {
    const slot = this.next;
    this.at[slot] = at;
    this.totals[slot * 3] = rates.allowed;
    this.totals[slot * 3 + 1] = rates.denied;
    this.totals[slot * 3 + 2] = rates.shadow;
    const base = slot * this.policiesPerTick;
    for (let i = 0; i < this.policiesPerTick; i++) {
      const policy = policies[i];
      this.policyIds[base + i] = policy?.policy_id;
      const r = (base + i) * 3;
      this.policyRates[r] = policy?.allowed ?? 0;
      this.policyRates[r + 1] = policy?.denied ?? 0;
      this.policyRates[r + 2] = policy?.shadow ?? 0;
    }
    this.next = (slot + 1) % this.capacity;
    if (this.filled < this.capacity) this.filled++;
  }

  /**
   * Every tick held, oldest first, in columns. Policies: those of the newest tick, each over the whole
   * history, `null` where a tick did not count it among its busiest (its rate then is not known).
   */
  history(): SeriesHistory {
    const slots: number[] = [];
    for (let i = 0; i < this.filled; i++) slots.push((this.next - this.filled + i + this.capacity) % this.capacity);
    const newest = slots[slots.length - 1];
    const ids: string[] = [];
    for (let i = 0; newest !== undefined && i < this.policiesPerTick; i++) {
      const id = this.policyIds[newest * this.policiesPerTick + i];
      if (id !== undefined) ids.push(id);
    }
    return {
      at: slots.map((s) => this.at[s]),
      allowed: slots.map((s) => this.totals[s * 3]),
      denied: slots.map((s) => this.totals[s * 3 + 1]),
      shadow: slots.map((s) => this.totals[s * 3 + 2]),
      policies: ids.map((policyId) => {
        const columns = { policy_id: policyId, allowed: [] as (number | null)[], denied: [] as (number | null)[], shadow: [] as (number | null)[] };
        for (const s of slots) {
          const r = this.indexOf(s, policyId);
          columns.allowed.push(r < 0 ? null : this.policyRates[r * 3]);
          columns.denied.push(r < 0 ? null : this.policyRates[r * 3 + 1]);
          columns.shadow.push(r < 0 ? null : this.policyRates[r * 3 + 2]);
        }
        return columns;
      }),
    };
  }

  /** The index of a policy's entry in a tick, or -1. */
  private indexOf(slot: number, policyId: string): number {
    const base = slot * this.policiesPerTick;
    for (let i = 0; i < this.policiesPerTick; i++) if (this.policyIds[base + i] === policyId) return base + i;
    return -1;
  }
}
