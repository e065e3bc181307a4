import { FormatRegistry, Type, type Static, type TLiteral, type TObject, type TOptional, type TSchema, type TString, type TUnion } from '@sinclair/typebox';
import {
  MAX_FIELD_LENGTH,
  MAX_METADATA_ENTRIES,
  MAX_METADATA_KEY_LENGTH,
  MAX_METADATA_VALUE_LENGTH,
} from './limits.js';
import { mergePatchOf } from './merge-patch.js';
import { CONTEXT_STRING_FIELDS, SIGNAL_TYPES, tagMap, type ContextStringField, type SignalType } from './request-context.js';

/**
 * The Policy in its shapes (README "Managing policies"): the body a client sends (the Policy shape or the
 * quota-shaped alias), and the stored policy the server answers with. policy/validate.ts enforces these
 * with field-naming messages, reading every bound, literal and pattern from the objects below
 * (policy/policy-field-schemas.ts), plus the checks a schema cannot express (durations that parse, a
 * sub_window_count that divides the window, a match_expr that compiles);
 * test/schema/policy-schema.test.ts holds the two to agreement.
 */

// RFC 3339 instants in answers (TypeBox checks a `format` only once it is registered).
if (!FormatRegistry.Has('date-time')) FormatRegistry.Set('date-time', (v) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(v));

