/** Reasons of CONTRACT.md; clients switch on them. */
export type DecisionReason =
  | 'within_limit'
  | 'limit_exceeded'
  | 'no_matching_policy'
  | 'lease_acquired'
  | 'lease_released'
  | 'lease_not_found'
  | 'counter_store_unavailable';

/** The answer of check, acquire and release. Durations are integer milliseconds. */
export interface Decision {
  allowed: boolean;
  action: string;
  reason: DecisionReason;
  matched_policy_id: string;
  remaining: number;
  retry_after: number;
  reset_after: number;
  limit: number;
  shadow_mode: boolean;
  metadata: Record<string, string>;
}
