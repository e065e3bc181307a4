import type { FailureMode } from '../policy/types.js';
import type { LapseReason, LeaseParent, LocalMs } from './types.js';

/**
 * One layer's counter as an RLQS stream sees it: the winner's counter as a lease parent (holder = the
 * stream), with what the chunk rule and the assignment's life need of the policy.
 */
export interface LayerCounter {
  policyId: string;
  parent: LeaseParent;
  /** The policy's lease.max_hold (1 s by default): an assignment lives no longer. */
  holdMs: number;
  /** The policy's lease.max_units, when it has a lease; else no cap but the token bucket's own (uint32). */
  maxUnits: number;
  failureMode: FailureMode;
  /** Why units of this counter lapse when their spend-by passes (window_ended, hold_expired). */
  expiry: LapseReason;
}

/** The units one take put in a stream's hands, from every layer that counted them alike. */
export interface LayeredGrant {
  units: number;
  /** The layers the units were taken from (a layer whose store failed open is not among them). */
  layers: readonly LayerCounter[];
  /** Per layer of `layers`, in their order: the tag a give back names. */
  windowTags: number[];
  /** The earliest instant (local clock) any layer's units must be spent by. */
  spendBy: LocalMs;
  /** A layer's store failed and its failure mode let the take go on without it: the assignment lives briefly. */
  failedOpen: boolean;
}

/** Why a take gave nothing: the counters admit no more (for how long), or a store failed. */
export type TakeRefusal = { refused: 'spent'; retryAfterMs: number; remaining: 0 } | { refused: 'failed'; failureMode: FailureMode; error: unknown };

export type TakeAnswer = (LayeredGrant & { remaining: number; refused?: undefined }) | TakeRefusal;

/** Units a give back could not return (the store erred): they stay consumed, and are counted lapsed. */
export type OnLapse = (layer: LayerCounter, units: number, reason: LapseReason) => void;

/**
 * Takes `n` units from every layer, all or nothing, each layer decided as a check decides it: each is
 * asked for what the layers before it granted, and what an earlier layer granted past the smallest grant
 * goes straight back. A layer whose store fails answers by its failure mode: fail_closed refuses the take
 * (what the others took goes back), fail_open lets the other layers decide without it. Only when every
 * layer failed open does the take answer `failed` with fail_open.
 */
export async function takeLayered(layers: readonly LayerCounter[], n: number, onLapse: OnLapse = () => undefined): Promise<TakeAnswer> {
  const taken: { layer: LayerCounter; units: number; windowTag: number; spendBy: LocalMs }[] = [];
  let want = n;
  let remaining = Infinity;
  const failedOpen: unknown[] = [];
  for (const layer of layers) {
    let grant;
    try {
      grant = await layer.parent.take(want);
    } catch (error) {
      if (layer.failureMode === 'fail_open') {
        failedOpen.push(error);
        continue;
      }
      await giveBackEach(taken, onLapse);
      return { refused: 'failed', failureMode: 'fail_closed', error };
    }
    remaining = Math.min(remaining, grant.remaining);
    if (grant.granted === 0) {
      await giveBackEach(taken, onLapse);
      return { refused: 'spent', retryAfterMs: Math.max(1, grant.retryAfterMs), remaining: 0 };
    }
    taken.push({ layer, units: grant.granted, windowTag: grant.windowTag, spendBy: grant.spendBy });
    want = grant.granted;
  }
  if (taken.length === 0) return { refused: 'failed', failureMode: 'fail_open', error: failedOpen[0] };
  const units = want;
  await giveBackEach(taken.map((t) => ({ ...t, units: t.units - units })), onLapse);
  return {
    units,
    layers: taken.map((t) => t.layer),
    windowTags: taken.map((t) => t.windowTag),
    spendBy: Math.min(...taken.map((t) => t.spendBy)) as LocalMs,
    failedOpen: failedOpen.length > 0,
    remaining: Math.max(0, remaining === Infinity ? 0 : remaining),
  };
}

/** What a give back of a grant's unspent units did, summed over the layers (each layer gives the same units). */
export interface LayeredGiveBack {
  returned: number;
  lapsed: number;
}

/** Gives `units` of `grant` back to every layer; a layer that fails keeps them (counted lapsed by the caller). */
export async function giveBackLayered(layers: readonly LayerCounter[], grant: LayeredGrant, units: number): Promise<LayeredGiveBack[]> {
  if (units <= 0) return layers.map(() => ({ returned: 0, lapsed: 0 }));
  return Promise.all(
    layers.map(async (layer, i) => {
      try {
        const given = await layer.parent.giveBack(units, grant.windowTags[i] ?? null);
        return { returned: given.returned, lapsed: given.lapsed };
      } catch {
        return { returned: 0, lapsed: units };
      }
    }),
  );
}

async function giveBackEach(parts: { layer: LayerCounter; units: number; windowTag: number }[], onLapse: OnLapse): Promise<void> {
  await Promise.all(
    parts
      .filter((p) => p.units > 0)
      .map(async (p) => {
        try {
          const given = await p.layer.parent.giveBack(p.units, p.windowTag);
          if (given.lapsed > 0) onLapse(p.layer, given.lapsed, p.layer.expiry);
        } catch {
          onLapse(p.layer, p.units, 'parent_unreachable');
        }
      }),
  );
}
