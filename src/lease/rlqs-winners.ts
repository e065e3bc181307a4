import { counterKeys } from '../counters/keys.js';
import type { CounterStore } from '../counters/counter-store.js';
import type { Matcher, PolicyMatch } from '../matching/matcher.js';
import type { RequestContext } from '../model/request-context.js';
import { compileLease } from '../policy/lease-terms.js';
import type { LayerCounter } from './rlqs-grant.js';
import { storeParent, type LeasedSpec } from './store-parent.js';
import { expiredReason, type LeaseClock } from './types.js';

/** The largest token bucket Envoy takes (max_tokens is a uint32). */
export const MAX_TOKENS = 0xffff_ffff;

/** What covers a bucket: the counters of its layers' winners, or nothing RLQS can hand out. */
export type BucketCover =
  | { kind: 'counters'; layers: LayerCounter[]; /** The same key, the same counters. */ key: string }
  | { kind: 'none' }
  /** A winner RLQS cannot serve (concurrency, sliding_window_log): allowed, counted. */
  | { kind: 'unsupported'; policyId: string };

/** The enforce winners of a request, one per layer that has one (stacked limits): a grant is taken from each. */
export function enforceWinners(matcher: Matcher, ctx: RequestContext, nowMs: number): PolicyMatch[] {
  const match = matcher.match(ctx, 'rate', nowMs);
  const layers = match.layers ?? [match];
  const winners: PolicyMatch[] = [];
  for (const layer of layers) if (layer.enforce !== undefined) winners.push(layer.enforce);
  return winners;
}

export interface CoverDeps {
  store: Required<Pick<CounterStore, 'take' | 'giveBack'>> & Pick<CounterStore, 'peek' | 'reclaim'>;
  keyPrefix: string;
  clock: LeaseClock;
}

/** Which counters a bucket's request context is assigned from, by the policies `matcher` holds now. */
export function coverOf(matcher: Matcher, ctx: RequestContext, nowMs: number, deps: CoverDeps): BucketCover {
  const winners = enforceWinners(matcher, ctx, nowMs);
  if (winners.length === 0) {
    const { enforce } = matcher.match(ctx, 'concurrency', nowMs);
    return enforce === undefined ? { kind: 'none' } : { kind: 'unsupported', policyId: enforce.compiled.policy.policy_id };
  }
  const layers: LayerCounter[] = [];
  const keys: string[] = [];
  for (const winner of winners) {
    const { policy, spec } = winner.compiled;
    const lease = compileLease(policy, 'region');
    if (lease === undefined) return { kind: 'unsupported', policyId: policy.policy_id };
    const counter = counterKeys(deps.keyPrefix, policy.policy_id, spec, winner.identity);
    keys.push(counter[0]!, String(policy.version));
    layers.push({
      policyId: policy.policy_id,
      parent: storeParent(deps.store, counter, spec as LeasedSpec, deps.clock, lease.maxHoldMs),
      holdMs: lease.maxHoldMs,
      maxUnits: Math.min(policy.lease?.max_units ?? MAX_TOKENS, MAX_TOKENS),
      failureMode: policy.failure_mode,
      expiry: expiredReason(lease.shape),
    });
  }
  return { kind: 'counters', layers, key: keys.join('\n') };
}
