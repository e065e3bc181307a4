import { Type, type Static } from '@sinclair/typebox';

const Count = Type.Integer({ minimum: 0 });

/** A store as the server sees it: answering, failing, or refused by its open circuit breaker. */
export const StoreStateSchema = Type.Union([Type.Literal('up'), Type.Literal('down'), Type.Literal('circuit_open')]);
export type StoreState = Static<typeof StoreStateSchema>;

/** One Redis master's health (redis/master-health.ts `states()`). */
export const MasterHealthSchema = Type.Object({
  master: Type.String({ description: '`host:port` of a Redis Cluster master; `master` for one Redis or Sentinel.' }),
  breaker: Type.Union([Type.Literal('closed'), Type.Literal('half_open'), Type.Literal('open')]),
  consecutive_failures: Type.Integer(),
  pending_calls: Type.Integer({ description: 'Script calls sent to this master and not yet answered.' }),
});

/**
 * Capacity leases of this process since it started, every level and policy together, read from the
 * `rl_lease_*` metrics (README "Observability").
 */
export const LeaseTotalsSchema = Type.Object({
  refills: Type.Number({ minimum: 0, description: 'Takes of units from a parent (rl_lease_refills_total).' }),
  units_returned: Type.Number({ minimum: 0, description: 'Unspent units given back (rl_lease_units_returned_total).' }),
  units_lapsed: Type.Number({ minimum: 0, description: 'Units neither spent nor given back (rl_lease_units_lapsed_total).' }),
  units_lapsed_by_reason: Type.Record(Type.String(), Type.Number({ minimum: 0 }), {
    description: 'units_lapsed by the `reason` label of rl_lease_units_lapsed_total (`unspecified` for a series without one).',
  }),
  waits: Count,
});
export type LeaseTotals = Static<typeof LeaseTotalsSchema>;

/** Envoy's rate limit quota service in this process (docs/envoy.md "RLQS"). */
export const RlqsStatusSchema = Type.Object({
  streams: Count,
  buckets: Count,
  units_held: Type.Number({ minimum: 0, description: 'Units taken from counters for Envoys that no usage report said were spent yet.' }),
});
export type RlqsStatus = Static<typeof RlqsStatusSchema>;
/** One global budget with `budget_shares`: each region's units of the current window beside its guarantee. */
export const RegionShareUseSchema = Type.Object({
  policy_id: Type.String(),
  window_left_ms: Count,
  regions: Type.Array(
    Type.Object({
      region: Type.String(),
      taken: Count,
      guaranteed: Count,
    }),
    { description: 'Every region named in budget_shares or that took units this window, by name: units taken (held or spent) of the window, and the guarantee.' },
  ),
  common: Type.Object({ size: Count, taken: Count }, { description: 'The common share ("*" and what rounding leaves) and the units regions took of it.' }),
});
export type RegionShareUse = Static<typeof RegionShareUseSchema>;

/** Region mode (RL_REGION): this server's region and the global store (RL_GLOBAL_COUNTERSTORE_ADDR) as it sees it. */
export const RegionStatusSchema = Type.Object({
  name: Type.String({ description: 'RL_REGION.' }),
  global_store: Type.Object({
    state: StoreStateSchema,
    masters: Type.Array(MasterHealthSchema, { description: 'Each global store master this server has used, with its breaker.' }),
  }),
  shares: Type.Optional(
    Type.Array(RegionShareUseSchema, {
      description: 'Global budgets with budget_shares, as the global counter last answered this region (per policy, the counter this region took from last).',
    }),
  ),
});
export type RegionStatus = Static<typeof RegionStatusSchema>;

/** Memory mode with RL_COUNTER_SNAPSHOT_SECS above 0: the counters' last snapshot in RL_DATA_DIR. */
export const CounterSnapshotSchema = Type.Object({
  age_ms: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
    description: 'Milliseconds since the last snapshot (written, or restored at start-up) began: no count it holds is older. null before the first.',
  }),
  keys: Type.Integer({ minimum: 0, description: 'Counters it holds.' }),
});

/** GET /rl/v1/info (http/routes/info.ts; `rl status` prints it). */
export const ServerInfoSchema = Type.Object(
  {
    service: Type.String(),
    version: Type.String(),
    counters: Type.Union([Type.Literal('redis'), Type.Literal('memory')]),
    policy_store: Type.Union([Type.Literal('redis'), Type.Literal('file')]),
    auth: Type.Union([Type.Literal('off'), Type.Literal('apikey'), Type.Literal('jwt')]),
    tls: Type.Boolean(),
    node: Type.String(),
    counter_store_masters: Type.Optional(
      Type.Array(MasterHealthSchema, { description: 'Redis mode: the health of each master the counter store has used, as of this request.' }),
    ),
    region: Type.Optional(RegionStatusSchema),
    /** Redis mode (where leases run): the lease totals of the process that answered. */
    leases: Type.Optional(LeaseTotalsSchema),
    counter_snapshot: Type.Optional(CounterSnapshotSchema),
    /** Where Envoy's rate limit quota service runs: its streams, buckets and units held. */
    rlqs: Type.Optional(RlqsStatusSchema),
  },
  { title: 'ServerInfo' },
);
export type ServerInfoBody = Static<typeof ServerInfoSchema>;
