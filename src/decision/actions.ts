import type { RequestContext } from '../model/request-context.js';
import type { LimitAction, Policy } from '../policy/types.js';
import { SEVERITY_LEVELS } from '../policy/validate.js';
import { unitInterval } from '../util/hash.js';

/** Rank of each severity for drop_low_priority, in the order docs/reference.md "Actions over the limit" gives (the one validation accepts). */
const SEVERITY_RANK = new Map<string, number>(SEVERITY_LEVELS.map((s, i) => [s, i]));
const DEFAULT_MIN_SEVERITY = 'warn';

export interface LimitedOutcome {
  allowed: boolean;
  action: LimitAction;
  retryAfterMs: number;
}

/** An action that refuses every request its counter refused (no draw, no severity to weigh). */
export function alwaysRefuses(action: Policy['action']): boolean {
  return action === 'deny' || action === 'delay' || action === 'drop';
}

/**
 * What a policy's action makes of a request that exceeded its limit (docs/reference.md "Actions over the
 * limit"). `random` is used only for `sample` without a request_id.
 */
export function applyLimitAction(
  policy: Policy,
  ctx: RequestContext,
  retryAfterMs: number,
  random: () => number,
): LimitedOutcome {
  const action = policy.action;
  switch (action) {
    case 'deny':
    case 'delay':
      return { allowed: false, action, retryAfterMs };
    case 'drop':
      return { allowed: false, action, retryAfterMs: 0 };
    case 'downgrade':
      return { allowed: true, action, retryAfterMs: 0 };
    case 'sample': {
      const rate = policy.algorithm.sample_rate ?? 0;
      // Stable per request_id, so a retried request gets the same answer.
      const draw = ctx.request_id !== undefined ? unitInterval(`${policy.policy_id}\u0000${ctx.request_id}`) : random();
      const allowed = draw < rate;
      return { allowed, action, retryAfterMs: allowed ? 0 : retryAfterMs };
    }
    case 'drop_low_priority': {
      const allowed = !isBelowMinSeverity(ctx.severity, policy.metadata.min_severity ?? DEFAULT_MIN_SEVERITY);
      return { allowed, action, retryAfterMs: 0 };
    }
  }
}

/** An absent or unknown severity counts as the lowest: under pressure, unlabelled traffic goes first. */
function isBelowMinSeverity(severity: string | undefined, minSeverity: string): boolean {
  const rank = severity === undefined ? -1 : (SEVERITY_RANK.get(severity.toLowerCase()) ?? -1);
  return rank < (SEVERITY_RANK.get(minSeverity) ?? SEVERITY_RANK.get(DEFAULT_MIN_SEVERITY)!);
}
