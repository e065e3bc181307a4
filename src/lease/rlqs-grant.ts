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

/** The units one take put in a stream's hands, from every layer alike. */
export interface LayeredGrant {
  units: number;
  /** Per layer, in the order of the layers: the tag a give back names. */
  windowTags: number[];
  /** The earliest instant (local clock) any layer's units must be spent by. */
  spendBy: LocalMs;
}

/** Why a take gave nothing: the counters admit no more (for how long), or a store failed. */
export type TakeRefusal = { refused: 'spent'; retryAfterMs: number; remaining: 0 } | { refused: 'failed'; failureMode: FailureMode; error: unknown };

export type TakeAnswer = (LayeredGrant & { remaining: number; refused?: undefined }) | TakeRefusal;

/**
 * Takes `n` units from every layer, all or nothing: each layer is asked for what the layers before it
 * granted, and what an earlier layer granted past the smallest grant goes straight back. A failing layer
 * gives back what the others took and answers by its failure mode (fail_closed first when several fail).
 */
export async function takeLayered(layers: readonly LayerCounter[], n: number): Promise<TakeAnswer> {
  const taken: { layer: LayerCounter; units: number; windowTag: number; spendBy: LocalMs }[] = [];
  let want = n;
  let remaining = Infinity;
  let retryAfterMs = 0;
  try {
    for (const layer of layers) {
      const grant = await layer.parent.take(want);
      remaining = Math.min(remaining, grant.remaining);
      if (grant.granted === 0) {
        retryAfterMs = Math.max(retryAfterMs, grant.retryAfterMs);
        break;
      }
      taken.push({ layer, units: grant.granted, windowTag: grant.windowTag, spendBy: grant.spendBy });
      want = grant.granted;
    }
  } catch (error) {
    await giveBackEach(taken);
    return { refused: 'failed', failureMode: layers[taken.length]?.failureMode ?? 'fail_closed', error };
  }
  if (taken.length < layers.length) {
    await giveBackEach(taken);
    return { refused: 'spent', retryAfterMs: Math.max(1, retryAfterMs), remaining: 0 };
  }
  const units = want;
  await giveBackEach(taken.map((t) => ({ ...t, units: t.units - units })));
  return {
    units,
    windowTags: taken.map((t) => t.windowTag),
    spendBy: Math.min(...taken.map((t) => t.spendBy)) as LocalMs,
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

async function giveBackEach(parts: { layer: LayerCounter; units: number; windowTag: number }[]): Promise<void> {
  await Promise.all(
    parts.filter((p) => p.units > 0).map((p) => p.layer.parent.giveBack(p.units, p.windowTag).catch(() => undefined)),
  );
}
