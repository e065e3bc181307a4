import type { TSchema } from '@sinclair/typebox';

/**
 * Every number, length and count bound a schema states, found by walking the schema object itself
 * (not a list of fields), with the path of the value it bounds: test/policy/validator-follows-schema.test.ts
 * sets a value just inside and just outside each one.
 */

export type BoundKeyword = 'minimum' | 'maximum' | 'exclusiveMinimum' | 'minLength' | 'maxLength' | 'minProperties' | 'maxProperties';
const KEYWORDS: readonly BoundKeyword[] = ['minimum', 'maximum', 'exclusiveMinimum', 'minLength', 'maxLength', 'minProperties', 'maxProperties'];

export interface BoundSite {
  /** Keys from the policy's top to the bounded value; a record's entry is `RECORD_KEY`. */
  path: readonly string[];
  /** The algorithm type whose schema states the bound (fields of `algorithm` only). */
  algorithmType?: string;
  keyword: BoundKeyword;
  bound: number;
  /** What is bounded: a number, an integer, a string's length, an object's entries, or a record's key length. */
  subject: 'number' | 'integer' | 'string' | 'entries' | 'key';
  /** The schema node stating the bound (the record itself, for `entries` and `key`). */
  schema: TSchema;
}

/** The key a bound site's path uses for a record's entry. */
export const RECORD_KEY = 'r0';

/** The bound sites of `schema` and everything under it. */
export function boundSitesOf(schema: TSchema, path: readonly string[] = [], algorithmType?: string): BoundSite[] {
  const sites: BoundSite[] = [];
  const site = (keyword: BoundKeyword, bound: number, subject: BoundSite['subject']): void => {
    sites.push({ path, keyword, bound, subject, schema, ...(algorithmType !== undefined && { algorithmType }) });
  };
  for (const keyword of KEYWORDS) {
    const bound = (schema as Record<string, unknown>)[keyword];
    if (typeof bound !== 'number') continue;
    site(keyword, bound, keyword.endsWith('Properties') ? 'entries' : (schema.type as BoundSite['subject']));
  }
  const keyMaxLength = (schema.propertyNames as TSchema | undefined)?.maxLength;
  if (typeof keyMaxLength === 'number') site('maxLength', keyMaxLength, 'key');
  sites.push(...childSites(schema, path, algorithmType));
  return sites;
}

function childSites(schema: TSchema, path: readonly string[], algorithmType: string | undefined): BoundSite[] {
  if (schema.properties !== undefined) {
    return Object.entries(schema.properties as Record<string, TSchema>).flatMap(([key, child]) => boundSitesOf(child, [...path, key], algorithmType));
  }
  if (schema.patternProperties !== undefined) {
    return Object.values(schema.patternProperties as Record<string, TSchema>).flatMap((value) => boundSitesOf(value, [...path, RECORD_KEY], algorithmType));
  }
  if (schema.anyOf !== undefined) {
    // A union of objects told apart by `type` (the algorithm): each member's bounds are its type's.
    return (schema.anyOf as TSchema[]).flatMap((member) => boundSitesOf(member, path, member.properties?.type?.const ?? algorithmType));
  }
  return [];
}

/** The value just inside (`inside`) or just outside a site's bound, of the form the site bounds. */
export function valueAt(site: BoundSite, inside: boolean): unknown {
  const { keyword, bound, subject } = site;
  const lower = keyword.startsWith('min') || keyword === 'exclusiveMinimum';
  if (subject === 'integer' || subject === 'number') {
    const step = subject === 'integer' ? 1 : 0.01;
    if (keyword === 'exclusiveMinimum') return inside ? bound + step : bound;
    if (inside) return bound;
    return lower ? bound - step : bound + step;
  }
  const size = inside ? bound : lower ? bound - 1 : bound + 1;
  if (subject === 'string') return 'x'.repeat(size);
  const entryValue = entryValueOf(site.schema);
  if (subject === 'key') return { ['r'.repeat(size)]: entryValue };
  return Object.fromEntries(Array.from({ length: size }, (_, i) => [`r${i}`, entryValue]));
}

/** A valid value of a record's entries: the smallest its schema allows. */
function entryValueOf(record: TSchema): unknown {
  const [value] = Object.values(record.patternProperties as Record<string, TSchema>);
  const first = (value.anyOf as TSchema[] | undefined)?.[0] ?? value;
  return first.type === 'integer' || first.type === 'number' ? (first.minimum ?? 1) : 'v';
}

/** The value of `body` with `value` put at `path` (objects on the way made fresh). */
export function withValueAt(body: Record<string, unknown>, path: readonly string[], value: unknown): Record<string, unknown> {
  const [key, ...rest] = path;
  if (rest.length === 0) return { ...body, [key]: value };
  const child = (body[key] ?? {}) as Record<string, unknown>;
  return { ...body, [key]: withValueAt(child, rest, value) };
}
