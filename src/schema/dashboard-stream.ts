import { Type, type Static } from '@sinclair/typebox';
import { LeaseTotalsSchema, RegionStatusSchema, RlqsStatusSchema, StoreStateSchema } from './server-info.js';

/**
 * The messages of GET /rl/v1/stream (server-sent events; docs/dashboard.md), defined once: the server
 * (analytics/dashboard-hub.ts) builds them and the page (dashboard/src) reads them, both typed from
 * here (the page imports the types only, so its bundle holds none of this).
 */

const Rate = Type.Number({ minimum: 0, description: 'Per second over the tick.' });

/** Decisions per second by outcome (docs/reference.md "Actions over the limit", Outcomes: shadow overlaps the other two). */
export const OutcomeRatesSchema = Type.Object({ allowed: Rate, denied: Rate, shadow: Rate });
export type OutcomeRates = Static<typeof OutcomeRatesSchema>;

const DeniedIdentitySchema = Type.Object({ policy_id: Type.String(), identity: Type.String(), count: Type.Integer(), error: Type.Integer() });

/** Envoy's rate limit quota service in this process: /rl/v1/info's `rlqs`, and the assignments sent since start-up. */
export const RlqsPanelSchema = Type.Object({
  ...RlqsStatusSchema.properties,
  assignments: Type.Object(
    { allow_all: Type.Integer({ minimum: 0 }), deny_all: Type.Integer({ minimum: 0 }), token_bucket: Type.Integer({ minimum: 0 }) },
    { description: 'rl_rlqs_assignments_total by strategy.' },
  ),
});
export type RlqsPanel = Static<typeof RlqsPanelSchema>;

/** `event: snapshot`, once a tick. */
export const SnapshotSchema = Type.Object(
  {
    at: Type.Number({ description: 'Epoch ms of the tick.' }),
    totals: Type.Object(
      { total: Type.Integer(), allowed: Type.Integer(), denied: Type.Integer(), shadow: Type.Integer(), since: Type.String({ format: 'date-time' }) },
      { description: 'Since start-up: allowed + denied = total; shadow overlaps them.' },
    ),
    rates: OutcomeRatesSchema,
    policies: Type.Array(Type.Object({ policy_id: Type.String(), allowed: Rate, denied: Rate, shadow: Rate }), {
      description: 'The busiest policies so far (at most 50), each with its rates over the tick.',
    }),
    store: Type.Object({ kind: Type.Union([Type.Literal('memory'), Type.Literal('redis')]), state: StoreStateSchema }),
    fail_open_rate: Rate,
    failing_open: Type.Array(Type.String(), { description: 'Enabled fail_open policies while the counter store is not up.' }),
    denied_identities: Type.Array(DeniedIdentitySchema),
    policies_revision: Type.Integer({ description: 'Changes whenever the policy set does.' }),
    readiness: Type.String(),
    leases: LeaseTotalsSchema,
    region: Type.Union([RegionStatusSchema, Type.Null()], { description: 'Region mode: the region and the global store; null otherwise.' }),
    rlqs: Type.Union([RlqsPanelSchema, Type.Null()], { description: 'Envoy RLQS streams: null where the server does not serve RLQS (region mode) or the viewer is limited to organisations.' }),
  },
  { title: 'DashboardSnapshot' },
);
export type Snapshot = Static<typeof SnapshotSchema>;

/** A rate per tick, null where the tick did not have it (a policy outside the busiest then). */
const Column = Type.Array(Type.Union([Type.Number(), Type.Null()]));

/**
 * The per-second series the server keeps from start-up (analytics/series-ring.ts), oldest first, in
 * columns: `at[i]` is the tick of `allowed[i]`, `denied[i]`, `shadow[i]` and of each policy's i-th values.
 */
export const SeriesHistorySchema = Type.Object(
  {
    at: Type.Array(Type.Number()),
    allowed: Type.Array(Type.Number()),
    denied: Type.Array(Type.Number()),
    shadow: Type.Array(Type.Number()),
    policies: Type.Array(Type.Object({ policy_id: Type.String(), allowed: Column, denied: Column, shadow: Column }), {
      description: 'The busiest policies of the newest tick, over the whole history.',
    }),
  },
  { title: 'DashboardSeriesHistory' },
);
export type SeriesHistory = Static<typeof SeriesHistorySchema>;

/** `event: hello`, first on every stream. */
export const HelloSchema = Type.Object(
  {
    subject: Type.String(),
    role: Type.Union([Type.String(), Type.Null()]),
    can_edit: Type.Boolean(),
    interval_ms: Type.Integer({ minimum: 1 }),
    history: SeriesHistorySchema,
  },
  { title: 'DashboardHello' },
);
export type Hello = Static<typeof HelloSchema>;
