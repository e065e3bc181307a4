import { expect } from 'chai';
import fc from 'fast-check';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { validatePolicy } from '../../src/policy/validate.js';
import { MAX_METADATA_ENTRIES, MAX_TAGS, PolicyBodySchema, PolicySchema } from '../../src/schema/index.js';
import { validatePolicyDocument } from '../../src/policy/policy-file.js';

/**
 * The policy schema (schema/policy.ts: types and the OpenAPI document) and the validator
 * (policy/validate.ts: the field-naming messages the API answers with) say the same thing.
 *
 * Generated bodies draw each field from valid and invalid values; for every body the compiled schema
 * and the validator must agree on valid/invalid. The generator leaves out only what the schema does
 * not encode and the validator checks in code (documented in the schema's descriptions): a duration of
 * zero length, a sub_window_count not dividing the window, the buckets' window-or-rate, concurrency's
 * max_concurrency-or-limit, quota's period-or-window, sample_rate required by action sample, valid_to
 * after valid_from, empty tag names, a match_expr that compiles and min_severity's levels.
 * And every policy the validator accepts, once stored, matches the Policy schema of the answers.
 */

const bodyCheck = TypeCompiler.Compile(PolicyBodySchema);
const storedCheck = TypeCompiler.Compile(PolicySchema);

const many = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 'v']));
/** A value: mostly one of `valid`, sometimes one of `invalid` (so that whole bodies are often valid). */
const pick = (valid: unknown[], invalid: unknown[]) =>
  fc.oneof({ arbitrary: fc.constantFrom(...valid), weight: 12 }, { arbitrary: fc.constantFrom(...invalid), weight: 1 });
/** A field drawn as `pick` does, or absent. */
const maybe = (valid: unknown[], invalid: unknown[]) => fc.option(pick(valid, invalid), { nil: undefined });
const WINDOWS = pick(['1m', '1h', '1h30m', '500ms'], [60, '', 'abc', '1x', '-1s']);
const WINDOW = [['1m', '1h', '1h30m', '500ms'], [60, '', 'abc', '1x', '-1s']] as const;
const DIVISIBLE_WINDOWS = pick(['1m', '1h', '1h30m'], [60, 'abc']);
const POS_INT = [[1, 10], [0, -1, 1.5, '10', 2 ** 60]] as const;
const POS_INTS = pick([...POS_INT[0]], [...POS_INT[1]]);

const algorithm = fc.oneof(
  fc.record({ type: fc.constantFrom('fixed_window', 'sliding_window_log'), limit: POS_INTS, window: WINDOWS }),
  fc.record(
    { type: fc.constant('sliding_window_counter'), limit: POS_INTS, window: DIVISIBLE_WINDOWS, sub_window_count: maybe([1, 2, 60], [0, 61, 1.5, '2']) },
    { requiredKeys: ['type', 'limit', 'window'] },
  ),
  fc.record(
    {
      type: fc.constantFrom('token_bucket', 'leaky_bucket'),
      limit: POS_INTS,
      window: WINDOWS,
      burst: maybe([...POS_INT[0]], [...POS_INT[1]]),
      refill_rate: maybe([0.5, 10], [0, -1, 'x']),
      leak_rate: maybe([0.5, 10], [0, -1, 'x']),
    },
    { requiredKeys: ['type', 'limit', 'window'] },
  ),
  fc.record(
    { type: fc.constant('concurrency'), max_concurrency: POS_INTS, limit: maybe([...POS_INT[0]], [...POS_INT[1]]), lease_ttl: maybe(['30s', 30], [0, -1, 'x', 1.5]) },
    { requiredKeys: ['type', 'max_concurrency'] },
  ),
  fc.record(
    { type: fc.constant('quota'), limit: POS_INTS, quota_period: WINDOWS, window: maybe([...WINDOW[0]], [...WINDOW[1]]) },
    { requiredKeys: ['type', 'limit', 'quota_period'] },
  ),
  fc.constantFrom<unknown>({ type: 'nope', limit: 1, window: '1m' }, 'fixed_window', 5),
).chain((alg) =>
  typeof alg !== 'object'
    ? fc.constant(alg)
    : fc.record({ cost_per_request: maybe([1, 3], [0, 2.5, '1']), sample_rate: maybe([0, 0.5, 1], [-0.1, 2, 'x']) }, { requiredKeys: [] }).map((common) => ({ ...alg, ...common })),
);

const scope = pick(
  [{}, { user_id: '*' }, { org_id: 'acme', signal_type: 'http' }, { signal_type: '*' }, { tags: { env: 'prod' } }, { tags: many(MAX_TAGS) }],
  [
    { signal_type: 'nope' },
    { user_id: '' },
    { user_id: 5 },
    { unknown: 'x' },
    { request_id: 'r' },
    { tags: { env: '' } },
    { tags: { env: 1 } },
    { tags: 'x' },
    { tags: many(MAX_TAGS + 1) },
    'scope',
  ],
);

