/** The server's shapes the page reads (CONTRACT.md; src/policy/types.ts, src/http/routes/dashboard.ts). */

export interface AlgorithmConfig {
  type: string;
  limit?: number;
  window?: string;
  burst?: number;
  refill_rate?: number;
  leak_rate?: number;
  max_concurrency?: number;
  quota_period?: string;
  [more: string]: unknown;
}

export interface Policy {
  policy_id: string;
  name: string;
  description: string;
  enabled: boolean;
  priority: number;
  scope: Record<string, unknown>;
  algorithm: AlgorithmConfig;
  action: string;
  failure_mode: string;
  enforcement_mode: 'enforce' | 'shadow';
  rollout_percent: number;
  version: number;
  created_at: string;
  updated_at: string;
  [more: string]: unknown;
}

export interface PolicyVersion {
  policy_id: string;
  version: number;
  created_at: string;
  snapshot: Policy;
}

export interface AuditEntry {
  audit_id: string;
  action_type: string;
  changed_by: string;
  changed_at: string;
  version: number;
}

export interface OutcomeRates {
  allowed: number;
  denied: number;
  shadow: number;
}

export interface Snapshot {
  at: number;
  totals: OutcomeRates & { total: number; since: string };
  rates: OutcomeRates;
  policies: (OutcomeRates & { policy_id: string })[];
  store: { kind: 'memory' | 'redis'; state: 'up' | 'down' | 'circuit_open' };
  fail_open_rate: number;
  failing_open: string[];
  denied_identities: { policy_id: string; identity: string; count: number; error: number }[];
  policies_revision: number;
  readiness: string;
}

export interface Hello {
  subject: string;
  role: string | null;
  can_edit: boolean;
  interval_ms: number;
  history: Snapshot[];
}

export interface AnalyticsSummary {
  since: string;
  total: number;
  allowed: number;
  denied: number;
  shadow: number;
  by_action: Record<string, number>;
  by_policy: (OutcomeRates & { policy_id: string; total: number })[];
  top_tags: { key: string; value: string; count: number }[];
}

export interface Decision {
  allowed: boolean;
  action: string;
  reason: string;
  matched_policy_id: string;
  remaining: number;
  retry_after: number;
  reset_after: number;
  limit: number;
  window: number;
  shadow_mode: boolean;
  metadata: Record<string, string>;
}

export interface FieldError {
  field: string;
  message: string;
}
