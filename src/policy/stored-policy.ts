import { SCOPE_FIELDS } from '../model/request-context.js';
import { ALGORITHM_KEYS, LEASE_KEYS, SCOPE_KEYS, SOURCE_IP_PREFIX_KEYS, STORED_POLICY_KEYS } from '../schema/policy.js';
import { isObject } from '../util/json-shape.js';
import { log } from '../util/log.js';
import {
  ALGORITHM_TYPES,
  ENFORCEMENT_MODES,
  FAILURE_MODES,
  LIMIT_ACTIONS,
  type AlgorithmConfig,
  type Policy,
  type PolicyScope,
} from './types.js';
import type { PolicyInput } from './validate.js';

/**
 * The one in-memory form of a stored policy. Every policy the store, the service and the matcher hold
 * is made here, whether it comes from validation, a policy file, the journal, a snapshot or Redis: a
 * server holds one per policy (100,000 and more), so its size is most of the heap.
 *
 * - The policy and its scope are plain objects with their fields in one order and nothing ever
 *   deleted, so V8 keeps them in fast mode with hidden classes shared by every policy (a prototype-less
 *   or `delete`d object is a hash table of its own, several times larger).
 * - Equal algorithms are one frozen object, and so is every empty metadata (most policies have none).
 * - Enum fields hold the constant strings; repeated strings of one load (timestamps, scope values) are
 *   one string when the caller passes a StringPool.
 *
 * Stored policies are never changed in place (a change makes a new one): the shared parts are frozen
 * so that a mistake throws instead of changing every policy that shares them.
 */

/** One string for equal strings, for the duration of one load (a file, a journal replay, a snapshot). */
export class StringPool {
  private readonly strings = new Map<string, string>();
  /** The last string asked for: consecutive policies often share a timestamp. */
  private last = '';

  of<T extends string | undefined>(s: T): T {
    // JSON.parse already makes one string of every short one (V8 internalizes up to 10 characters).
    if (s === undefined || s.length <= 10) return s;
    if (s === this.last) return this.last as T;
    let known = this.strings.get(s);
    if (known === undefined) this.strings.set(s, (known = s));
    this.last = known;
    return known as T;
  }
}

/** The stored policy: `input`'s fields in canonical order with the server-set ones after them. */
export function storedPolicy(input: PolicyInput, version: number, createdAt: string, updatedAt: string, pool?: StringPool): Policy {
  // One object literal without spreads: V8 then gives every policy its fields inside the object (a
  // literal with a spread in it adds the fields after the spread one by one, into a separate array).
  const policy: Policy = {
    policy_id: input.policy_id,
    name: input.name,
    description: pool?.of(input.description) ?? input.description,
    enabled: input.enabled,
    priority: input.priority,
    scope: scopeOf(input.scope, pool),
    algorithm: algorithmOf(input.algorithm),
    action: constant(LIMIT_ACTIONS, input.action),
    failure_mode: constant(FAILURE_MODES, input.failure_mode),
    enforcement_mode: constant(ENFORCEMENT_MODES, input.enforcement_mode),
    rollout_percent: input.rollout_percent,
    metadata: metadataOf(input.metadata),
    valid_from_unix: input.valid_from_unix,
    valid_to_unix: input.valid_to_unix,
    version,
    created_at: pool?.of(createdAt) ?? createdAt,
    updated_at: pool?.of(updatedAt) ?? updatedAt,
  };
  return input.source_ip_prefix || input.budget !== undefined || input.budget_shares || input.layer !== undefined || input.lease ? withOptionalFields(policy, input) : policy;
}

/**
 * The fields most policies do not have, where canonical order puts them (before the server-set ones);
 * absent when not given, so a policy is returned as it was given.
 */
function withOptionalFields(policy: Policy, input: PolicyInput): Policy {
  const { version, created_at, updated_at, ...given } = policy;
  return {
    ...given,
    ...(input.source_ip_prefix && { source_ip_prefix: { v4: input.source_ip_prefix.v4, v6: input.source_ip_prefix.v6 } }),
    ...(input.budget !== undefined && { budget: input.budget }),
    ...(input.layer !== undefined && { layer: input.layer }),
    ...(input.budget_shares && { budget_shares: { ...input.budget_shares } }),
    ...(input.lease && { lease: { ...input.lease } }),
    version,
    created_at,
    updated_at,
  };
}

/**
 * A policy just parsed from JSON the server wrote (journal, snapshot, Redis), brought to the stored form
 * in place: JSON.parse already makes fast objects of exactly their size, with the fields in the order
 * they were written, so only the shared parts and strings are swapped in (no second copy is built).
 */
export function revivedPolicy(parsed: Policy, pool?: StringPool): Policy {
  dropUnknownKeys(parsed);
  parsed.description = pool?.of(parsed.description) ?? parsed.description;
  const scope = parsed.scope;
  if (pool !== undefined && scope !== undefined && scope !== null) {
    for (const key of Object.keys(scope)) {
      const value = scope[key as keyof PolicyScope];
      if (typeof value === 'string') (scope as Record<string, string>)[key] = pool.of(value);
    }
  }
  parsed.algorithm = algorithmOf(parsed.algorithm);
  parsed.action = constant(LIMIT_ACTIONS, parsed.action);
  parsed.failure_mode = constant(FAILURE_MODES, parsed.failure_mode);
  parsed.enforcement_mode = constant(ENFORCEMENT_MODES, parsed.enforcement_mode);
  parsed.metadata = metadataOf(parsed.metadata);
  if (pool !== undefined) {
    parsed.created_at = pool.of(parsed.created_at);
    parsed.updated_at = pool.of(parsed.updated_at);
  }
  return parsed;
}

