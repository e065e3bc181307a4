/**
 * The stream's messages, as the server defines them (src/schema/dashboard-stream.ts, the one definition
 * the hub builds them by). Type-only imports: esbuild drops them, so the bundle holds none of the server.
 * The service's other shapes (Decision, StoredPolicy, PolicyVersionEntry, PolicyAuditEntry,
 * AnalyticsSummaryBody, FieldProblem) come from the SDK (`@rl/client/types`, `@rl/client/admin-client`),
 * type-only as well.
 */
export type { Hello, OutcomeRates, RlqsPanel, SeriesHistory, Snapshot } from '../../src/schema/dashboard-stream.js';
export type { LeaseTotals, RegionStatus, StoreState } from '../../src/schema/server-info.js';