export const ALGORITHM_TYPES = [
  'fixed_window',
  'sliding_window_log',
  'sliding_window_counter',
  'token_bucket',
  'leaky_bucket',
  'concurrency',
  'quota',
] as const;
/** Actions taken when the limit is exceeded (docs/reference.md "Actions over the limit"). */
export const LIMIT_ACTIONS = ['deny', 'delay', 'drop', 'sample', 'downgrade', 'drop_low_priority'] as const;
/** The calendar periods a fixed_window or quota may count in (`algorithm.calendar`, src/util/calendar-period.ts). */
export const CALENDAR_UNITS = ['hour', 'day', 'week', 'month', 'year'] as const;
export const FAILURE_MODES = ['fail_open', 'fail_closed'] as const;
export const ENFORCEMENT_MODES = ['enforce', 'shadow'] as const;
/** Where a policy's limit applies with regions configured (docs/reference.md "Regions"): each region alone, or all together. */
export const BUDGETS = ['regional', 'global'] as const;
/** A region name as RL_REGION spells it, or `*` (the common share) in `budget_shares`. */
const REGION_NAME_MAX_LENGTH = 32;
const SHARE_REGION_PATTERN = new RegExp(`^(\\*|[a-z0-9-]{1,${REGION_NAME_MAX_LENGTH}})$`);
/** The algorithms whose limit is counted per window, the only ones `budget_shares` divides. */
export const SHARED_ALGORITHMS = ['fixed_window', 'quota', 'sliding_window_counter', 'sliding_window_log'] as const;
/** Characters of a policy id: its maxLength, and the length its pattern allows. */
const POLICY_ID_MAX_LENGTH = 128;
const POLICY_ID_PATTERN = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,${POLICY_ID_MAX_LENGTH - 1}}$`);
/** `metadata.min_severity`'s levels, least severe first (a metadata value: the schema says only "a string"). */
export const SEVERITY_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
/** rollout_percent: the share of identities (by hash) a policy applies to. */
export const ROLLOUT_PERCENT = { minimum: 0, maximum: 100 } as const;
/** A policy's layer: a lower-case name; a policy set holds at most MAX_LAYERS distinct ones. */
const LAYER_MAX_LENGTH = 32;
export const LAYER_PATTERN = new RegExp(`^[a-z][a-z0-9_-]{0,${LAYER_MAX_LENGTH - 1}}$`);
export const MAX_LAYERS = 16;
/** Keys of one scope: every scope field and `tags`. */
export const SCOPE_KEYS = [...CONTEXT_STRING_FIELDS.filter((f) => f !== 'request_id'), 'tags'] as const;

const literals = <T extends string>(values: readonly T[], options: object = {}) => Type.Union(values.map((v) => Type.Literal(v)), options);

const Duration = Type.String({
  pattern: '^\\s*([0-9]+(\\.[0-9]+)?(ms|s|m|h|d))+\\s*$',
  description: 'A duration: 500ms, 10s, 1m, 1h, 1d or combinations such as 1h30m (a bare number is refused).',
});
const PositiveInt = (description?: string) => Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description });
const Rate = (description: string) => Type.Number({ exclusiveMinimum: 0, description });

/** Fields every algorithm takes. */
const common = {
  cost_per_request: Type.Optional(PositiveInt('Units per unit of quantity (default 1).')),
  sample_rate: Type.Optional(Type.Number({ minimum: 0, maximum: 1, description: 'For action sample: the fraction let through (required then).' })),
};

/** Calendar periods (fixed_window and quota): in place of `window` / `quota_period`. */
const calendarFields = {
  calendar: Type.Optional(
    literals(CALENDAR_UNITS, { description: 'Count per calendar period in `timezone`: hour, day, week (from Monday 00:00), month or year. Replaces `window` / `quota_period`.' }),
  ),
  timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'With `calendar`: an IANA time zone name such as `Europe/Berlin` (default `UTC`).' })),
};

function algorithm<T extends (typeof ALGORITHM_TYPES)[number], P extends Record<string, TSchema>>(type: T, description: string, fields: P) {
  return Type.Object({ type: Type.Literal(type), ...fields, ...common }, { title: `Algorithm ${type}`, description, additionalProperties: false });
}

export const AlgorithmConfigSchema = Type.Union(
  [
    algorithm('fixed_window', 'Windows aligned to the epoch, or calendar periods (`calendar`, then no `window`).', { limit: PositiveInt(), window: Type.Optional(Duration), ...calendarFields }),
    algorithm('sliding_window_log', 'Exact sliding window.', { limit: PositiveInt(), window: Duration }),
    algorithm('sliding_window_counter', 'Weighted sub-windows.', {
      limit: PositiveInt(),
      window: Duration,
      sub_window_count: Type.Optional(Type.Integer({ minimum: 1, maximum: 60, description: 'Must divide the window evenly (1 = weighted previous window).' })),
    }),
    algorithm('token_bucket', '`window` is required unless `refill_rate` is given.', {
      limit: PositiveInt(),
      window: Type.Optional(Duration),
      burst: Type.Optional(PositiveInt('Capacity (default limit).')),
      refill_rate: Type.Optional(Rate('Tokens per second (default limit/window).')),
    }),
    algorithm('leaky_bucket', '`window` is required unless `leak_rate` is given.', {
      limit: PositiveInt(),
      window: Type.Optional(Duration),
      burst: Type.Optional(PositiveInt('Capacity (default limit).')),
      leak_rate: Type.Optional(Rate('Units per second (default limit/window).')),
    }),
    algorithm('concurrency', '`max_concurrency` or `limit` is required.', {
      max_concurrency: Type.Optional(PositiveInt()),
      limit: Type.Optional(PositiveInt()),
      // Whole seconds up to what is a safe integer in milliseconds (the counters count the ttl in ms).
      lease_ttl: Type.Optional(
        Type.Union([Duration, Type.Integer({ minimum: 1, maximum: Math.floor(Number.MAX_SAFE_INTEGER / 1000) })], { description: 'A duration or whole seconds (default 120).' }),
      ),
    }),
    algorithm('quota', '`quota_period` (or `window`) is required, unless `calendar` is given.', {
      limit: PositiveInt('The budget per period.'),
      quota_period: Type.Optional(Duration),
      window: Type.Optional(Duration),
      ...calendarFields,
    }),
  ],
  { title: 'AlgorithmConfig' },
);

const scopeValue = (field: ContextStringField) =>
  field === 'signal_type'
    ? literals(['*', ...SIGNAL_TYPES])
    : Type.String({ minLength: 1, maxLength: MAX_FIELD_LENGTH, description: 'An exact value, or "*" (present, one counter per value).' });

/** Each scope field's schema type, spelled out so Static<> gives `string` (and the signal literals), not `unknown`. */
type ScopeFieldSchemas = {
  [K in Exclude<ContextStringField, 'request_id'>]: TOptional<K extends 'signal_type' ? TUnion<TLiteral<'*' | SignalType>[]> : TString>;
};
const scopeFields = Object.fromEntries(
  CONTEXT_STRING_FIELDS.filter((field) => field !== 'request_id').map((field) => [field, Type.Optional(scopeValue(field))]),
) as ScopeFieldSchemas;

export const ScopeSchema = Type.Object(
  { ...scopeFields, tags: Type.Optional(tagMap({ minLength: 1 })) },
  { title: 'Scope', additionalProperties: false, description: 'Absent fields match anything.' },
);

const metadata = <V extends TSchema>(value: V) =>
  Type.Record(Type.String(), value, {
    maxProperties: MAX_METADATA_ENTRIES,
    propertyNames: { maxLength: MAX_METADATA_KEY_LENGTH },
    description: 'String values; match_expr (a CEL expression) and min_severity have meaning.',
  });
const MetadataValue = Type.String({ maxLength: MAX_METADATA_VALUE_LENGTH });

/** README "Managing policies" (client networks): the prefix lengths a `source_ip: "*"` policy counts by. */
export interface SourceIpPrefix {
  v4: number;
  v6: number;
}

export const DEFAULT_SOURCE_IP_PREFIX: Readonly<SourceIpPrefix> = { v4: 32, v6: 56 };

/** A millisecond count as the shortest duration string that says it: 100 -> "100ms", 60000 -> "60s". */
function durationText(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

/** Prefix lengths `source_ip: "*"` counts client networks by (stored with both; either may be left out when written). */
const SourceIpPrefixSchema = () =>
  Type.Object(
    {
      v4: Type.Integer({ minimum: 8, maximum: 32, description: 'IPv4 prefix length (default 32).' }),
      v6: Type.Integer({ minimum: 16, maximum: 128, description: 'IPv6 prefix length (default 56).' }),
    },
    { additionalProperties: false, description: 'With scope.source_ip "*": count each client network, not each address string.' },
  );

/** A capacity lease (docs/reference.md "Slots, leases and pools"); returned as given. */
export const LEASE_MAX_UNITS = { min: 1, max: 1_000_000, default: 100 };
export const LEASE_MAX_HOLD_MS = { min: 100, max: 60_000, default: 1000 };
/** A lease's max_hold bounds as a duration is written: "100ms" to "60s". */
export const LEASE_MAX_HOLD_TEXT = { min: durationText(LEASE_MAX_HOLD_MS.min), max: durationText(LEASE_MAX_HOLD_MS.max), default: durationText(LEASE_MAX_HOLD_MS.default) };
export const LeaseSchema = Type.Object(
  {
    max_units: Type.Optional(Type.Integer({ minimum: LEASE_MAX_UNITS.min, maximum: LEASE_MAX_UNITS.max, description: `Most units one refill takes (default ${LEASE_MAX_UNITS.default}).` })),
    max_hold: Type.Optional(Type.String({ pattern: Duration.pattern, description: `A duration from ${LEASE_MAX_HOLD_TEXT.min} to ${LEASE_MAX_HOLD_TEXT.max} (default ${LEASE_MAX_HOLD_TEXT.default}): how long unused units are held.` })),
  },
  {
    title: 'Lease',
    additionalProperties: false,
    description: 'Process leases: each server process answers from units taken in advance. Not for sliding_window_log or concurrency.',
  },
);

/** `created_at`/`updated_at` in a body: the server sets them, so a policy read can be written back as it is. */
const serverSetTime = Type.String({ readOnly: true, description: 'Set by the server; ignored when written.' });

/** Fields of the Policy shape a client may send, all but `algorithm` optional (the server applies defaults). */
const inputFields = {
  policy_id: Type.String({ minLength: 1, maxLength: POLICY_ID_MAX_LENGTH, pattern: POLICY_ID_PATTERN.source, description: 'Required on POST; on PUT it must equal the path id.' }),
  name: Type.String({ maxLength: 256 }),
  description: Type.String({ maxLength: 4096 }),
  enabled: Type.Boolean(),
  priority: Type.Integer({ minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER }),
  scope: ScopeSchema,
  action: literals(LIMIT_ACTIONS),
  failure_mode: literals(FAILURE_MODES),
  enforcement_mode: literals(ENFORCEMENT_MODES),
  rollout_percent: Type.Integer(ROLLOUT_PERCENT),
  valid_from_unix: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'Unix seconds; 0 = unbounded.' }),
  valid_to_unix: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'Unix seconds; 0 = unbounded.' }),
  source_ip_prefix: Type.Partial(SourceIpPrefixSchema()),
  budget: Type.Optional(literals(BUDGETS, { description: 'regional (default): each region enforces limit alone; global: one limit for all regions (docs/distribution.md).' })),
  layer: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: LAYER_MAX_LENGTH,
      pattern: LAYER_PATTERN.source,
      description: `The layer the policy decides in (default "default"; at most ${MAX_LAYERS} layers in a policy set). Each layer chooses its own winner; a request is allowed only when every layer's winner admits it.`,
    }),
  ),
  budget_shares: Type.Optional(
    Type.Record(Type.String({ pattern: SHARE_REGION_PATTERN.source }), Type.Integer({ minimum: 1, maximum: 1_000_000 }), {
      minProperties: 1,
      maxProperties: 64,
      // The key pattern's length again, as a keyword the validator's message reads (TypeBox checks the pattern).
      propertyNames: { maxLength: REGION_NAME_MAX_LENGTH },
      description:
        'With budget "global" (fixed_window, quota, sliding_window_counter or sliding_window_log): region name (or "*", the common share) to weight. Region r is guaranteed floor(limit × w_r / W) units of every window (a sliding window: of the window as it slides); the rest is the common share any region may take from (docs/distribution.md).',
    }),
  ),
};

