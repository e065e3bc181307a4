import { unmatchedDecision, type DecisionEvent, type Operation } from '../../src/decision/decision-service.js';
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
  const decision: Decision = { ...unmatchedDecision('within_limit'), ...options.decision };
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

/**
 * A fixed mix of every kind of event the sinks distinguish, for the suites that pin the exact /metrics
 * exposition and analytics summary: operations, outcomes, shadow beside and shadow-only, failure modes,
 * no tenant / no policy, a tenant literally named `other`, over-long label values, more distinct tenants
 * and policies than a cap of 3 admits, tags (repeated, over-long), and durations in several buckets
 * (plus NaN and a negative one, which the histogram skips).
 */
export function fixedEventSequence(): DecisionEvent[] {
  const events: DecisionEvent[] = [];
  const durations = [0.00002, 0.00005, 0.00007, 0.0003, 0.002, 0.04, 0.7, 3, Number.NaN, -1];
  for (let i = 0; i < 40; i++) {
    const tenant = i % 11 === 10 ? undefined : i % 13 === 1 ? 'other' : i % 17 === 3 ? 'x'.repeat(40) : `tenant-${i % 6}`;
    const policy = i % 9 === 8 ? '' : `policy-${(i * 7) % 5}`;
    const ctx: Partial<RequestContext> = {
      tenant_id: tenant,
      tags: i % 3 === 0 ? {} : { env: i % 2 ? 'prod' : 'dev', [`k${i % 4}`]: i % 7 === 0 ? 'v'.repeat(300) : `v${i % 5}` },
    };
    const durationSeconds = durations[i % durations.length];
    const operation = (['check', 'check', 'acquire', 'check', 'release'] as const)[i % 5];
    if (i % 10 === 4) events.push(shadowOnly(`shadow-${i % 3}`, i % 20 === 4, ctx));
    else if (i % 7 === 2)
      events.push(event({ operation, ctx, durationSeconds, decision: { matched_policy_id: policy }, shadow: { policyId: 'beside', limited: i % 14 === 2 } }));
    else if (i % 8 === 6)
      events.push(event({ operation, ctx, durationSeconds, decision: { matched_policy_id: policy, allowed: i % 24 !== 6, action: i % 24 !== 6 ? 'allow' : 'deny', reason: 'counter_store_unavailable' }, failureMode: i % 24 !== 6 ? 'fail_open' : 'fail_closed' }));
    else if (i % 4 === 1) events.push(event({ operation, ctx, durationSeconds, decision: { matched_policy_id: policy, allowed: false, action: i % 8 === 1 ? 'deny' : 'throttle', reason: 'limit_exceeded' } }));
    else events.push(event({ operation, ctx, durationSeconds, decision: { matched_policy_id: policy, reason: policy === '' ? 'no_matching_policy' : 'within_limit' } }));
  }
  return events;
}
