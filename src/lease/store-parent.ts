import type { CounterResult, CounterStore, LeaseCounterResult } from '../counters/counter-store.js';
import type { RateSpec } from '../counters/counter-spec.js';
import { leaseShapeOf } from '../policy/lease-terms.js';
import type { Grant, LeaseClock, LeaseParent } from './types.js';

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
 * partial-take mode, a return one call in its window-checked return mode (lua/includes/mode.lua).
 * `holdMs`: the holder's max_hold, how long a bucket's units may stay out of it.
 */
export function storeParent(
  store: Required<Pick<CounterStore, 'take' | 'giveBack'>> & Pick<CounterStore, 'peek'>,
  keys: string[],
  spec: LeasedSpec,
  clock: LeaseClock,
  holdMs: number,
): LeaseParent {
  const bucket = isBucket(spec);
  return {
    async take(n: number): Promise<Grant> {
      const sentAt = clock.now();
      return grantOf(await store.take(keys, spec, n), bucket, sentAt, holdMs);
    },
    async giveBack(units: number, windowTag: string | null): Promise<number> {
      const answer = await store.giveBack(keys, spec, units, windowTag === null ? null : Number(windowTag));
      return answer.units;
    },
    peek(): Promise<CounterResult> {
      return store.peek(keys, spec);
    },
  };
}

/**
 * A take's answer as a Grant. Only durations cross machines: the window's end by the holder's clock is
 * the send time plus what the store said was left of the window, never later than the true end when
 * both clocks run at the same rate (the store answered no earlier than the holder sent); a bucket's
 * units are spent by the send time plus max_hold. A bucket's units go back by the take's instant plus
 * max_hold in the store's own clock (its tag), which a return names: arriving later, they lapse there.
 */
export function grantOf(answer: LeaseCounterResult, bucket: boolean, sentAt: number, holdMs: number): Grant {
  return {
    granted: answer.units,
    remaining: answer.remaining,
    retryAfterMs: answer.retryAfterMs,
    resetAfterMs: answer.resetAfterMs,
    windowTag: String(bucket ? answer.windowTag + holdMs : answer.windowTag),
    spendBy: sentAt + (bucket ? holdMs : answer.windowLeftMs),
  };
}
