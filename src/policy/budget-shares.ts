import { describe } from '../model/request-context.js';
import { SHARED_ALGORITHMS } from '../schema/policy.js';
import type { CompiledShares } from '../counters/counter-spec.js';
import { isObject } from '../util/json-shape.js';
import { isIntegerIn } from './bound-wording.js';
import { BUDGET_SHARES_FIELDS } from './policy-field-schemas.js';
import type { AlgorithmType, Budget } from './types.js';

/**
 * `budget_shares` on a global budget (docs/distribution.md "Weighted regional shares"): weights per region
 * name, `*` for the common share. With limit L and weights summing to W, region r is guaranteed
 * floor(L × w_r / W) units of each window; the rest (the `*` weight's part and what rounding leaves) is
 * the common share, which any region may take from once its own guarantee is spent.
 */

/** The common share's key in `budget_shares`. */
export const COMMON_SHARE = '*';

/** Validates `budget_shares` (undefined or null: none); problems go to `err`, naming `budget_shares`. */
export function validateBudgetShares(
  v: unknown, budget: Budget | undefined, algorithmType: AlgorithmType | undefined, err: (field: string, message: string) => void,
): Record<string, number> | undefined {
  if (v === undefined || v === null) return undefined;
  if (budget !== 'global') {
    err('budget_shares', 'is only for a policy with "budget": "global" (it divides one limit among regions)');
    return undefined;
  }
  if (algorithmType !== undefined && !(SHARED_ALGORITHMS as readonly string[]).includes(algorithmType)) {
    err('budget_shares', `is only for a window-shaped algorithm (${SHARED_ALGORITHMS.join(', ')}), not ${algorithmType}`);
    return undefined;
  }
  if (!isObject(v) || Array.isArray(v)) {
    err('budget_shares', `must be an object of region name (or "*") to weight, such as {"eu": 3, "us": 1, "*": 1}, got ${describe(v)}`);
    return undefined;
  }
  const { minEntries, maxEntries, regionPattern, regionMaxLength, weight: range } = BUDGET_SHARES_FIELDS;
  const names = Object.keys(v);
  if (names.length < minEntries || names.length > maxEntries) {
    err('budget_shares', `must name ${minEntries} to ${maxEntries} regions, got ${names.length}`);
    return undefined;
  }
  const shares: Record<string, number> = {};
  let ok = true;
  for (const name of names) {
    const weight = v[name];
    if (!regionPattern.test(name)) {
      err('budget_shares', `keys are region names (1-${regionMaxLength} characters of a-z, 0-9 and "-", as RL_REGION) or "*", got ${JSON.stringify(name)}`);
      ok = false;
    } else if (!isIntegerIn(weight, range)) {
      err(`budget_shares`, `weights are integers from ${range.minimum} to ${range.maximum}, got ${describe(weight)} for ${JSON.stringify(name)}`);
      ok = false;
    } else {
      shares[name] = weight;
    }
  }
  return ok ? shares : undefined;
}

/** The guarantees of `shares` under `limit`: floor(limit × w / W) for each named region, the rest common. */
export function compileShares(shares: Readonly<Record<string, number>>, limit: number): CompiledShares {
  let total = 0;
  for (const name of Object.keys(shares)) total += shares[name];
  const guaranteed: Record<string, number> = {};
  let given = 0;
  for (const name of Object.keys(shares)) {
    if (name === COMMON_SHARE) continue;
    const product = limit * shares[name];
    // Exact past 2^53 too: floor of a product too large for a double.
    guaranteed[name] = Number.isSafeInteger(product) ? Math.floor(product / total) : Number((BigInt(limit) * BigInt(shares[name])) / BigInt(total));
    given += guaranteed[name];
  }
  return { guaranteed, common: limit - given };
}
