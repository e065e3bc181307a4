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
 * The one decision over every enforcing layer: the deciding layer's own decision, `downgrade` when it
 * admits and any layer downgraded, and `layers` listing every layer's verdict when there are two or more.
 */
export function layeredDecision(names: readonly string[], decisions: readonly Decision[]): Decision {
  const decision = decisions[decidingIndex(decisions)];
  // Each layer's verdict is its own: taken before the deciding decision's action turns `downgrade`.
  const layers = decisions.length > 1 ? decisions.map((d, i) => verdictOf(names[i], d)) : undefined;
  if (decision.allowed && decisions.some((d) => d.action === 'downgrade')) decision.action = 'downgrade';
  if (layers) decision.layers = layers;
  return decision;
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