/** The fields both input shapes take alike, after their own: validity, source, budget, layer and lease. */
const commonInputFields = {
  valid_from_unix: Type.Optional(inputFields.valid_from_unix),
  valid_to_unix: Type.Optional(inputFields.valid_to_unix),
  source_ip_prefix: Type.Optional(inputFields.source_ip_prefix),
  budget: inputFields.budget,
  layer: inputFields.layer,
  budget_shares: inputFields.budget_shares,
  lease: Type.Optional(LeaseSchema),
};

export const PolicyInputSchema = Type.Object(
  {
    policy_id: Type.Optional(inputFields.policy_id),
    name: Type.Optional(inputFields.name),
    description: Type.Optional(inputFields.description),
    enabled: Type.Optional(inputFields.enabled),
    priority: Type.Optional(inputFields.priority),
    scope: Type.Optional(inputFields.scope),
    algorithm: AlgorithmConfigSchema,
    action: Type.Optional(inputFields.action),
    failure_mode: Type.Optional(inputFields.failure_mode),
    enforcement_mode: Type.Optional(inputFields.enforcement_mode),
    rollout_percent: Type.Optional(inputFields.rollout_percent),
    metadata: Type.Optional(metadata(Type.Union([MetadataValue, Type.Number(), Type.Boolean()]))),
    ...commonInputFields,
    version: Type.Optional(PositiveInt('PUT/PATCH: the version being changed; a stale one is a 409 (as If-Match).')),
    created_at: Type.Optional(serverSetTime),
    updated_at: Type.Optional(serverSetTime),
  },
  {
    title: 'PolicyInput',
    additionalProperties: false,
    description: 'A policy as written; unknown fields are refused. Defaults: enabled true, priority 0, action deny, failure_mode fail_open, enforcement_mode enforce, rollout_percent 100.',
  },
);

