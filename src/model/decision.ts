/** Reasons of CONTRACT.md; clients switch on them. */
export type DecisionReason =
  | 'within_limit'
  | 'limit_exceeded'
  | 'no_matching_policy'
  | 'lease_acquired'
  | 'lease_released'
  | 'lease_not_found'
  | 'refunded'
  | 'counter_store_unavailable';

/** The answer of check, acquire, release and refund. Durations are integer milliseconds. */
export interface Decision {
  allowed: boolean;
  action: string;
  reason: DecisionReason;
  matched_policy_id: string;
  remaining: number;
  retry_after: number;
  reset_after: number;
  limit: number;
  /** The period `limit` applies to, ms (CONTRACT: Decision `window`); 0 for concurrency and no match. */
  window: number;
  shadow_mode: boolean;
  metadata: Record<string, string>;
}
