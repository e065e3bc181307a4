import { describe } from '../model/request-context.js';
import { MAX_SUB_WINDOWS } from '../schema/policy.js';
import { parseDuration } from '../util/duration.js';
import { own, type ErrFn, type Obj } from './field-reading.js';
import type { AlgorithmConfig } from './types.js';

/**
 * How the fields of one `algorithm` object are read: only the fields its type takes (`applies`), each
 * problem reported through `fail` under the field's own name, and "is required for <type>" naming the type.
 */
export type AlgorithmFieldReader = ReturnType<typeof algorithmFieldReader>;

export function algorithmFieldReader(v: Obj, kind: string, applies: readonly string[], fail: ErrFn) {
  const field = (k: keyof AlgorithmConfig): unknown => (applies.includes(k) ? own(v, k) : undefined);
  const posInt = (k: keyof AlgorithmConfig, required: boolean, what = 'a positive integer'): number | undefined => {
    const x = field(k);
    if (x === undefined) {
      if (required) fail(k, `is required for ${kind} (${what})`);
      return undefined;
    }
    if (typeof x === 'number' && Number.isSafeInteger(x) && x > 0) return x;
    fail(k, `must be ${what}, got ${describe(x)}`);
    return undefined;
  };
  const posRate = (k: 'refill_rate' | 'leak_rate'): number | undefined => {
    const x = field(k);
    if (x === undefined) return undefined;
    if (typeof x === 'number' && Number.isFinite(x) && x > 0) return x;
    fail(k, `must be a positive number (units per second), got ${describe(x)}`);
    return undefined;
  };
  const duration = (k: 'window' | 'quota_period', required: boolean): { text: string; ms: number } | undefined => {
    const x = field(k);
    if (x === undefined) {
      if (required) fail(k, `is required for ${kind} (a duration string such as "10s", "1m", "1h")`);
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
  return { field, posInt, posRate, duration };
}

/** `sub_window_count` (absent: undefined), which must divide the window evenly. */
export function subWindowCount(subs: unknown, window: { ms: number } | undefined, fail: ErrFn): number | undefined {
  if (subs === undefined) return undefined;
  if (typeof subs !== 'number' || !Number.isInteger(subs) || subs < 1 || subs > MAX_SUB_WINDOWS) {
    fail('sub_window_count', `must be an integer from 1 to ${MAX_SUB_WINDOWS}, got ${describe(subs)}`);
  } else if (window && window.ms % subs !== 0) {
    fail('sub_window_count', `must divide the window (${window.ms}ms) evenly, got ${subs}`);
  } else return subs;
  return undefined;
}

/** concurrency's `lease_ttl` (absent: undefined): a duration string or whole seconds, kept as given. */
export function leaseTtl(ttl: unknown, fail: ErrFn): string | number | undefined {
  if (ttl === undefined) return undefined;
  if (typeof ttl === 'number') {
    if (Number.isSafeInteger(ttl) && ttl > 0 && Number.isSafeInteger(ttl * 1000)) return ttl;
    fail('lease_ttl', `must be a duration string or a positive whole number of seconds, got ${describe(ttl)}`);
    return undefined;
  }
  const parsed = parseDuration(ttl);
  if (!('error' in parsed)) return ttl as string;
  fail('lease_ttl', typeof ttl === 'string' ? parsed.error : `must be a duration string or a positive whole number of seconds, got ${describe(ttl)}`);
  return undefined;
}
