import { describe } from '../model/request-context.js';
import { LAYER_MAX_LENGTH, LAYER_PATTERN } from '../schema/policy.js';

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
  if (typeof v === 'string' && LAYER_PATTERN.test(v)) return v;
  err('layer', `must be 1–${LAYER_MAX_LENGTH} characters of a–z 0–9 _ - starting with a letter (such as "platform"), got ${describe(v)}`);
  return undefined;
}

export function optionalString(raw: Obj, key: string, maxLength: number, err: ErrFn): string | undefined {
  const v = own(raw, key);
  if (v === undefined) return undefined;
  if (typeof v !== 'string') {
    err(key, `must be a string, got ${describe(v)}`);
    return undefined;
  }
  if (v.length > maxLength) {
    err(key, `must be at most ${maxLength} characters, got ${v.length}`);
    return undefined;
  }
  return v;
}

export function enumField<T extends string>(raw: Obj, key: string, values: readonly T[], dflt: T, err: ErrFn): T | undefined {
  const v = own(raw, key);
  if (v === undefined) return dflt;
  if (typeof v === 'string' && (values as readonly string[]).includes(v)) return v as T;
  err(key, `must be one of ${oneOf(values)}, got ${describe(v)}`);
  return undefined;
}

export function unixField(raw: Obj, key: string, err: ErrFn): number | undefined {
  const v = own(raw, key);
  if (v === undefined) return 0;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return v;
  err(key, `must be a non-negative integer (unix seconds; 0 = unbounded), got ${describe(v)}`);
  return undefined;
}
