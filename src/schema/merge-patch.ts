import { KindGuard, Type, type TSchema } from '@sinclair/typebox';

/**
 * The schema of an RFC 7396 JSON merge patch of values of `schema`, derived from it so the two cannot
 * drift: every object field becomes optional and may be null (null removes it), nested objects and
 * maps are patches themselves, and anything else (strings, numbers, arrays) is replaced whole, so it
 * keeps its own schema. Titles are dropped: a patch of the Scope is not a Scope.
 */
export function mergePatchOf(schema: TSchema): TSchema {
  if (KindGuard.IsUnion(schema)) return Type.Union(schema.anyOf.map(mergePatchOf), keywordsOf(schema));
  if (KindGuard.IsObject(schema)) {
    const fields = Object.entries(schema.properties).map(([name, field]) => [name, Type.Optional(nullable(mergePatchOf(field)))]);
    return Type.Object(Object.fromEntries(fields), keywordsOf(schema));
  }
  if (KindGuard.IsRecord(schema)) {
    const patterns = Object.entries(schema.patternProperties).map(([pattern, value]) => [pattern, nullable(mergePatchOf(value))]);
    // The same Record with patched values (`static`/`params` are TypeBox's compile-time-only members).
    return { ...keywordsOf(schema), patternProperties: Object.fromEntries(patterns) } as unknown as TSchema;
  }
  return schema;
}

function nullable(schema: TSchema): TSchema {
  return KindGuard.IsUnion(schema) ? Type.Union([...schema.anyOf, Type.Null()], keywordsOf(schema)) : Type.Union([schema, Type.Null()]);
}

/** A schema's keywords other than its title and the structure that mergePatchOf rebuilds. */
function keywordsOf<T extends TSchema>(schema: T) {
  const { title: _title, required: _required, properties: _properties, anyOf: _anyOf, ...rest } = schema;
  return rest;
}
