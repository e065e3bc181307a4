import type { RequestContext, ScopeField } from '../model/request-context.js';
import type { CompiledPolicy } from './compiled-policy.js';
import type { Draft } from './compile.js';
import { LayerSet, type FamilyIndex as FamilyIndexOf } from './layer-index.js';
import { sharing, type Sharing } from './sharing.js';

/**
 * The buckets a policy is indexed in: each policy sits in the bucket of ONE of its exact pairs (the one
 * the bucket rule picks), or in its family's fallback list when it has none. Where it sits is
 * remembered on the compiled policy (`home`, `homeValue`), so taking it out visits that bucket only.
 */

type FamilyIndex = FamilyIndexOf<CompiledPolicy>;

/** How `home` names a tag pair: as a counter identity does (`tags.<key>`); no scope field starts so. */
const TAG = 'tags.';

/** Counts of something per exact pair: `byTag` false for a scope field, true for a tag. */
type PairCount = (byTag: boolean, key: string, value: string) => number;

export class PolicyIndex {
  /** Every layer's index, both families; read on every match. */
  readonly layers = new LayerSet<CompiledPolicy>();

  /** A build's index of `drafts` (in winner order): each under the exact pair the fewest drafts share. */
  static of(drafts: readonly Draft[]): PolicyIndex {
    const shared = pairsShared(drafts);
    const index = new PolicyIndex();
    // Check lists are mostly distinct (they hold the policy's own values): shared within the build only.
    const local = sharing();
    // In rank order, so each policy goes at the end of its bucket.
    for (const d of drafts) index.place(index.familyOf(d.compiled), d, homeSlot(d, shared), local);
    for (const family of index.layers.list.flatMap((layer) => Object.values(layer.families))) {
      family.refreshFields();
      // A bucket that grew by inserts has room for more than it holds.
      for (const byValue of [...family.byField.values(), ...family.byTag.values()]) {
        for (const [value, bucket] of byValue) if (bucket.length > 1) byValue.set(value, bucket.slice());
      }
    }
    return index;
  }

  /** One policy more, in place: under the exact pair whose bucket is smallest now. `d.compiled` has its rank. */
  insert(d: Draft): void {
    const family = this.familyOf(d.compiled);
    const sizeNow: PairCount = (byTag, key, value) =>
      ((byTag ? family.byTag : family.byField) as Map<string, Map<string, CompiledPolicy[]>>).get(key)?.get(value)?.length ?? 0;
    const fieldsBefore = family.byField.size;
    this.place(family, d, homeSlot(d, sizeNow), sharing());
    if (family.byField.size !== fieldsBefore) family.refreshFields();
  }

  /** Takes `c` out of the bucket it was put in (and drops what that leaves empty). */
  remove(c: CompiledPolicy): void {
    const layer = this.layers.get(c.layer)!;
    this.layers.shrink(layer);
    const family = layer.families[c.family];
    const home = c.home;
    if (home === undefined) removeByRank(family.fallback, c);
    else if (home.startsWith(TAG)) takeOut(family.byTag, home.slice(TAG.length), c.homeValue, c);
    else if (takeOut(family.byField, home as ScopeField, c.homeValue, c)) family.refreshFields();
  }

  /** The family index `c` goes in, its layer made when new and counting one policy more. */
  private familyOf(c: CompiledPolicy): FamilyIndex {
    const layer = this.layers.obtain(c.layer);
    layer.size++;
    return layer.families[c.family];
  }

  /**
   * Indexes a policy under its exact pair number `slot` (fields first, then tags; -1 = none): sets its
   * check lists (the other pairs) and its home, and puts it in that pair's bucket, or in the fallback list.
   */
  private place(family: FamilyIndex, d: Draft, slot: number, checks: Sharing): void {
    const { compiled: c, exactFields, exactTags } = d;
    const nFields = exactFields.length / 2;
    c.checkFields = checks.strings(withoutPair(exactFields, slot));
    c.checkTags = checks.strings(withoutPair(exactTags, slot - nFields));
    if (slot < 0) {
      insertByRank(family.fallback, c);
    } else if (slot < nFields) {
      const field = exactFields[2 * slot] as ScopeField;
      c.home = field;
      c.homeValue = exactFields[2 * slot + 1];
      addToBucket(family.byField, field, c.homeValue, c);
    } else {
      const key = exactTags[2 * (slot - nFields)];
      c.home = TAG + key;
      c.homeValue = exactTags[2 * (slot - nFields) + 1];
      addToBucket(family.byTag, key, c.homeValue, c);
    }
  }
}

