import type { CounterSpec, RateSpec } from '../../src/counters/counter-spec.js';

export interface BucketRate {
  /** Units a bucket refills (or leaks) per ratePeriodMs; default the limit. */
  rateUnits?: number;
  /** Default the period. */
  ratePeriodMs?: number;
}

/**
 * One spec per rate algorithm, each admitting `limit` (the burst for the buckets) over `periodMs`;
 * sliding_window_counter with 4 sub-windows.
 */
export function everyRateSpec(limit: number, periodMs: number, bucket: BucketRate = {}): RateSpec[] {
  const rate = { capacity: limit, rateUnits: bucket.rateUnits ?? limit, ratePeriodMs: bucket.ratePeriodMs ?? periodMs };
  return [
    { type: 'fixed_window', limit, windowMs: periodMs },
    { type: 'sliding_window_log', limit, windowMs: periodMs },
    { type: 'sliding_window_counter', limit, windowMs: periodMs, subWindows: 4 },
    { type: 'token_bucket', ...rate },
    { type: 'leaky_bucket', ...rate },
    { type: 'quota', limit, periodMs },
  ];
}

/** everyRateSpec, and a concurrency spec of `limit` leases living `periodMs`. */
export function everySpec(limit: number, periodMs: number, bucket: BucketRate = {}): CounterSpec[] {
  return [...everyRateSpec(limit, periodMs, bucket), { type: 'concurrency', maxConcurrency: limit, leaseTtlMs: periodMs }];
}
