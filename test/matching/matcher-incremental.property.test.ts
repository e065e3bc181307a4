/**
 * The incremental matcher is the full rebuild (issue 15, target 5): random sequences of creates,
 * updates (scope, priority, enabled, mode, rollout, match_expr, validity window, family) and deletes
 * are applied to one Matcher, one at a time with `apply` or a few at once with `applyAll` (a reload),
 * and after every step that matcher must answer
 * every random request exactly as `Matcher.build` of the same policy set does: the same enforce and
 * shadow policies, the same identities, the same size and skipped policies.
 *
 * Environment knobs: MATCHER_RUNS (number of sequences), MATCHER_SEED (replay a reported seed).
 */
import { expect } from 'chai';
import fc from 'fast-check';
import type { RequestContext } from '../../src/model/request-context.js';
import { Matcher, type LayerMatch, type MatchResult, type PolicyFamily } from '../../src/matching/matcher.js';
import type { Policy } from '../../src/policy/types.js';
import { validatePolicy } from '../../src/policy/validate.js';

const NOW = 1_900_000_000_000;
const NOW_S = NOW / 1000;
const RUNS = Number(process.env.MATCHER_RUNS ?? 150);
const SEED = process.env.MATCHER_SEED === undefined ? undefined : Number(process.env.MATCHER_SEED);

/** Few ids, values and priorities: changes collide with each other and ties are common. */
const IDS = ['p0', 'p1', 'p2', 'p3', 'p4', 'p5', 'p6', 'p7', 'p8', 'p9'];
const absent = fc.constant(undefined);
const exactOrStar = (values: string[]) => fc.oneof(absent, absent, fc.constantFrom(...values, '*'));

const scopeArb = fc.record({
  org_id: exactOrStar(['a', 'b']),
  user_id: exactOrStar(['x', 'y']),
  api_key: exactOrStar(['k']),
  tags: fc.option(fc.record({ env: exactOrStar(['prod', 'dev']), team: exactOrStar(['core']) }), { nil: undefined }),
});

/** Valid expressions, and one that does not compile (a policy stored by an older version: it is skipped). */
const EXPRS = ['quantity >= 2', 'tags["env"] == "prod"', 'true', 'nope =='];

const policyArb = fc.record({
  scope: scopeArb,
  priority: fc.constantFrom(0, 0, 1, 5, -3),
  enabled: fc.constantFrom(true, true, true, false),
  shadow: fc.boolean(),
  rollout: fc.constantFrom(100, 100, 50, 0, 1),
  expr: fc.option(fc.constantFrom(...EXPRS), { nil: undefined, freq: 3 }),
  window: fc.constantFrom('none', 'none', 'current', 'future', 'past'),
  concurrency: fc.boolean(),
  layer: fc.constantFrom(undefined, undefined, 'default', 'org', 'platform'),
});
type PolicyDraw = typeof policyArb extends fc.Arbitrary<infer T> ? T : never;

let versionSeq = 0;

function policyOf(id: string, d: PolicyDraw): Policy {
  const scope: Record<string, unknown> = {};
  for (const field of ['org_id', 'user_id', 'api_key'] as const) if (d.scope[field] !== undefined) scope[field] = d.scope[field];
  if (d.scope.tags) {
    const tags: Record<string, string> = {};
    for (const [k, v] of Object.entries(d.scope.tags)) if (v !== undefined) tags[k] = v;
    scope.tags = tags;
  }
  const windows = { none: [0, 0], current: [NOW_S - 10, NOW_S + 10], future: [NOW_S + 5, 0], past: [0, NOW_S - 5] }[d.window];
  const r = validatePolicy({
    policy_id: id,
    scope,
    priority: d.priority,
    enabled: d.enabled,
    enforcement_mode: d.shadow ? 'shadow' : 'enforce',
    rollout_percent: d.rollout,
    valid_from_unix: windows[0],
    valid_to_unix: windows[1],
    algorithm: d.concurrency ? { type: 'concurrency', max_concurrency: 2 } : { type: 'fixed_window', limit: 10, window: '1m' },
    ...(d.layer !== undefined && { layer: d.layer }),
  });
  if (!r.ok) throw new Error(`invalid test policy: ${JSON.stringify(r.errors)}`);
  versionSeq++;
  const policy: Policy = { ...r.policy, version: versionSeq, created_at: '2030-01-01T00:00:00.000Z', updated_at: '2030-01-01T00:00:00.000Z' };
  // Set after validation, which would refuse the expression that does not compile.
  if (d.expr !== undefined) policy.metadata = { match_expr: d.expr };
  return policy;
}

const changeArb = fc.oneof(
  { weight: 4, arbitrary: fc.record({ id: fc.constantFrom(...IDS), policy: policyArb }) },
  { weight: 1, arbitrary: fc.record({ id: fc.constantFrom(...IDS), policy: fc.constant(undefined) }) },
);
/** One change applied alone, or a few at once seen as a whole set (a store's reload: `applyAll`). */
const stepArb = fc.oneof(
  { weight: 3, arbitrary: changeArb.map((change) => [change]) },
  { weight: 1, arbitrary: fc.array(changeArb, { minLength: 0, maxLength: 4 }).map((changes) => ({ reload: changes })) },
);

