/**
 * Shapes only the dashboard reads (the stream of src/observability/dashboard-hub.ts; test/dashboard/
 * snapshot-types.test.ts holds them equal to the server's). The service's own shapes (Decision,
 * StoredPolicy, PolicyVersionEntry, PolicyAuditEntry, AnalyticsSummaryBody, FieldProblem) come from the
 * SDK (`@rl/client/types`, `@rl/client/admin-client`) as type-only imports: esbuild drops them, so
 * the bundle stays browser-only.
 */

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
  leases: LeaseTotals;
}

export interface LeaseTotals {
  refills: number;
  units_returned: number;
  units_lapsed: number;
}

export interface Hello {
  subject: string;
  role: string | null;
  can_edit: boolean;
  interval_ms: number;
  history: Snapshot[];
}
