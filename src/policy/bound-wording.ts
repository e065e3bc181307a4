import type { InclusiveRange } from './schema-reading.js';

/**
 * How the validator's messages say a schema's number bounds: the usual ranges in words ("a positive
 * integer" is 1 up to the largest integer JSON numbers hold exactly), any other range as its bounds,
 * so a bound changed in the schema shows in the message.
 */
export function integerWording(range: InclusiveRange): string {
  if (range.maximum === Number.MAX_SAFE_INTEGER) {
    if (range.minimum === 1) return 'a positive integer';
    if (range.minimum === 0) return 'a non-negative integer';
  }
  return `an integer from ${range.minimum} to ${range.maximum}`;
}

/** A number above an exclusive minimum: "a positive number" above 0. */
export function numberAboveWording(exclusiveMinimum: number): string {
  return exclusiveMinimum === 0 ? 'a positive number' : `a number above ${exclusiveMinimum}`;
}

/** Whether `v` is an integer in the range (JSON numbers only: never NaN or a string). */
export function isIntegerIn(v: unknown, range: InclusiveRange): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= range.minimum && v <= range.maximum;
}

/** Whether `v` is a finite number in the range. */
export function isNumberIn(v: unknown, range: InclusiveRange): v is number {
  return typeof v === 'number' && Number.isFinite(v) && v >= range.minimum && v <= range.maximum;
}
