import type { ScopeField } from '../model/request-context.js';
import type { CompiledPolicy } from './compiled-policy.js';
import type { Draft } from './compile.js';
import type { FamilyIndex as FamilyIndexOf } from './layer-index.js';
import type { Sharing } from './sharing.js';

/** The buckets a policy is indexed in: one of its exact pairs, or the fallback list. */

type FamilyIndex = FamilyIndexOf<CompiledPolicy>;

/** One more policy with the exact pair (key, value). */
export function countPair(counts: Map<string, Map<string, number>>, key: string, value: string): void {
  let byValue = counts.get(key);
  if (!byValue) counts.set(key, (byValue = new Map()));
  byValue.set(value, (byValue.get(value) ?? 0) + 1);
}

/**
 * Indexes a policy under its exact pair number `slot` (fields first, then tags; -1 = none): sets its
 * check lists (the other pairs) and puts it in that pair's bucket, or in the fallback list.
 */
export function place(index: FamilyIndex, d: Draft, slot: number, checks: Sharing): void {
  const { compiled: c, exactFields, exactTags } = d;
  const nFields = exactFields.length / 2;
  c.checkFields = checks.strings(withoutPair(exactFields, slot));
  c.checkTags = checks.strings(withoutPair(exactTags, slot - nFields));
  if (slot < 0) insertByRank(index.fallback, c);
  else if (slot < nFields) addToBucket(index.byField, exactFields[2 * slot] as ScopeField, exactFields[2 * slot + 1], c);
  else addToBucket(index.byTag, exactTags[2 * (slot - nFields)], exactTags[2 * (slot - nFields) + 1], c);
}

/** A flat [name, value, ...] list without pair `k` (the list itself when it has no such pair). */
export function withoutPair(pairs: string[], k: number): string[] {
  if (k < 0 || 2 * k >= pairs.length) return pairs;
  return [...pairs.slice(0, 2 * k), ...pairs.slice(2 * k + 2)];
}

/** Position of the first policy in `list` (sorted by rank) whose rank is not below `rank`. */
export function lowerBound(list: readonly CompiledPolicy[], rank: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid].rank < rank) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export function insertByRank(list: CompiledPolicy[], c: CompiledPolicy): void {
  list.splice(lowerBound(list, c.rank), 0, c);
}

/** Removes `c` from `list` (sorted by rank); false when it is not there. */
export function removeByRank(list: CompiledPolicy[], c: CompiledPolicy): boolean {
  const at = lowerBound(list, c.rank);
  if (list[at] !== c) return false;
  list.splice(at, 1);
  return true;
}

/** Puts `c` in the bucket of (key, value) by rank; a new bucket is made holding just it (at its exact size: most hold one). */
function addToBucket<K>(index: Map<K, Map<string, CompiledPolicy[]>>, key: K, value: string, c: CompiledPolicy): void {
  let byValue = index.get(key);
  if (!byValue) index.set(key, (byValue = new Map()));
  const bucket = byValue.get(value);
  if (bucket) insertByRank(bucket, c);
  else byValue.set(value, [c]);
}
