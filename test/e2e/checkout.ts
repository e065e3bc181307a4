/**
 * The bucket the RLQS end-to-end tests meter: alice's checkout route on the edge domain, and a peek at
 * its counter through the HTTP API of one server.
 */
import type { ServerProcessHandle } from '../support/server-process.js';

/**
 * A fixed window of `limit` an hour on the checkout bucket. fail_closed: a failure mode that admits would
 * let Envoys admit uncounted (outside the guarantee), and a slow shared machine must not.
 */
export function checkoutPolicy(limit: number, more: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    policy_id: 'checkout',
    scope: { user_id: '*', tags: { domain: 'edge' } },
    algorithm: { type: 'fixed_window', limit, window: '1h' },
    ...more,
    failure_mode: 'fail_closed',
  };
}

/** The checkout bucket's decision for a peek (quantity 0) on `server`. */
export async function peekCheckout(server: ServerProcessHandle): Promise<{ remaining: number; matched_policy_id: string }> {
  const response = await fetch(`${server.url}/rl/v1/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ user_id: 'alice', quantity: 0, tags: { domain: 'edge', route: 'checkout' } }),
  });
  return (await response.json()) as { remaining: number; matched_policy_id: string };
}