/**
 * Policies are strict (README "Managing policies"), but a store written before they were, or by a newer
 * version, may hold a key this version does not know. The store must still start and the policy still
 * be served and rewritable: the key is dropped, with one warning per policy and key.
 */
function dropUnknownKeys(parsed: Policy): void {
  const record = parsed as unknown as Record<string, unknown>;
  dropFrom(record, STORED_POLICY_KEYS, '', parsed);
  if (isObject(record.scope)) dropFrom(record.scope, SCOPE_KEYS, 'scope.', parsed);
  if (isObject(record.lease)) dropFrom(record.lease, LEASE_KEYS, 'lease.', parsed);
  if (isObject(record.source_ip_prefix)) dropFrom(record.source_ip_prefix, SOURCE_IP_PREFIX_KEYS, 'source_ip_prefix.', parsed);
  const algorithm = record.algorithm;
  if (isObject(algorithm) && Object.prototype.hasOwnProperty.call(ALGORITHM_KEYS, algorithm.type as string)) {
    dropFrom(algorithm, ALGORITHM_KEYS[algorithm.type as keyof typeof ALGORITHM_KEYS], 'algorithm.', parsed);
  }
}

/** Warned-of `policy_id path` pairs: a journal replays every version of a policy, one warning is enough. */
const warned = new Set<string>();
const WARNED_MAX = 10_000;

function dropFrom(object: Record<string, unknown>, known: readonly string[], path: string, policy: Policy): void {
  for (const key of Object.keys(object)) {
    if (known.includes(key)) continue;
    delete object[key];
    const field = `${path}${key}`;
    const seen = `${policy.policy_id} ${field}`;
    if (warned.has(seen)) continue;
    if (warned.size >= WARNED_MAX) warned.clear();
    warned.add(seen);
    log.warn('policy store: dropping a field this version does not know from a stored policy', { policy_id: policy.policy_id, field });
  }
}

/** The same string from `values` when there is one (one copy for every policy), else `value`. */
function constant<T extends string>(values: readonly T[], value: T): T {
  const at = values.indexOf(value);
  return at < 0 ? value : values[at];
}

/**
 * Scope fields in the order they were given (the field names are known, so a plain object is safe),
 * tags last, prototype-less: their keys are the user's.
 */
function scopeOf(scope: PolicyScope | undefined, pool: StringPool | undefined): PolicyScope {
  const out: PolicyScope = {};
  if (scope === undefined || scope === null) return out;
  for (const key of Object.keys(scope)) {
    if (key === 'tags' || !(SCOPE_FIELDS as readonly string[]).includes(key)) continue;
    const value = scope[key as keyof PolicyScope];
    if (typeof value === 'string') (out as Record<string, string>)[key] = pool?.of(value) ?? value;
  }
  const tags = scope.tags;
  if (tags !== undefined && tags !== null && Object.keys(tags).length > 0) {
    const copy = Object.create(null) as Record<string, string>;
    for (const key of Object.keys(tags)) copy[pool?.of(key) ?? key] = pool?.of(tags[key]) ?? tags[key];
    out.tags = copy;
  }
  return out;
}

/** Interned algorithms by their JSON; bounded (only memory is at stake when it is forgotten). */
const algorithms = new Map<string, AlgorithmConfig>();
const ALGORITHMS_MAX = 10_000;

/** Fields of an algorithm in the order validation writes them; a stored algorithm holds only those set. */
const ALGORITHM_FIELDS = [
  'type',
  'limit',
  'window',
  'sub_window_count',
  'burst',
  'refill_rate',
  'leak_rate',
  'max_concurrency',
  'lease_ttl',
  'quota_period',
  'calendar',
  'timezone',
  'cost_per_request',
  'sample_rate',
] as const satisfies readonly (keyof AlgorithmConfig)[];

function algorithmOf(algorithm: AlgorithmConfig): AlgorithmConfig {
  const key = JSON.stringify(algorithm);
  const known = algorithms.get(key);
  if (known !== undefined) return known;
  const out = { type: constant(ALGORITHM_TYPES, algorithm.type) } as Record<string, unknown>;
  for (const field of ALGORITHM_FIELDS) {
    const value = (algorithm as unknown as Record<string, unknown>)[field];
    if (field !== 'type' && value !== undefined) out[field] = value;
  }
  Object.freeze(out);
  if (algorithms.size >= ALGORITHMS_MAX) algorithms.clear();
  algorithms.set(key, out as unknown as AlgorithmConfig);
  return out as unknown as AlgorithmConfig;
}

/** The metadata of every policy that has none. */
const NO_METADATA: Record<string, string> = Object.freeze(Object.create(null) as Record<string, string>);

/** Metadata keys are the user's: a prototype-less copy (rare: most policies share NO_METADATA). */
function metadataOf(metadata: Record<string, string> | undefined): Record<string, string> {
  if (metadata === undefined || metadata === null) return NO_METADATA;
  const keys = Object.keys(metadata);
  if (keys.length === 0) return NO_METADATA;
  const out = Object.create(null) as Record<string, string>;
  for (const key of keys) out[key] = metadata[key];
  return Object.freeze(out);
}
