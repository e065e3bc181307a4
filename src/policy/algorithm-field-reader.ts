import { describe } from '../model/request-context.js';
import { parseDuration } from '../util/duration.js';
import { integerWording, isIntegerIn, numberAboveWording } from './bound-wording.js';
import { own, type ErrFn, type Obj } from './field-reading.js';
import { ALGORITHM_FIELDS, algorithmRangeOf, algorithmRequires, rateFloorOf } from './policy-field-schemas.js';
import type { AlgorithmConfig } from './types.js';

/**
 * How the fields of one `algorithm` object are read: only the fields its type takes (`applies`), each
 * problem reported through `fail` under the field's own name, and "is required for <type>" naming the type.
 * Bounds and required-ness are the schema's for the type (`type` undefined: not known, nothing required).
 */
export type AlgorithmFieldReader = ReturnType<typeof algorithmFieldReader>;

export function algorithmFieldReader(v: Obj, type: string | undefined, applies: readonly string[], fail: ErrFn) {
  const kind = type ?? 'this algorithm';
  const field = (k: keyof AlgorithmConfig): unknown => (applies.includes(k) ? own(v, k) : undefined);
  /** An integer field; `note` says what it counts, after the schema's range in words. */
  const integer = (k: keyof AlgorithmConfig, note?: string): number | undefined => {
    const x = field(k);
    const range = algorithmRangeOf(type, k);
    const what = (): string => (note === undefined ? integerWording(range) : `${integerWording(range)} (${note})`);
    if (x === undefined) {
      if (algorithmRequires(type, k)) fail(k, `is required for ${kind} (${what()})`);
      return undefined;
    }
    if (isIntegerIn(x, range)) return x;
    fail(k, `must be ${what()}, got ${describe(x)}`);
    return undefined;
  };
  const rate = (k: 'refill_rate' | 'leak_rate'): number | undefined => {
    const x = field(k);
    if (x === undefined) return undefined;
    const floor = rateFloorOf(k);
    if (typeof x === 'number' && Number.isFinite(x) && x > floor) return x;
    fail(k, `must be ${numberAboveWording(floor)} (units per second), got ${describe(x)}`);
    return undefined;
  };
  /** A duration field: required by the type's schema, or by a rule between fields (`requiredHere`). */
  const duration = (k: 'window' | 'quota_period', requiredHere = false): { text: string; ms: number } | undefined => {
    const x = field(k);
    if (x === undefined) {
      if (requiredHere || algorithmRequires(type, k)) fail(k, `is required for ${kind} (a duration string such as "10s", "1m", "1h")`);
      return undefined;
    }
    if (typeof x === 'number') {
      fail(k, `must be a duration string such as "${x}s" or "${x}ms" (a bare number is ambiguous), got ${describe(x)}`);
      return undefined;
    }
    const parsed = parseDuration(x);
    if ('error' in parsed) {
      fail(k, typeof x === 'string' ? parsed.error : `${parsed.error}, got ${describe(x)}`);
      return undefined;
    }
    return { text: x as string, ms: parsed.ms };
  };
  return { field, integer, rate, duration };
}

/** `sub_window_count` (absent: undefined), which must divide the window evenly. */
export function subWindowCount(subs: unknown, window: { ms: number } | undefined, fail: ErrFn): number | undefined {
  if (subs === undefined) return undefined;
  const range = ALGORITHM_FIELDS.subWindowCount;
  if (!isIntegerIn(subs, range)) {
    fail('sub_window_count', `must be ${integerWording(range)}, got ${describe(subs)}`);
  } else if (window && window.ms % subs !== 0) {
    fail('sub_window_count', `must divide the window (${window.ms}ms) evenly, got ${subs}`);
  } else return subs;
  return undefined;
}

/** concurrency's `lease_ttl` (absent: undefined): a duration string or whole seconds, kept as given. */
export function leaseTtl(ttl: unknown, fail: ErrFn): string | number | undefined {
  if (ttl === undefined) return undefined;
  if (typeof ttl === 'number') {
    if (isIntegerIn(ttl, algorithmRangeOf('concurrency', 'lease_ttl'))) return ttl;
    fail('lease_ttl', `must be a duration string or a positive whole number of seconds, got ${describe(ttl)}`);
    return undefined;
  }
  const parsed = parseDuration(ttl);
  if (!('error' in parsed)) return ttl as string;
  fail('lease_ttl', typeof ttl === 'string' ? parsed.error : `must be a duration string or a positive whole number of seconds, got ${describe(ttl)}`);
  return undefined;
}