const metadata = pick([{}, { owner: 'a' }, { n: 1, b: true }, many(MAX_METADATA_ENTRIES)], [{ o: {} }, { a: null }, 'x', many(MAX_METADATA_ENTRIES + 1)]);

const corePolicy = fc.record(
  {
    policy_id: pick(['p1', 'tenant:acme.v2', 'A'.repeat(128)], ['', '-a', 5, 'A'.repeat(129)]),
    name: pick(['n', 'x'.repeat(256)], ['x'.repeat(257), 5]),
    description: pick(['d'], ['x'.repeat(4097), false]),
    enabled: pick([true, false], ['yes']),
    priority: pick([0, -5, 2 ** 53 - 1], [1.5, 'x', 2 ** 60]),
    scope,
    algorithm,
    action: pick(['deny', 'delay', 'drop', 'downgrade', 'drop_low_priority'], ['nope', 1]),
    failure_mode: pick(['fail_open', 'fail_closed'], ['open']),
    enforcement_mode: pick(['enforce', 'shadow'], ['dry']),
    rollout_percent: pick([0, 50, 100], [101, -1, 1.5]),
    metadata,
    valid_from_unix: pick([0, 3], [-1, 'x']),
    valid_to_unix: pick([0, 5], [-1, 1.5]),
    extra_unknown_field: fc.constantFrom<unknown>('ignored', { deep: [1] }),
  },
  { requiredKeys: ['algorithm'] },
);

const quotaPolicy = fc.record(
  {
    id: pick(['q1'], ['', 5]),
    resource: pick(['llm'], ['', 5]),
    algorithm: pick(['quota'], ['fixed_window']),
    config: fc.oneof(
      fc.record(
        { quota: POS_INTS, window_seconds: pick([60, 3600], [0, -1, 1.5, 'x']), cost_per_request: maybe([1], [0]), sample_rate: maybe([0.5], [2]) },
        { requiredKeys: ['quota', 'window_seconds'] },
      ),
      fc.constantFrom<unknown>('config', { quota: 1 }),
    ),
    action_deny: pick([true, false], ['yes']),
    metadata,
    priority: pick([1], ['x']),
  },
  { requiredKeys: ['config'] },
);

describe('the policy schema and the validator agree', () => {
  it('on generated Policy-shaped bodies: valid by the schema exactly when valid by the validator', () => {
    let valid = 0;
    let invalid = 0;
    fc.assert(
      fc.property(corePolicy, (body) => {
        const result = validatePolicy(body, { requireId: false });
        const bySchema = bodyCheck.Check(body);
        const detail = result.ok ? 'validator: valid' : `validator: ${JSON.stringify(result.errors)}`;
        expect(bySchema, `${JSON.stringify(body).slice(0, 400)}\n${detail}\nschema: ${[...bodyCheck.Errors(body)].slice(0, 3).map((e) => `${e.path} ${e.message}`)}`).to.equal(result.ok);
        if (result.ok) valid++;
        else invalid++;
      }),
      { numRuns: 2000 },
    );
    // Both answers occur often enough for the agreement to mean something.
    expect(valid).to.be.greaterThan(20);
    expect(invalid).to.be.greaterThan(20);
  });

  it('on generated quota-shaped bodies too', () => {
    let valid = 0;
    fc.assert(
      fc.property(quotaPolicy, (body) => {
        const result = validatePolicy(body, { requireId: false });
        const detail = result.ok ? 'validator: valid' : `validator: ${JSON.stringify(result.errors)}`;
        expect(bodyCheck.Check(body), `${JSON.stringify(body).slice(0, 400)}\n${detail}`).to.equal(result.ok);
        if (result.ok) valid++;
      }),
      { numRuns: 1000 },
    );
    expect(valid).to.be.greaterThan(5);
  });

  it('every accepted body, normalised and stamped, matches the schema of a stored policy', () => {
    fc.assert(
      fc.property(fc.oneof(corePolicy, quotaPolicy), (body) => {
        const result = validatePolicyDocument({ policy_id: 'p1', ...(body as object) });
        if (!result.ok) return;
        const stored = JSON.parse(JSON.stringify({ ...result.policy, version: 1, created_at: '2026-01-01T00:00:00.000Z', updated_at: '2026-01-01T00:00:00.000Z' }));
        expect(storedCheck.Check(stored), `${JSON.stringify(stored)}: ${[...storedCheck.Errors(stored)].slice(0, 3).map((e) => `${e.path} ${e.message}`)}`).to.equal(true);
      }),
      { numRuns: 1000 },
    );
  });
});
