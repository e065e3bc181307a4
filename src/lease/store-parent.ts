import type { CounterResult, CounterStore, LeaseCounterResult } from '../counters/counter-store.js';
import type { RateSpec } from '../counters/counter-spec.js';
import type { Grant, LeaseClock, LeaseParent } from './types.js';

/** The algorithms a capacity lease supports (CONTRACT: not sliding_window_log, not concurrency). */
export type LeasedSpec = Exclude<RateSpec, { type: 'sliding_window_log' }>;

export function isLeasable(spec: { type: string }): spec is LeasedSpec {
  return spec.type !== 'sliding_window_log' && spec.type !== 'concurrency';
}

/**
 * A counter in a CounterStore as a lease parent: a take is ONE call of the policy's own script in its
 * partial-take mode, a return one call in its window-checked return mode (lua/includes/mode.lua).
 */
export function storeParent(
  store: Required<Pick<CounterStore, 'take' | 'giveBack'>> & Pick<CounterStore, 'peek'>,
  keys: string[],
  spec: LeasedSpec,
  clock: LeaseClock,
): LeaseParent {
  const bucket = spec.type === 'token_bucket' || spec.type === 'leaky_bucket';
  return {
    async take(n: number): Promise<Grant> {
      const sentAt = clock.now();
      return grantOf(await store.take(keys, spec, n), bucket, sentAt);
    },
    async giveBack(units: number, windowTag: string | null): Promise<number> {
      const answer = await store.giveBack(keys, spec, units, bucket || windowTag === null ? null : Number(windowTag));
      return answer.units;
    },
    peek(): Promise<CounterResult> {
      return store.peek(keys, spec);
    },
  };
}

/**
 * A take's answer as a Grant. The window's end by the holder's clock is computed conservatively: the
 * send time plus what the store said was left of the window, which is never later than the true end
 * when both clocks run at the same rate (the store answered no earlier than the holder sent).
 */
export function grantOf(answer: LeaseCounterResult, bucket: boolean, sentAt: number): Grant {
  return {
    granted: answer.units,
    remaining: answer.remaining,
    retryAfterMs: answer.retryAfterMs,
    resetAfterMs: answer.resetAfterMs,
    windowTag: bucket ? null : String(answer.windowTag),
    spendBy: bucket ? Infinity : sentAt + answer.windowLeftMs,
  };
}
