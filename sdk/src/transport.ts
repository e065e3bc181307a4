import type { Decision, Operation, RequestContext } from './types.js';

/**
 * One way of asking the service (HTTP, gRPC). It answers a Decision, throws a RateLimitError the
 * caller must see (auth, bad input, a wrong address), or throws ServiceUnavailable for anything that
 * `failMode` should answer.
 */
export interface Transport {
  call(operation: Operation, ctx: RequestContext, timeoutMs: number): Promise<Decision>;
  close(): Promise<void>;
}

/** Unreachable, timed out, 5xx, unreadable answer: the service could not decide. Never leaves the client. */
export class ServiceUnavailable extends Error {
  override name = 'ServiceUnavailable';
}

/** A decision from untrusted wire data: every field present and typed (absent numbers are 0). */
export function decisionFrom(value: unknown): Decision {
  if (typeof value !== 'object' || value === null || typeof (value as { allowed?: unknown }).allowed !== 'boolean') {
    throw new ServiceUnavailable('the service answered something that is not a Decision');
  }
  const v = value as Record<string, unknown>;
  const num = (x: unknown) => (typeof x === 'number' ? x : typeof x === 'string' && x !== '' ? Number(x) : 0);
  const str = (x: unknown) => (typeof x === 'string' ? x : '');
  const metadata: Record<string, string> = {};
  if (typeof v.metadata === 'object' && v.metadata !== null) {
    for (const [k, m] of Object.entries(v.metadata)) if (typeof m === 'string') metadata[k] = m;
  }
  const decision: Decision = {
    allowed: v.allowed as boolean,
    action: str(v.action),
    reason: str(v.reason) as Decision['reason'],
    matched_policy_id: str(v.matched_policy_id),
    remaining: num(v.remaining),
    retry_after: num(v.retry_after),
    reset_after: num(v.reset_after),
    limit: num(v.limit),
    window: num(v.window),
    shadow_mode: v.shadow_mode === true,
    metadata,
  };
  // Only a decision over two or more layers has them (gRPC decodes an absent list as empty).
  if (Array.isArray(v.layers) && v.layers.length > 0) {
    decision.layers = v.layers.map((l: Record<string, unknown>) => ({
      layer: str(l.layer),
      policy_id: str(l.policy_id),
      allowed: l.allowed === true,
      action: str(l.action),
      reason: str(l.reason) as Decision['reason'],
      remaining: num(l.remaining),
      limit: num(l.limit),
      window: num(l.window),
      reset_after: num(l.reset_after),
      retry_after: num(l.retry_after),
    }));
  }
  return decision;
}
