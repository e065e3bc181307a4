import type { DecisionEvent, Operation } from '../../src/decision/decision-service.js';
import type { Decision } from '../../src/model/decision.js';
import type { RequestContext } from '../../src/model/request-context.js';

/** DecisionEvents as DecisionService records them, for the metrics and analytics suites. */
export interface EventOptions {
  operation?: Operation;
  ctx?: Partial<RequestContext>;
  decision?: Partial<Decision>;
  shadow?: DecisionEvent['shadow'];
  failureMode?: DecisionEvent['failureMode'];
  durationSeconds?: number;
}

export function event(options: EventOptions = {}): DecisionEvent {
  const decision: Decision = {
    allowed: true,
    action: 'allow',
    reason: 'within_limit',
    matched_policy_id: '',
    remaining: 0,
    retry_after: 0,
    reset_after: 0,
    limit: 0,
    shadow_mode: false,
    metadata: {},
    ...options.decision,
  };
  return {
    operation: options.operation ?? 'check',
    ctx: { quantity: 1, tags: {}, ...options.ctx },
    decision,
    durationSeconds: options.durationSeconds ?? 0.0002,
    shadow: options.shadow,
    failureMode: options.failureMode,
  };
}

export const allowedBy = (policy: string, ctx: Partial<RequestContext> = {}) =>
  event({ ctx, decision: { matched_policy_id: policy } });
export const deniedBy = (policy: string, ctx: Partial<RequestContext> = {}) =>
  event({ ctx, decision: { matched_policy_id: policy, allowed: false, action: 'deny', reason: 'limit_exceeded' } });
export const shadowOnly = (policy: string, limited: boolean, ctx: Partial<RequestContext> = {}) =>
  event({
    ctx,
    decision: {
      matched_policy_id: policy,
      shadow_mode: true,
      action: limited ? 'shadow_only' : 'allow',
      reason: limited ? 'limit_exceeded' : 'within_limit',
    },
    shadow: { policyId: policy, limited },
  });
