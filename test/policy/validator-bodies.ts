import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { ALGORITHM_TYPES, CALENDAR_UNITS, LIMIT_ACTIONS } from '../../src/schema/policy.js';

/**
 * Policy bodies for recording and comparing the validator's answers: mostly near-valid bodies of every
 * algorithm and every optional field (calendar, budget_shares, layer, lease, match_expr, the quota
 * shape), each field sometimes replaced by a value of the wrong kind or out of bounds, so both the
 * normalised policies and the messages are exercised. Every body is plain JSON (what a decoder gives).
 */

const junk = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer({ min: -5, max: 5 }),
  fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 }),
  fc.constantFrom(0, 1.5, -1, 2 ** 53, 1e21, ''),
  fc.string({ maxLength: 8 }),
  fc.constant([]),
  fc.constant({}),
  fc.constantFrom('__proto__', 'constructor'),
);
/** A field's likely values, and now and then something else. */
const sometimesJunk = <T>(good: fc.Arbitrary<T>) => fc.oneof({ weight: 5, arbitrary: good }, { weight: 1, arbitrary: junk as fc.Arbitrary<unknown> });

const duration = fc.constantFrom('1s', '10s', '1m', '1h', '30d', '500ms', '1h30m', '0s', '7ms', '99ms', '100ms', '60s', '61s', '1x', ' 2s ', '1.5s', 10);
const posInt = fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.constantFrom(0, -1, 1_000_000, 1_000_001, 2 ** 53 - 1, 2 ** 53, 1.5));
const rate = fc.oneof(fc.double({ min: 0.001, max: 1000, noNaN: true }), fc.constantFrom(0, -1, 1e400 === Infinity ? 1e308 : 1));
const calendar = fc.constantFrom(...CALENDAR_UNITS, 'montth', 'fortnight');
const timezone = fc.constantFrom('UTC', 'Europe/Berlin', 'America/New_York', 'Mars/Olympus', 'x'.repeat(65));
const algorithmFields = {
  limit: posInt,
  window: duration,
  sub_window_count: fc.constantFrom(1, 2, 3, 6, 7, 10, 60, 61, 0),
  burst: posInt,
  refill_rate: rate,
  leak_rate: rate,
  max_concurrency: posInt,
  lease_ttl: fc.constantFrom('30s', '2m', 120, 0, -5, 1.5, 2 ** 52, 'soon'),
  quota_period: duration,
  calendar,
  timezone,
  cost_per_request: posInt,
  sample_rate: fc.constantFrom(0, 0.5, 1, 1.5, -0.1),
  windw: fc.constant('1m'),
};
const algorithmType = fc.oneof({ weight: 12, arbitrary: fc.constantFrom(...ALGORITHM_TYPES) }, { weight: 1, arbitrary: fc.constantFrom('fixed_windw', 'gcra') });
const algorithm = fc
  .record({ type: sometimesJunk(algorithmType), ...Object.fromEntries(Object.entries(algorithmFields).map(([k, v]) => [k, sometimesJunk(v)])) }, { requiredKeys: [] })
  .map((a) => ({ type: (a as { type?: unknown }).type ?? 'fixed_window', ...a }));

const scopeValue = fc.constantFrom('*', 'acme', 'api', '', 'x'.repeat(4097));
const scope = fc.record(
  {
    org_id: sometimesJunk(scopeValue),
    tenant_id: scopeValue,
    service: scopeValue,
    signal_type: fc.constantFrom('*', 'http', 'grpc', 'smtp'),
    source_ip: fc.constantFrom('*', '10.0.0.1'),
    request_id: fc.constant('r1'),
    tags: sometimesJunk(fc.dictionary(fc.constantFrom('tier', 'plan', '', 'k'.repeat(257)), sometimesJunk(scopeValue), { maxKeys: 3 })),
  },
  { requiredKeys: [] },
);
const metadata = fc.dictionary(
  fc.constantFrom('owner', 'match_expr', 'min_severity', 'k'.repeat(257)),
  sometimesJunk(fc.constantFrom('team-a', 'warn', 'loud', 'request.method == "GET"', 'request.(', 'size(tags) > 1', 12, true, 'v'.repeat(4097))),
  { maxKeys: 3 },
);
const lease = fc.record({ max_units: sometimesJunk(posInt), max_hold: sometimesJunk(duration), extra: fc.constant(1) }, { requiredKeys: [] });
const budgetShares = fc.dictionary(fc.constantFrom('eu', 'us-east', '*', 'EU', ''), sometimesJunk(posInt), { maxKeys: 3 });

