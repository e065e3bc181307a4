import type { CounterResult, CounterStore, LeaseCounterResult } from '../counters/counter-store.js';
import type { RateSpec } from '../counters/counter-spec.js';
import { leaseShapeOf } from '../policy/lease-terms.js';
import type { Grant, LeaseClock, LeaseParent, NamedTakeLimits, Reclaimed } from './types.js';

/** The algorithms a capacity lease supports (CONTRACT: not sliding_window_log, not concurrency). */
export type LeasedSpec = Exclude<RateSpec, { type: 'sliding_window_log' }>;

export function isLeasable(spec: { type: string }): spec is LeasedSpec {
  return leaseShapeOf(spec.type) !== undefined;
}

/** The buckets: their units lapse max_hold after they left the counter, whatever the window. */
export function isBucket(spec: { type: string }): boolean {
  return leaseShapeOf(spec.type) === 'bucket';
}

/**
 * A counter in a CounterStore as a lease parent: a take is ONE call of the policy's own script in its
 * partial-take mode, a return one call in its window-checked return mode (lua/includes/mode.lua), a
 * reclaim one call that gives a named take back (lua/includes/lease.lua); a store without `reclaim`
 * (a region's pool) names no takes, and its parent has no `reclaim`.
 * `holdMs`: the holder's max_hold, how long a bucket's units may stay out of it.
 */
export function storeParent(
  store: Required<Pick<CounterStore, 'take' | 'giveBack'>> & Pick<CounterStore, 'peek' | 'reclaim'>,
  keys: string[],
  spec: LeasedSpec,
  clock: LeaseClock,
  holdMs: number,
): LeaseParent {
  const bucket = isBucket(spec);
  const reclaim = store.reclaim?.bind(store);
  const parent: LeaseParent = {
    async take(n: number, named?: NamedTakeLimits): Promise<Grant> {
      if (named !== undefined && reclaim === undefined) throw new Error('this parent keeps no take ledger: it takes no take id or deadline');
      const sentAt = clock.now();
      const answer = await store.take(keys, spec, n, undefined, named && { ...named, holdMs });
      return grantOf(answer, bucket, sentAt, holdMs);
    },
    async giveBack(units: number, windowTag: string | null): Promise<number> {
      const answer = await store.giveBack(keys, spec, units, windowTag === null ? null : Number(windowTag));
      return answer.units;
    },
    peek(): Promise<CounterResult> {
      return store.peek(keys, spec);
    },
  };
  if (reclaim !== undefined) {
    parent.reclaim = async (takeId: string, deadline?: number): Promise<Reclaimed> => {
      const answer = await reclaim(keys, spec, { takeId, deadline });
      return { returned: answer.units, lapsed: answer.lapsed, outcome: answer.outcome as Reclaimed['outcome'], parentNow: answer.storeNow };
    };
  }
  return parent;
}

/**
 * A take's answer as a Grant. Only durations cross machines: the window's end by the holder's clock is
 * the send time plus what the store said was left of the window, never later than the true end when
 * both clocks run at the same rate (the store answered no earlier than the holder sent); a bucket's
 * units are spent by the send time plus max_hold, less what the store says they have been out already
 * (a repeated take answers a grant made earlier). A bucket's units go back by the take's instant plus
 * max_hold in the store's own clock (its tag), which a return names: arriving later, they lapse there.
 */
/** A repeated bucket take's units left the counter when it first ran (its tag): that much of their hold has passed. */
function heldAlready(answer: LeaseCounterResult): number {
  return answer.outcome === 'repeat' ? answer.storeNow - answer.windowTag : 0;
}

export function grantOf(answer: LeaseCounterResult, bucket: boolean, sentAt: number, holdMs: number): Grant {
  return {
    granted: answer.units,
    remaining: answer.remaining,
    retryAfterMs: answer.retryAfterMs,
    resetAfterMs: answer.resetAfterMs,
    windowTag: String(bucket ? answer.windowTag + holdMs : answer.windowTag),
    spendBy: sentAt + (bucket ? holdMs - heldAlready(answer) : answer.windowLeftMs),
    parentNow: answer.storeNow,
    outcome: answer.outcome as Grant['outcome'],
  };
}