const requestArb: fc.Arbitrary<RequestContext> = fc
  .record({
    org_id: fc.constantFrom(undefined, 'a', 'b', ''),
    user_id: fc.constantFrom(undefined, 'x', 'y', 'z'),
    api_key: fc.constantFrom(undefined, 'k', 'j'),
    env: fc.constantFrom(undefined, 'prod', 'dev'),
    team: fc.constantFrom(undefined, 'core', 'edge'),
    quantity: fc.constantFrom(1, 3),
  })
  .map(({ env, team, quantity, ...fields }) => {
    const ctx: RequestContext = { quantity, tags: {} };
    for (const [k, v] of Object.entries(fields)) if (v !== undefined) (ctx as unknown as Record<string, string>)[k] = v;
    if (env !== undefined) ctx.tags!.env = env;
    if (team !== undefined) ctx.tags!.team = team;
    return ctx;
  });

/** What a match decides, in comparable form. */
function outcome(r: MatchResult): unknown {
  return (r.layers ?? [r]).map((l: LayerMatch) => ({
    layer: l.layer,
    enforce: l.enforce && { id: l.enforce.compiled.policy.policy_id, identity: l.enforce.identity },
    shadow: l.shadow && { id: l.shadow.compiled.policy.policy_id, identity: l.shadow.identity },
  }));
}

function expectSame(incremental: Matcher, rebuilt: Matcher, requests: RequestContext[], current: Map<string, Policy>): void {
  expect(incremental.size).to.equal(rebuilt.size);
  const skippedIds = (m: Matcher) => m.skipped.map((s) => s.policy_id).sort();
  expect(skippedIds(incremental)).to.deep.equal(skippedIds(rebuilt));
  for (const id of IDS) expect(incremental.get(id)?.policy).to.equal(rebuilt.get(id)?.policy, id);
  for (const ctx of requests) {
    for (const family of ['rate', 'concurrency'] as PolicyFamily[]) {
      for (const now of [NOW, NOW + 7_000, NOW - 20_000]) {
        expect(outcome(incremental.match(ctx, family, now))).to.deep.equal(outcome(rebuilt.match(ctx, family, now)), JSON.stringify({ ctx, family, now, policies: [...current.values()] }));
      }
    }
  }
}

describe('Matcher: incremental changes equal a full rebuild', () => {
  it('after every step of random change sequences, for random requests', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ id: fc.constantFrom(...IDS), policy: policyArb }), { maxLength: 8 }),
        fc.array(stepArb, { minLength: 1, maxLength: 25 }),
        fc.array(requestArb, { minLength: 4, maxLength: 12 }),
        (initial, steps, requests) => {
          const current = new Map<string, Policy>();
          for (const { id, policy } of initial) current.set(id, policyOf(id, policy));
          const incremental = Matcher.build([...current.values()]);
          expectSame(incremental, Matcher.build([...current.values()]), requests, current);
          for (const step of steps) {
            const changes = Array.isArray(step) ? step : step.reload;
            for (const change of changes) {
              const policy = change.policy === undefined ? undefined : policyOf(change.id, change.policy);
              if (policy === undefined) current.delete(change.id);
              else current.set(change.id, policy);
              if (Array.isArray(step)) incremental.apply(change.id, policy);
            }
            // Unchanged policies keep their objects, as a store's reload keeps them.
            if (!Array.isArray(step)) expect(incremental.applyAll([...current.values()], 16)).to.equal(true);
            expectSame(incremental, Matcher.build([...current.values()]), requests, current);
          }
        },
      ),
      { numRuns: RUNS, seed: SEED },
    );
  });

  it('stays equal when inserts exhaust the room between two ranks and every rank is renumbered', () => {
    const plain = (id: string): Policy => policyOf(id, { scope: { org_id: 'a', user_id: undefined, api_key: undefined, tags: undefined }, priority: 0, enabled: true, shadow: false, rollout: 100, expr: undefined, window: 'none', concurrency: false, layer: undefined });
    const current = new Map<string, Policy>([['a', plain('a')], ['b', plain('b')]]);
    const incremental = Matcher.build([...current.values()]);
    // Each id sorts just after the previous one and before "b": every insert halves the same gap.
    for (let k = 1; k <= 80; k++) {
      const id = `a${'-'.repeat(k)}`;
      current.set(id, plain(id));
      incremental.apply(id, current.get(id));
    }
    expect(incremental.stats.renumbered).to.be.greaterThan(0);
    // The winner is the smallest id of equal rank: take them away one by one, in id order, and the
    // winner must move along the order exactly as a rebuild's does.
    const request: RequestContext = { quantity: 1, org_id: 'a', tags: {} };
    for (const id of [...current.keys()].sort()) {
      const rebuilt = Matcher.build([...current.values()]);
      expect(outcome(incremental.match(request, 'rate', NOW))).to.deep.equal(outcome(rebuilt.match(request, 'rate', NOW)));
      expect(incremental.match(request, 'rate', NOW).enforce?.compiled.policy.policy_id).to.equal(id);
      incremental.apply(id, undefined);
      current.delete(id);
    }
    expect(incremental.size).to.equal(0);
  });
});