const policyFields = {
  policy_id: sometimesJunk(fc.constantFrom('p1', 'api.read:v2', '-bad', 'x'.repeat(129))),
  name: sometimesJunk(fc.constantFrom('n', 'x'.repeat(257))),
  description: fc.constantFrom('d', 'x'.repeat(4097)),
  enabled: sometimesJunk(fc.boolean()),
  priority: sometimesJunk(fc.integer({ min: -10, max: 10 })),
  scope: sometimesJunk(scope),
  algorithm: sometimesJunk(algorithm),
  action: sometimesJunk(fc.constantFrom(...LIMIT_ACTIONS, 'block')),
  failure_mode: fc.constantFrom('fail_open', 'fail_closed', 'open'),
  enforcement_mode: fc.constantFrom('enforce', 'shadow', 'dry'),
  rollout_percent: sometimesJunk(fc.constantFrom(0, 50, 100, 101)),
  metadata: sometimesJunk(metadata),
  valid_from_unix: fc.constantFrom(0, 100, 200, -1),
  valid_to_unix: fc.constantFrom(0, 100, 150),
  source_ip_prefix: sometimesJunk(fc.record({ v4: sometimesJunk(fc.constantFrom(8, 24, 32, 33)), v6: fc.constantFrom(16, 56, 128, 129, 7), v5: fc.constant(1) }, { requiredKeys: [] })),
  budget: sometimesJunk(fc.constantFrom('regional', 'global')),
  layer: sometimesJunk(fc.constantFrom('platform', 'default', 'Platform', 'x'.repeat(33))),
  budget_shares: sometimesJunk(budgetShares),
  lease: sometimesJunk(lease),
  version: fc.constantFrom(1, 0),
  created_at: fc.constant('2024-01-01T00:00:00Z'),
  polcy_id: fc.constant('p'),
};
const policyBody = fc.record(policyFields, { requiredKeys: [] });

const quotaBody = fc.record(
  {
    id: sometimesJunk(fc.constantFrom('q1', '-bad')),
    policy_id: fc.constantFrom('q1', 'q2'),
    resource: sometimesJunk(fc.constantFrom('files', '')),
    algorithm: fc.constantFrom('quota', 'fixed_window'),
    config: sometimesJunk(
      fc.record({ quota: sometimesJunk(posInt), window_seconds: sometimesJunk(posInt), cost_per_request: posInt, sample_rate: fc.constantFrom(0.5, 2), burst: fc.constant(1) }, { requiredKeys: [] }),
    ),
    scope: sometimesJunk(scope),
    action_deny: sometimesJunk(fc.boolean()),
    metadata,
    budget: fc.constantFrom('regional', 'global'),
    budget_shares: budgetShares,
    layer: fc.constantFrom('platform', 'Bad'),
    lease,
    enabled: fc.boolean(),
  },
  { requiredKeys: ['config'] },
);

