import { ValueErrorType } from '@sinclair/typebox/errors';
import { describe } from '../model/request-context.js';
import type { CompiledField } from './schema-reading.js';

/**
 * TypeBox's error for a string field mapped to the validator's message for it: TypeBox decides
 * whether the value is refused and which keyword it breaks (its first error, in the schema's own
 * order: type, minLength, maxLength, pattern), the field's wording says it, with the bound read from
 * the error's schema node.
 */
export interface StringWording {
  notString(value: unknown): string;
  tooShort(value: string, minLength: number): string;
  tooLong(value: string, maxLength: number): string;
  notPattern(value: string): string;
}

/** The message for a value the field refuses; undefined when it accepts it. */
export function stringProblem(field: CompiledField, value: unknown, wording: StringWording): string | undefined {
  // The compiled check first: an accepted value (nearly every one) never builds TypeBox's error list.
  if (field.accepts(value)) return undefined;
  const error = field.firstError(value)!;
  switch (error.type) {
    case ValueErrorType.String:
      return wording.notString(value);
    case ValueErrorType.StringMinLength:
      return wording.tooShort(value as string, error.schema.minLength as number);
    case ValueErrorType.StringMaxLength:
      return wording.tooLong(value as string, error.schema.maxLength as number);
    case ValueErrorType.StringPattern:
      return wording.notPattern(value as string);
    default:
      // A keyword the wordings do not know yet (a format, say): TypeBox's own message, naming the value.
      return `${error.message}, got ${describe(value)}`;
  }
}

/** "must be a string" / "must be at most N characters": a string field of no other rule than its length. */
export const PLAIN_STRING: StringWording = {
  notString: (value) => `must be a string, got ${describe(value)}`,
  tooShort: (value, minLength) => `must be at least ${minLength} characters, got ${value.length}`,
  tooLong: (value, maxLength) => `must be at most ${maxLength} characters, got ${value.length}`,
  notPattern: (value) => `is not of the form the schema gives, got ${describe(value)}`,
};
