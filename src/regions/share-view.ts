import type { CompiledShares, GlobalBudget } from '../counters/counter-spec.js';
import type { RegionShareUse } from '../schema/server-info.js';
import type { GivenBack, Grant, LeaseClock, LeaseParent, LocalMs } from '../lease/types.js';

/** What the global counter last said of one policy's shares: every region's units, until the window's end. */
interface Seen {
  policyId: string;
  shares: CompiledShares;
  taken: Record<string, number>;
  windowEndsAt: LocalMs;
  /** Until when `taken` is shown: the window's end; a sliding window's, once the window slid past when it was heard. */
  shownUntil: LocalMs;
}

/** At most this many policies are shown (the most recently taken from). */
const MAX_SHOWN = 64;

/**
 * Each region's use of a shared global budget's window, as this server last heard it from the global
 * counter (every take and give with shares answers it): for /rl/v1/info, `rl status` and the dashboard.
 * A policy with many counters shows the one this region took from last.
 */
export class ShareViews {
  private readonly seen = new Map<string, Seen>();

  constructor(private readonly clock: LeaseClock) {}

  /**
   * The global counter as a parent whose share answers are noted for `budget`. `slidingMs`: a sliding
   * window's length (its units' window is the sub-window, but a region's use counts until the window slid past).
   */
  observe(parent: LeaseParent, budget: GlobalBudget & { shares: CompiledShares }, slidingMs = 0): LeaseParent {
    const note = (taken: Record<string, number> | undefined, windowEndsAt?: LocalMs) => this.note(budget, taken, windowEndsAt, slidingMs);
    return {
      ...parent,
      take: async (n, named) => {
        const grant: Grant = await parent.take(n, named);
        note(grant.shareTaken, grant.spendBy);
        return grant;
      },
      giveBack: async (units, windowTag, named) => {
        const given: GivenBack = await parent.giveBack(units, windowTag, named);
        note(given.shareTaken);
        return given;
      },
      ...(parent.reclaim && {
        reclaim: async (takeId, deadline, by) => {
          const given = await parent.reclaim!(takeId, deadline, by);
          note(given.shareTaken);
          return given;
        },
      }),
    };
  }

  /**
   * What the global counter said of `budget`'s regions (a sliding log's consume, peek or refund says it too):
   * shown until `windowEndsAt` (unknown: the last one heard), or `slidingMs` on for a sliding window.
   */
  note(budget: GlobalBudget & { shares: CompiledShares }, taken: Record<string, number> | undefined, windowEndsAt?: LocalMs, slidingMs = 0): void {
    if (taken === undefined) return;
    const before = this.seen.get(budget.policyId);
    this.seen.delete(budget.policyId);
    const ends = windowEndsAt ?? before?.windowEndsAt ?? this.clock.now();
    const shownUntil = slidingMs > 0 ? this.clock.now() + slidingMs : ends;
    this.seen.set(budget.policyId, { policyId: budget.policyId, shares: budget.shares, taken, windowEndsAt: ends, shownUntil });
    if (this.seen.size > MAX_SHOWN) this.seen.delete(this.seen.keys().next().value!);
  }

  /**
   * Per policy: each region's units of the window (0 once it ended) beside its guarantee, and the common
   * share; `window_left_ms`, what is left of the window (a sliding window's: of its current sub-window; a
   * sliding log's: until it is empty).
   */
  status(): RegionShareUse[] {
    const now = this.clock.now();
    return [...this.seen.values()].map(({ policyId, shares, taken, windowEndsAt, shownUntil }) => {
      const live = now < shownUntil;
      const names = [...new Set([...Object.keys(shares.guaranteed), ...Object.keys(taken)])].sort();
      let commonTaken = 0;
      const regions = names.map((region) => {
        const guaranteed = shares.guaranteed[region] ?? 0;
        const units = live ? (taken[region] ?? 0) : 0;
        commonTaken += Math.max(0, units - guaranteed);
        return { region, taken: units, guaranteed };
      });
      return { policy_id: policyId, window_left_ms: Math.max(0, Math.ceil(windowEndsAt - now)), regions, common: { size: shares.common, taken: commonTaken } };
    });
  }
}
