import { ALGORITHM_KEYS, ANY_ALGORITHM_KEYS, LEASE_KEYS, POLICY_KEYS, SCOPE_KEYS, SOURCE_IP_PREFIX_KEYS } from '../schema/policy.js';
import { nearestKey } from '../util/nearest-key.js';
import type { FieldError } from './types.js';

/**
 * Policies are strict (README "Managing policies"): every key of a policy object that its schema does
 * not name is refused, by its path, with the nearest known key when one is close. Used by the
 * validator for every object of the Policy shape and by the quota-shaped alias for its own keys.
 *
 * `where` names the object in the message listing the known keys when none is close ("lease");
 * `messageOf` replaces the usual message for one key (the algorithm's "does not apply to ...").
 *
 * Bounded: a body is a megabyte, enough for tens of thousands of made-up keys, and naming each (with
 * its nearest key, and the list of known ones) would take seconds of the event loop and answer tens
 * of megabytes. The first MAX_NAMED are named, each cut at MAX_NAME_LENGTH; the rest are counted.
 */
export function unknownFieldErrors(
  value: Record<string, unknown>,
  known: readonly string[],
  path: string,
  where: string,
  messageOf: (key: string) => string | undefined = () => undefined,
): readonly FieldError[] {
  let errors: FieldError[] | undefined;
  let more = 0;
  const isKnown = knownSet(known);
  for (const key of Object.keys(value)) {
    if (isKnown.has(key)) continue;
    if (errors !== undefined && errors.length >= MAX_NAMED) {
      more++;
      continue;
    }
    const message = messageOf(key) ?? unknownFieldMessage(key, known, where);
    (errors ??= []).push({ field: path === '' ? nameOf(key) : `${path}.${nameOf(key)}`, message });
  }
  if (more > 0) errors!.push({ field: path === '' ? 'body' : path, message: `${more} more unknown fields (${where} fields: ${known.join(', ')})` });
  return errors ?? NONE;
}

/** Unknown keys named one by one in a policy object; the others are counted in one error. */
export const MAX_NAMED = 20;
/** A key longer than this is no typo of a known one; its path shows this much of it and "…". */
export const MAX_NAME_LENGTH = 64;

/** The key as a path segment: an empty key as written in JSON (so a path never ends in nothing), a long one cut. */
function nameOf(key: string): string {
  if (key === '') return '""';
  return key.length > MAX_NAME_LENGTH ? `${key.slice(0, MAX_NAME_LENGTH)}…` : key;
}

const NONE: readonly FieldError[] = Object.freeze([]);

/** The known keys of each level as a Set, made once per list (the lists are the schema's, fixed). */
const sets = new WeakMap<readonly string[], ReadonlySet<string>>();
function knownSet(known: readonly string[]): ReadonlySet<string> {
  let set = sets.get(known);
  if (set === undefined) sets.set(known, (set = new Set(known)));
  return set;
}

/**
 * "unknown field; did you mean `action`?"; for a field of another object of the policy, where it
 * belongs ("did you mean `scope.endpoint`?"); else the known keys.
 */
export function unknownFieldMessage(key: string, known: readonly string[], where: string): string {
  const nearest = nearestKey(key, known);
  if (nearest !== undefined) return `unknown field; did you mean \`${nearest}\`?`;
  const home = homeOf(key, known);
  if (home !== undefined) return `unknown field here; did you mean ${home === '' ? `\`${key}\` at the top level` : `\`${home}.${key}\``}?`;
  return `unknown field (${where} fields: ${known.join(', ')})`;
}

/** The objects of the Policy shape by path, with their keys: where a key written in the wrong one belongs. */
const POLICY_OBJECTS: readonly (readonly [path: string, keys: readonly string[]])[] = [
  ['', POLICY_KEYS],
  ['scope', SCOPE_KEYS],
  ['algorithm', ANY_ALGORITHM_KEYS],
  ['lease', LEASE_KEYS],
  ['source_ip_prefix', SOURCE_IP_PREFIX_KEYS],
];
const ALGORITHM_LISTS = new Set<readonly string[]>([ANY_ALGORITHM_KEYS, ...Object.values(ALGORITHM_KEYS)]);

/** The path of the other Policy object holding `key`, when `known` is one of the Policy shape's (not the quota body's). */
function homeOf(key: string, known: readonly string[]): string | undefined {
  const here = ALGORITHM_LISTS.has(known) ? 'algorithm' : POLICY_OBJECTS.find(([, keys]) => keys === known)?.[0];
  if (here === undefined) return undefined;
  return POLICY_OBJECTS.find(([path, keys]) => path !== here && keys.includes(key))?.[0];
}
