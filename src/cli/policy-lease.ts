import type { StoredPolicy } from '@rl/client';
import { LEASE_MAX_HOLD_MS, LEASE_MAX_UNITS } from '../schema/policy.js';

/** `50/2s` (max_units/max_hold, defaults filled in) for a policy with a process lease; undefined without one. */
export function leaseText(policy: StoredPolicy): string | undefined {
  if (policy.lease === undefined) return undefined;
  const { max_units = LEASE_MAX_UNITS.default, max_hold = `${LEASE_MAX_HOLD_MS.default / 1000}s` } = policy.lease;
  return `${max_units}/${max_hold}`;
}

/** `regional` (the default: a policy without `budget`) or `global` (docs/distribution.md), and its `budget_shares` weights. */
export function budgetText(policy: StoredPolicy): string {
  const shares = policy.budget_shares;
  const weights = shares === undefined ? '' : ` (shares ${Object.keys(shares).map((region) => `${region}=${shares[region]}`).join(' ')})`;
  return (policy.budget ?? 'regional') + weights;
}

/** The line `rl policies get` puts above the YAML: a comment, so the output stays ready for `rl apply`. */
export function leaseComment(policy: StoredPolicy): string {
  const lease = leaseText(policy);
  return `# lease: ${lease === undefined ? 'none' : `max_units/max_hold ${lease}`}; budget: ${budgetText(policy)}\n`;
}