/**
 * Does the request hold the exact pair `c` is indexed under (true for a policy of the fallback list)?
 * A decision never asks: the bucket it found `c` in guarantees it (explain-report.ts does ask).
 */
export function inHome(c: CompiledPolicy, ctx: RequestContext): boolean {
  const home = c.home;
  if (home === undefined) return true;
  if (!home.startsWith(TAG)) return ctx[home as ScopeField] === c.homeValue;
  const key = home.slice(TAG.length);
  return ctx.tags !== undefined && Object.prototype.hasOwnProperty.call(ctx.tags, key) && ctx.tags[key] === c.homeValue;
}

/**
 * The bucket rule: the exact pair (number, fields first, then tags; -1 = none) with the smallest
 * `count`, the first of them on a tie. A build counts the policies that share the pair, a later insert
 * the size of its bucket now; either only affects how long a scan is, never what matches.
 */
function homeSlot(d: Draft, count: PairCount): number {
  const { exactFields: fields, exactTags: tags } = d;
  if (fields.length + tags.length === 2) return 0; // one exact pair: nothing to choose
  let slot = -1;
  let fewest = Infinity;
  for (let i = 0; i < fields.length; i += 2) {
    const n = count(false, fields[i], fields[i + 1]);
    if (n < fewest) [fewest, slot] = [n, i / 2];
  }
  for (let i = 0; i < tags.length; i += 2) {
    const n = count(true, tags[i], tags[i + 1]);
    if (n < fewest) [fewest, slot] = [n, (fields.length + i) / 2];
  }
  return slot;
}

/** How many drafts share each exact (field, value) and (tag, value). */
function pairsShared(drafts: readonly Draft[]): PairCount {
  const fieldsShared = new Map<string, Map<string, number>>();
  const tagsShared = new Map<string, Map<string, number>>();
  for (const { exactFields: fields, exactTags: tags } of drafts) {
    for (let i = 0; i < fields.length; i += 2) countPair(fieldsShared, fields[i], fields[i + 1]);
    for (let i = 0; i < tags.length; i += 2) countPair(tagsShared, tags[i], tags[i + 1]);
  }
  return (byTag, key, value) => (byTag ? tagsShared : fieldsShared).get(key)!.get(value)!;
}

/** One more policy with the exact pair (key, value). */
function countPair(counts: Map<string, Map<string, number>>, key: string, value: string): void {
  let byValue = counts.get(key);
  if (!byValue) counts.set(key, (byValue = new Map()));
  byValue.set(value, (byValue.get(value) ?? 0) + 1);
}

/** A flat [name, value, ...] list without pair `k` (the list itself when it has no such pair). */
function withoutPair(pairs: string[], k: number): string[] {
  if (k < 0 || 2 * k >= pairs.length) return pairs;
  return [...pairs.slice(0, 2 * k), ...pairs.slice(2 * k + 2)];
}

/** Position of the first policy in `list` (sorted by rank) whose rank is not below `rank`. */
function lowerBound(list: readonly CompiledPolicy[], rank: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid].rank < rank) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function insertByRank(list: CompiledPolicy[], c: CompiledPolicy): void {
  list.splice(lowerBound(list, c.rank), 0, c);
}

/** Removes `c` from `list` (sorted by rank); false when it is not there. */
function removeByRank(list: CompiledPolicy[], c: CompiledPolicy): boolean {
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

/** Takes `c` out of the bucket of (key, value), dropping the maps it empties; true when `key`'s map went too. */
function takeOut<K>(index: Map<K, Map<string, CompiledPolicy[]>>, key: K, value: string, c: CompiledPolicy): boolean {
  const byValue = index.get(key)!;
  const bucket = byValue.get(value)!;
  removeByRank(bucket, c);
  if (bucket.length > 0) return false;
  byValue.delete(value);
  if (byValue.size > 0) return false;
  index.delete(key);
  return true;
}
