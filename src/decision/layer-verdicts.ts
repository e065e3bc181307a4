import type { Decision, LayerVerdict } from '../schema/decision.js';

/**
 * Which layer decides: when any refuses, the refusing layer with the
 * largest retry_after; when all admit, the one with the least remaining. Ties go to the layer whose
 * name sorts first: `decisions` come in layer-name order, so the first of equals wins.
 */
export function decidingIndex(decisions: readonly Decision[]): number {
  let best = -1;
  const refused = decisions.some((d) => !d.allowed);
  for (let i = 0; i < decisions.length; i++) {
    const d = decisions[i];
    if (refused) {
      if (!d.allowed && (best < 0 || d.retry_after > decisions[best].retry_after)) best = i;
    } else if (best < 0 || d.remaining < decisions[best].remaining) {
      best = i;
    }
  }
  return best;
}

/**
 * Makes the one decision over every enforcing layer of the deciding layer's own decision, and answers
 * which that is: `downgrade` when it admits and any layer downgraded, and `layers` listing every
 * layer's verdict (`nameOf` its layer's name) when there are two or more.
 */
export function layeredDecision(nameOf: (i: number) => string, decisions: readonly Decision[]): number {
  const deciding = decidingIndex(decisions);
  const decision = decisions[deciding];
  // One layer: its decision as it is, nothing more to build.
  if (decisions.length === 1) return deciding;
  // Each layer's verdict is its own: taken before the deciding decision's action turns `downgrade`.
  const layers = decisions.map((d, i) => verdictOf(nameOf(i), d));
  if (decision.allowed && decisions.some((d) => d.action === 'downgrade')) decision.action = 'downgrade';
  decision.layers = layers;
  return deciding;
}

function verdictOf(layer: string, d: Decision): LayerVerdict {
  return {
    layer,
    policy_id: d.matched_policy_id,
    allowed: d.allowed,
    action: d.action,
    reason: d.reason,
    remaining: d.remaining,
    limit: d.limit,
    window: d.window,
    reset_after: d.reset_after,
    retry_after: d.retry_after,
  };
}
