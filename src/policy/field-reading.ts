import { describe } from '../model/request-context.js';
import { integerWording, isIntegerIn } from './bound-wording.js';
import { POLICY_FIELDS, type StringField } from './policy-field-schemas.js';
import { PLAIN_STRING, stringProblem } from './string-problems.js';
import type { InclusiveRange } from './schema-reading.js';

/** How the policy validator reads one field of a decoded body, and reports a problem with it. */

export type Obj = Record<string, unknown>;

/** Reports one problem: the field's dotted path and what is wrong with it. */
export type ErrFn = (field: string, message: string) => void;

export const hasOwn = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

/** The value of an own key, with `null` treated as absent (JSON merge patch and hand-written files). */
export function own(o: Obj, k: string): unknown {
  return hasOwn(o, k) ? (o[k] === null ? undefined : o[k]) : undefined;
}

export function oneOf<T extends string>(values: readonly T[]): string {
  return values.join(', ');
}


/** `layer`: kept only when given, so a policy without it reads back exactly as before layers existed. */
export function validateLayer(v: unknown, err: ErrFn): string | undefined {
  if (v === undefined) return undefined;
  const { accepts, minLength, maxLength } = POLICY_FIELDS.layer;
  if (accepts(v)) return v as string;
  err('layer', `must be ${minLength}–${maxLength} characters of a–z 0–9 _ - starting with a letter (such as "platform"), got ${describe(v)}`);
  return undefined;
}

/** A string field of no other rule than its length (name, description). */
export function optionalString(raw: Obj, key: string, field: StringField, err: ErrFn): string | undefined {
  const v = own(raw, key);
  if (v === undefined) return undefined;
  const problem = stringProblem(field, v, PLAIN_STRING);
  if (problem === undefined) return v as string;
  err(key, problem);
  return undefined;
}

/** A field of one of the schema's literals (`values`, read from it; T is the type the same literals give). */
export function enumField<T extends string>(raw: Obj, key: string, values: readonly string[], dflt: T, err: ErrFn): T | undefined {
  const v = own(raw, key);
  if (v === undefined) return dflt;
  if (typeof v === 'string' && values.includes(v)) return v as T;
  err(key, `must be one of ${oneOf(values)}, got ${describe(v)}`);
  return undefined;
}

export function unixField(raw: Obj, key: string, range: InclusiveRange, err: ErrFn): number | undefined {
  const v = own(raw, key);
  if (v === undefined) return 0;
  if (isIntegerIn(v, range)) return v;
  err(key, `must be ${integerWording(range)} (unix seconds; 0 = unbounded), got ${describe(v)}`);
  return undefined;
}
