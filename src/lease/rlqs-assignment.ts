/** What the server tells an Envoy to do with one bucket, before it is written as Envoy's BucketAction. */
export type Assignment =
  | { strategy: 'allow_all' | 'deny_all'; ttlMs: number }
  /** Tokens already taken from the counters; `fillIntervalMs` outlives `ttlMs`, so no fill adds a whole token. */
  | { strategy: 'token_bucket'; ttlMs: number; maxTokens: number; fillIntervalMs: number; fillTagNanos: number }
  | { strategy: 'abandon' };

export type AssignmentStrategy = Exclude<Assignment['strategy'], 'abandon'>;

/** How long a failure mode's blanket lives (at most a second). */
export const FAILURE_TTL_MS = 1000;

/**
 * A token bucket of `units` tokens living `ttlMs`. Envoy fills a token bucket continuously at
 * tokens_per_fill per fill_interval, so with the interval longer than the life no fill completes a
 * token: Envoy admits at most `units`. The interval is a whole number of seconds (Envoy's filter reads
 * its seconds), and its nanoseconds carry `seq`: two grants of the same size are then different
 * strategies, and Envoy replaces the bucket (starting full) instead of extending the spent one.
 */
export function tokenBucket(units: number, ttlMs: number, seq: number): Assignment {
  return { strategy: 'token_bucket', ttlMs, maxTokens: units, fillIntervalMs: (Math.ceil(ttlMs / 1000) + 1) * 1000, fillTagNanos: 1 + (seq % 999_999) * 1000 };
}
