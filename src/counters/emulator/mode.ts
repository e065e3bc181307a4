import type { RateOperation } from '../counter-store.js';

/** What an algorithm runs: a reclaim reaches it as a give (parent-take-ledger.ts). */
export type AlgorithmOperation = Exclude<RateOperation, 'reclaim'>;

/**
 * What the operation asks of how many units, as lua/includes/mode.lua reads it (a peek: a consume of 1,
 * writing nothing; a check: a consume of `units`, writing nothing).
 */
export function mode(op: AlgorithmOperation, units: number): { peeking: boolean; refunding: boolean; cost: number; refund: number; taking: boolean; giving: boolean } {
  const giving = op === 'give';
  const refunding = giving || op === 'refund';
  return { peeking: op === 'peek' || op === 'check', refunding, cost: op === 'peek' ? 1 : units, refund: refunding ? units : 0, taking: op === 'take', giving };
}
