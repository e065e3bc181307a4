import type { TObject, TSchema } from '@sinclair/typebox';
import { TypeCompiler, type ValueError } from '@sinclair/typebox/compiler';

/**
 * Reading a TypeBox schema's keywords (bounds, literals, required-ness, record parts), so that the
 * policy validator states no bound of its own: a bound changed in schema/policy.ts changes what the
 * validator refuses and what its message says. Each reader throws when the keyword is missing: that
 * is a schema edit the validator does not follow yet, and it should fail at load, not pass silently.
 */

/** A property's schema (an optional one as well: TypeBox marks it with a symbol, the keywords are the same). */
export function propertyOf(object: TSchema, key: string): TSchema {
  const property = (object as TObject).properties?.[key];
  if (property === undefined) throw new Error(`schema: no property ${key} in ${object.title ?? 'object'}`);
  return property;
}

/** Whether the object schema requires `key`. */
export function isRequired(object: TSchema, key: string): boolean {
  return ((object as TObject).required ?? []).includes(key);
}

/** A number keyword of a schema (minimum, maxLength, maxProperties, ...). */
export function keywordOf(schema: TSchema, keyword: string): number {
  const value = (schema as Record<string, unknown>)[keyword];
  if (typeof value !== 'number') throw new Error(`schema: no ${keyword} in ${JSON.stringify(schema).slice(0, 200)}`);
  return value;
}

/** The inclusive range a number field of the schema states (minimum, maximum). */
export interface InclusiveRange {
  minimum: number;
  maximum: number;
}

export function rangeOf(schema: TSchema): InclusiveRange {
  return { minimum: keywordOf(schema, 'minimum'), maximum: keywordOf(schema, 'maximum') };
}

/** The values of a union of string literals (an enum), in the schema's order. */
export function literalsOf(schema: TSchema): readonly string[] {
  const members = (schema.anyOf as TSchema[] | undefined) ?? [schema];
  return Object.freeze(
    members.map((member) => {
      if (typeof member.const !== 'string') throw new Error(`schema: not a union of string literals: ${JSON.stringify(schema).slice(0, 200)}`);
      return member.const;
    }),
  );
}

/** The one member of a union of the given JSON type (lease_ttl's integer branch, metadata's string value). */
export function memberOfType(union: TSchema, type: string): TSchema {
  const member = (union.anyOf as TSchema[] | undefined)?.find((m) => m.type === type);
  if (member === undefined) throw new Error(`schema: no ${type} member in ${JSON.stringify(union).slice(0, 200)}`);
  return member;
}

/** A TypeBox record's key pattern and value schema (it keeps them as one `patternProperties` entry). */
export function recordPartsOf(record: TSchema): { keyPattern: RegExp; value: TSchema } {
  const entries = Object.entries((record.patternProperties ?? {}) as Record<string, TSchema>);
  if (entries.length !== 1) throw new Error(`schema: not a record: ${JSON.stringify(record).slice(0, 200)}`);
  const [[pattern, value]] = entries;
  return { keyPattern: new RegExp(pattern), value };
}

/** TypeBox's compiled check of one field's schema, and its first error for a value it refuses. */
export interface CompiledField {
  /** Whether the value is what the schema says (compiled: as fast as hand-written code). */
  accepts: (value: unknown) => boolean;
  /** TypeBox's first error for the value (undefined when accepted); its `schema` states the bound broken. */
  firstError: (value: unknown) => ValueError | undefined;
}

export function compiledField(schema: TSchema): CompiledField {
  const compiled = TypeCompiler.Compile(schema);
  return { accepts: (value) => compiled.Check(value), firstError: (value) => compiled.Errors(value).First() };
}