/** The quota-shaped alias, normalised to a Policy on arrival (README "Managing policies"). */
export const QuotaPolicyInputSchema = Type.Object(
  {
    id: Type.Optional(inputFields.policy_id),
    policy_id: Type.Optional({ ...inputFields.policy_id, description: 'The same as `id` (used when `id` is absent).' }),
    resource: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_FIELD_LENGTH })),
    algorithm: Type.Optional(Type.Literal('quota')),
    config: Type.Object(
      {
        quota: PositiveInt('The budget per window.'),
        // Its milliseconds must be a safe integer too: the period is counted in ms.
        window_seconds: Type.Integer({ minimum: 1, maximum: Math.floor(Number.MAX_SAFE_INTEGER / 1000), description: 'Whole seconds.' }),
        cost_per_request: common.cost_per_request,
        sample_rate: common.sample_rate,
      },
      { additionalProperties: false },
    ),
    scope: Type.Optional({ ...ScopeSchema, description: 'Further scope fields; `resource` sets scope.resource.' }),
    action_deny: Type.Optional(Type.Boolean({ description: 'true: deny; false: shadow enforcement.' })),
    metadata: Type.Optional(metadata(Type.Union([MetadataValue, Type.Number(), Type.Boolean()]))),
    name: Type.Optional(inputFields.name),
    description: Type.Optional(inputFields.description),
    enabled: Type.Optional(inputFields.enabled),
    priority: Type.Optional(inputFields.priority),
    failure_mode: Type.Optional(inputFields.failure_mode),
    enforcement_mode: Type.Optional(inputFields.enforcement_mode),
    action: Type.Optional(inputFields.action),
    rollout_percent: Type.Optional(inputFields.rollout_percent),
    ...commonInputFields,
    version: Type.Optional(PositiveInt('PUT: the version being changed; a stale one is a 409 (as If-Match).')),
  },
  { title: 'QuotaPolicyInput', additionalProperties: false, description: 'The quota-shaped body: stored and returned in the Policy shape. Unknown fields are refused.' },
);

