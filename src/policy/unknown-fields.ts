import { nearestKey } from '../util/nearest-key.js';
import type { FieldError } from './types.js';

/**
 * Policies are strict (CONTRACT "Strict policies"): every key of a policy object that its schema does
 * not name is refused, by its path, with the nearest known key when one is close. Used by the
 * validator for the Policy shape and by the quota-shaped alias for its own keys.
 *
 * `where` names the object in the message listing the known keys when none is close ("lease").
 */
export function unknownFieldErrors(value: Record<string, unknown>, known: readonly string[], path: string, where: string): readonly FieldError[] {
  let errors: FieldError[] | undefined;
  const isKnown = knownSet(known);
  for (const key of Object.keys(value)) {
    if (isKnown.has(key)) continue;
    // An empty key is named as written in JSON, so the path never ends in nothing.
    const name = key === '' ? '""' : key;
    (errors ??= []).push({ field: path === '' ? name : `${path}.${name}`, message: unknownFieldMessage(key, known, where) });
  }
  return errors ?? NONE;
}

const NONE: readonly FieldError[] = Object.freeze([]);

/** The known keys of each level as a Set, made once per list (the lists are the schema's, fixed). */
const sets = new WeakMap<readonly string[], ReadonlySet<string>>();
function knownSet(known: readonly string[]): ReadonlySet<string> {
  let set = sets.get(known);
  if (set === undefined) sets.set(known, (set = new Set(known)));
  return set;
}

/** "unknown field; did you mean `action`?", or the known keys when none is close. */
export function unknownFieldMessage(key: string, known: readonly string[], where: string): string {
  const nearest = nearestKey(key, known);
  return nearest !== undefined ? `unknown field; did you mean \`${nearest}\`?` : `unknown field (${where} fields: ${known.join(', ')})`;
}