/** Bodies built to be valid, or one slip from it: each algorithm with the fields it takes. */
const goodDuration = fc.constantFrom('1s', '10s', '1m', '1h', '30d', '500ms', '1h30m', '60s');
const goodAlgorithm = fc.oneof(
  fc.record({ type: fc.constant('fixed_window'), limit: fc.integer({ min: 1, max: 1000 }), window: goodDuration }),
  fc.record({ type: fc.constant('fixed_window'), limit: fc.integer({ min: 1, max: 1000 }), calendar, timezone: fc.constantFrom('UTC', 'Europe/Berlin') }, { requiredKeys: ['type', 'limit', 'calendar'] }),
  fc.record({ type: fc.constant('sliding_window_log'), limit: fc.integer({ min: 1, max: 1000 }), window: goodDuration }),
  fc.record({ type: fc.constant('sliding_window_counter'), limit: fc.integer({ min: 1, max: 1000 }), window: fc.constantFrom('1m', '1h', '60s'), sub_window_count: fc.constantFrom(1, 2, 3, 6, 10, 60) }, { requiredKeys: ['type', 'limit', 'window'] }),
  fc.record({ type: fc.constantFrom('token_bucket', 'leaky_bucket'), limit: fc.integer({ min: 1, max: 1000 }), window: goodDuration, burst: fc.integer({ min: 1, max: 50 }) }, { requiredKeys: ['type', 'limit'] }),
  fc.record({ type: fc.constant('token_bucket'), limit: fc.integer({ min: 1, max: 1000 }), refill_rate: fc.double({ min: 0.01, max: 100, noNaN: true }) }),
  fc.record({ type: fc.constant('leaky_bucket'), limit: fc.integer({ min: 1, max: 1000 }), leak_rate: fc.double({ min: 0.01, max: 100, noNaN: true }) }),
  fc.record({ type: fc.constant('concurrency'), max_concurrency: fc.integer({ min: 1, max: 100 }), limit: fc.integer({ min: 1, max: 100 }), lease_ttl: fc.constantFrom('30s', 120, '2m') }, { requiredKeys: ['type'] }),
  fc.record({ type: fc.constant('quota'), limit: fc.integer({ min: 1, max: 1e6 }), quota_period: goodDuration }),
  fc.record({ type: fc.constant('quota'), limit: fc.integer({ min: 1, max: 1e6 }), window: goodDuration }),
  fc.record({ type: fc.constant('quota'), limit: fc.integer({ min: 1, max: 1e6 }), calendar, timezone: fc.constantFrom('UTC', 'Asia/Tokyo') }, { requiredKeys: ['type', 'limit', 'calendar'] }),
).chain((a) => fc.record({ cost_per_request: fc.integer({ min: 1, max: 5 }) }, { requiredKeys: [] }).map((c) => ({ ...a, ...c })));
const goodBody = fc
  .record(
    {
      policy_id: fc.constantFrom('p1', 'api.read:v2', 'Z_9-x'),
      name: fc.constantFrom('n', 'Read API'),
      description: fc.constant('d'),
      enabled: fc.boolean(),
      priority: fc.integer({ min: -10, max: 10 }),
      scope: fc.record({ org_id: fc.constantFrom('*', 'acme'), service: fc.constant('api'), signal_type: fc.constantFrom('*', 'http'), source_ip: fc.constant('*'), tags: fc.dictionary(fc.constantFrom('tier', 'plan'), fc.constantFrom('gold', '*'), { maxKeys: 2 }) }, { requiredKeys: [] }),
      algorithm: goodAlgorithm,
      action: fc.constantFrom('deny', 'delay', 'drop', 'downgrade', 'drop_low_priority'),
      failure_mode: fc.constantFrom('fail_open', 'fail_closed'),
      enforcement_mode: fc.constantFrom('enforce', 'shadow'),
      rollout_percent: fc.integer({ min: 0, max: 100 }),
      metadata: fc.record({ owner: fc.constant('team-a'), match_expr: fc.constantFrom('method == "GET"', 'true', 'size(tags) > 1'), min_severity: fc.constantFrom('warn', 'error') }, { requiredKeys: [] }),
      valid_from_unix: fc.constantFrom(0, 100),
      valid_to_unix: fc.constantFrom(0, 200),
      source_ip_prefix: fc.record({ v4: fc.constantFrom(8, 24, 32), v6: fc.constantFrom(16, 48, 128) }, { requiredKeys: [] }),
      budget: fc.constantFrom('regional', 'global'),
      layer: fc.constantFrom('platform', 'tenant_a', 'default'),
      budget_shares: fc.dictionary(fc.constantFrom('eu', 'us-east', '*'), fc.integer({ min: 1, max: 10 }), { minKeys: 1, maxKeys: 3 }),
      lease: fc.record({ max_units: fc.integer({ min: 1, max: 500 }), max_hold: fc.constantFrom('100ms', '1s', '60s') }, { requiredKeys: [] }),
      version: fc.constant(3),
    },
    { requiredKeys: ['policy_id', 'algorithm'] },
  )
  // Shares only under a global budget (mostly): otherwise nearly every body would be refused for them.
  .chain((body) => fc.nat(9).map((n) => (body.budget === 'global' || n === 0 ? body : (({ budget_shares: _, ...rest }) => rest)(body))))
  .chain((body) =>
    // One slip now and then: a field of the good body replaced by something of the noisy generator.
    fc.option(fc.constantFrom(...Object.keys(policyFields)).chain((key) => (policyFields as Record<string, fc.Arbitrary<unknown>>)[key]!.map((v) => [key, v] as const)), { freq: 2 }).map((slip) =>
      slip === null ? body : { ...body, [slip[0]]: slip[1] },
    ),
  );

/** A decoded JSON body: a Policy-shaped or quota-shaped object mostly, sometimes something else entirely. */
export const policyBodies: fc.Arbitrary<unknown> = fc
  .oneof({ weight: 8, arbitrary: goodBody }, { weight: 4, arbitrary: policyBody }, { weight: 2, arbitrary: quotaBody }, { weight: 1, arbitrary: junk })
  .map((body) => JSON.parse(JSON.stringify(body)) as unknown);

/** The validator's whole answer as one string: validity, every message, the normalised policy, for both modes. */
export function answerOf(validate: (raw: unknown, options?: { requireId?: boolean }) => unknown, body: unknown): string {
  return JSON.stringify([validate(body), validate(body, { requireId: false })]);
}

/** A short fingerprint of an answer (what the recorded answers file holds). */
export function digestOf(answer: string): string {
  return createHash('sha256').update(answer).digest('hex');
}
