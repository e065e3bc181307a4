import type { CounterResult, CounterStore, LeaseCounterResult } from '../counters/counter-store.js';
import type { RateSpec } from '../counters/counter-spec.js';
import type { GivenBack, Grant, LeaseClock, LeaseParent, LocalMs, NamedTakeLimits } from './types.js';

/** The algorithms a capacity lease supports (docs/reference.md "Slots, leases and pools": not sliding_window_log, not concurrency). */
export type LeasedSpec = Exclude<RateSpec, { type: 'sliding_window_log' }>;

type ParentStore = Required<Pick<CounterStore, 'take' | 'giveBack'>> & Pick<CounterStore, 'peek' | 'reclaim'>;

/**
 * A counter in a CounterStore as a lease parent: each operation one call of the policy's own script
 * (lua/includes/mode.lua, lua/includes/lease.lua). A store without `reclaim` (a region's pool) names no
 * takes or gives. `holdMs`: the holder's max_hold, how long a bucket's units may stay out of it.
 * `region`: a region holder's name, which a global budget with shares counts its takes under.
 */
export function storeParent(store: ParentStore, keys: string[], spec: LeasedSpec, clock: LeaseClock, holdMs: number, region?: string): LeaseParent {
  const share = region === undefined ? {} : { region };
  const reclaim = store.reclaim?.bind(store);
  const ledgered = (named: NamedTakeLimits | undefined) => {
    if (named !== undefined && reclaim === undefined) throw new Error('this parent keeps no take ledger: it takes no take id or deadline');
    return named;
  };
  const parent: LeaseParent = {
    async take(n: number, named?: NamedTakeLimits): Promise<Grant> {
      const sentAt = clock.now();
      return grantOf(await store.take(keys, spec, n, undefined, { ...ledgered(named), holdMs, ...share }), sentAt);
    },
    async giveBack(units: number, windowTag: number | null, named?: NamedTakeLimits): Promise<GivenBack> {
      return givenBack(await store.giveBack(keys, spec, { units, windowTag, named: { ...ledgered(named), ...share } }));
    },
    peek(): Promise<CounterResult> {
      return store.peek(keys, spec);
    },
  };
  if (reclaim !== undefined) parent.reclaim = async (takeId, deadline, by) => givenBack(await reclaim(keys, spec, { takeId, deadline, by, ...share }));
  return parent;
}

function givenBack(answer: LeaseCounterResult): GivenBack {
  const given: GivenBack = { returned: answer.units, lapsed: answer.lapsed, outcome: answer.outcome, parentNow: answer.storeNow };
  if (answer.shareTaken) given.shareTaken = answer.shareTaken;
  return given;
}

/** The tag as the store answered it; spendable from the send for what the store said (it ran no earlier). */
function grantOf(answer: LeaseCounterResult, sentAt: LocalMs): Grant {
  const grant: Grant = {
    granted: answer.units,
    remaining: answer.remaining,
    retryAfterMs: answer.retryAfterMs,
    resetAfterMs: answer.resetAfterMs,
    windowTag: answer.windowTag,
    spendBy: sentAt + answer.windowLeftMs,
    parentNow: answer.storeNow,
    outcome: answer.outcome as Grant['outcome'],
  };
  if (answer.shareTaken) grant.shareTaken = answer.shareTaken;
  return grant;
}