export const PolicyBodySchema = Type.Union([PolicyInputSchema, QuotaPolicyInputSchema], { title: 'PolicyBody' });

/** A JSON merge patch (RFC 7396) over the stored policy, in either shape; the result must validate. */
export const PolicyPatchSchema = Type.Union(
  [
    { ...mergePatchOf(PolicyInputSchema), description: 'A patch of the Policy shape.' },
    { ...mergePatchOf(QuotaPolicyInputSchema), description: 'A patch of the quota shape (`{"config": {"quota": 500}}`).' },
  ],
  { title: 'PolicyPatch', description: 'RFC 7396 merge patch of a Policy (or of its quota shape): fields left out stay, null removes a field, objects merge; the patched policy must validate.' },
);

/** The stored policy: every default applied, server-set fields present. */
export const PolicySchema = Type.Object(
  {
    ...inputFields,
    source_ip_prefix: Type.Optional(SourceIpPrefixSchema()),
    algorithm: AlgorithmConfigSchema,
    metadata: metadata(MetadataValue),
    lease: Type.Optional(LeaseSchema),
    version: PositiveInt('1 on create, +1 on every change.'),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { title: 'Policy', additionalProperties: false },
);

export type PolicyBody = Static<typeof PolicyBodySchema>;
export type StoredPolicy = Static<typeof PolicySchema>;

/**
 * The keys each object of a policy may hold, read from the schemas above so that what the OpenAPI
 * document declares (`additionalProperties: false`) and what the validator refuses are one list.
 */
const keysOf = (schema: TObject): readonly string[] => Object.freeze(Object.keys(schema.properties));
export const POLICY_KEYS = keysOf(PolicyInputSchema);
/** The keys of a stored policy (what the server writes to its store and answers with). */
export const STORED_POLICY_KEYS = keysOf(PolicySchema);
export const QUOTA_POLICY_KEYS = keysOf(QuotaPolicyInputSchema);
export const QUOTA_CONFIG_KEYS = keysOf(QuotaPolicyInputSchema.properties.config);
export const LEASE_KEYS = keysOf(LeaseSchema);
export const SOURCE_IP_PREFIX_KEYS = keysOf(SourceIpPrefixSchema());
/** Per algorithm type, the fields it takes (`type` among them). */
export const ALGORITHM_KEYS = Object.freeze(
  Object.fromEntries(AlgorithmConfigSchema.anyOf.map((variant) => [variant.properties.type.const, keysOf(variant)])),
) as Readonly<Record<(typeof ALGORITHM_TYPES)[number], readonly string[]>>;
/** Every field some algorithm takes: what an algorithm of an unknown type is checked against. */
export const ANY_ALGORITHM_KEYS = Object.freeze([...new Set(Object.values(ALGORITHM_KEYS).flat())]);
