import type { TSchema } from '@sinclair/typebox';
import { AlgorithmConfigSchema, LeaseSchema, PolicyInputSchema, PolicySchema, QuotaPolicyInputSchema, ScopeSchema } from '../schema/policy.js';
import {
  compiledField,
  rangeOf,
  isRequired,
  keywordOf,
  literalsOf,
  memberOfType,
  propertyOf,
  recordPartsOf,
  type CompiledField,
  type InclusiveRange,
} from './schema-reading.js';

/**
 * The schemas of the Policy shape's fields (schema/policy.ts), with the bounds, literals and patterns
 * the validator checks and names in its messages, read once when the module loads (validation reads
 * plain numbers, no schema walk per body).
 */

const top = (key: string): TSchema => propertyOf(PolicyInputSchema, key);

/** A string field: its compiled check, and the bounds its messages name. */
export interface StringField extends CompiledField {
  minLength: number;
  maxLength: number;
}

function stringField(schema: TSchema): StringField {
  const minLength = (schema.minLength as number | undefined) ?? 0;
  return { ...compiledField(schema), minLength, maxLength: keywordOf(schema, 'maxLength') };
}

/** Each of `names` (a field name per property of the result) read from the policy's top level by `read`. */
function topFields<K extends string, F>(read: (schema: TSchema) => F, names: Record<K, string>): Record<K, F> {
  const out = {} as Record<K, F>;
  for (const key of Object.keys(names) as K[]) out[key] = read(top(names[key]));
  return out;
}

/** The single-valued fields at the top of a policy, by kind. */
export const POLICY_FIELDS = {
  ...topFields(stringField, { policyId: 'policy_id', name: 'name', description: 'description', layer: 'layer' }),
  ...topFields(rangeOf, { priority: 'priority', rolloutPercent: 'rollout_percent', validFromUnix: 'valid_from_unix', validToUnix: 'valid_to_unix' }),
  ...topFields(literalsOf, { action: 'action', failureMode: 'failure_mode', enforcementMode: 'enforcement_mode', budget: 'budget' }),
} as const;

/** The algorithm types, in the schema's order. */
export const ALGORITHM_TYPE_NAMES: readonly string[] = Object.freeze(AlgorithmConfigSchema.anyOf.map((variant) => variant.properties.type.const as string));

const variants = new Map<string, TSchema>(AlgorithmConfigSchema.anyOf.map((variant) => [variant.properties.type.const as string, variant]));

/** The schema of one algorithm field: the type's own, or (type unknown) the first type's that has it. */
export function algorithmFieldSchema(type: string | undefined, key: string): TSchema {
  const variant = type === undefined ? undefined : variants.get(type);
  if (variant !== undefined) return propertyOf(variant, key);
  const owner = AlgorithmConfigSchema.anyOf.find((v) => key in v.properties);
  if (owner === undefined) throw new Error(`schema: no algorithm takes ${key}`);
  return propertyOf(owner, key);
}

/** Whether the algorithm type's schema requires the field (a type not known: none is). */
export function algorithmRequires(type: string | undefined, key: string): boolean {
  const variant = type === undefined ? undefined : variants.get(type);
  return variant !== undefined && isRequired(variant, key);
}

// Ranges are read once per type and field: the validator asks for them on every policy.
const ranges = new Map<string | undefined, Map<string, InclusiveRange>>();

/** An algorithm field's range (lease_ttl: its whole-seconds branch). */
export function algorithmRangeOf(type: string | undefined, key: string): InclusiveRange {
  let byKey = ranges.get(type);
  if (byKey === undefined) ranges.set(type, (byKey = new Map()));
  let range = byKey.get(key);
  if (range === undefined) {
    const schema = algorithmFieldSchema(type, key);
    byKey.set(key, (range = rangeOf(schema.anyOf === undefined ? schema : memberOfType(schema, 'integer'))));
  }
  return range;
}

const fixedWindow = variants.get('fixed_window')!;
/** Fields of every algorithm whose bounds do not vary by type. */
export const ALGORITHM_FIELDS = {
  sampleRate: rangeOf(algorithmFieldSchema(undefined, 'sample_rate')),
  subWindowCount: rangeOf(algorithmFieldSchema(undefined, 'sub_window_count')),
  calendar: literalsOf(propertyOf(fixedWindow, 'calendar')),
  timezone: stringField(propertyOf(fixedWindow, 'timezone')),
} as const;

/** `exclusiveMinimum` of a rate (refill_rate, leak_rate). */
export function rateFloorOf(key: 'refill_rate' | 'leak_rate'): number {
  return keywordOf(algorithmFieldSchema(undefined, key), 'exclusiveMinimum');
}

const sourceIpPrefix = propertyOf(PolicySchema, 'source_ip_prefix');
export const SOURCE_IP_PREFIX_RANGES = {
  v4: rangeOf(propertyOf(sourceIpPrefix, 'v4')),
  v6: rangeOf(propertyOf(sourceIpPrefix, 'v6')),
} as const;

export const LEASE_FIELDS = { maxUnits: rangeOf(propertyOf(LeaseSchema, 'max_units')) } as const;

const scopeString = propertyOf(ScopeSchema, 'user_id');
const tags = propertyOf(ScopeSchema, 'tags');
const tagValue = recordPartsOf(tags).value;
export const SCOPE_FIELDS_SCHEMA = {
  value: stringField(scopeString),
  /** `*` and the signal types. */
  signalType: literalsOf(propertyOf(ScopeSchema, 'signal_type')),
  maxTags: keywordOf(tags, 'maxProperties'),
  tagKeyMaxLength: keywordOf(tags.propertyNames as TSchema, 'maxLength'),
  tagValue: stringField(tagValue),
} as const;

const metadata = top('metadata');
export const METADATA_FIELDS = {
  maxEntries: keywordOf(metadata, 'maxProperties'),
  keyMaxLength: keywordOf(metadata.propertyNames as TSchema, 'maxLength'),
  valueMaxLength: keywordOf(memberOfType(recordPartsOf(metadata).value, 'string'), 'maxLength'),
} as const;

const budgetShares = top('budget_shares');
const shareParts = recordPartsOf(budgetShares);
export const BUDGET_SHARES_FIELDS = {
  regionPattern: shareParts.keyPattern,
  regionMaxLength: keywordOf(budgetShares.propertyNames as TSchema, 'maxLength'),
  weight: rangeOf(shareParts.value),
  minEntries: keywordOf(budgetShares, 'minProperties'),
  maxEntries: keywordOf(budgetShares, 'maxProperties'),
} as const;

const quotaConfig = propertyOf(QuotaPolicyInputSchema, 'config');
export const QUOTA_CONFIG_FIELDS = {
  quota: rangeOf(propertyOf(quotaConfig, 'quota')),
  windowSeconds: rangeOf(propertyOf(quotaConfig, 'window_seconds')),
} as const;
