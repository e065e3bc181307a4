/**
 * Explain (docs/matching.md "Asking which policy decides"): every reason a candidate does not cover a
 * request, layers and the winner order, nothing counted; and, for random policy sets and requests, the
 * winner explain names is the policy the decision matched, and the first covering enforce candidate of
 * its list (so the report mode agrees with the decision path candidate by candidate).
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { Explainer } from '../../src/decision/explainer.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { parseRequestContext } from '../../src/model/request-context.js';
import type { Policy } from '../../src/policy/types.js';
import type { Explanation } from '../../src/schema/explain.js';
import { makePolicy } from '../support/policies.js';

const T0 = Date.UTC(2030, 0, 1);
const window = { type: 'fixed_window', limit: 3, window: '1h' };

function setup(policies: Policy[]) {
  const matcher = new LiveMatcher(policies);
  const now = () => T0;
  const decisions = new DecisionService({ policies: matcher, counters: new MemoryCounterStore({ now, sweepIntervalMs: 0 }), keyPrefix: 't:', now, denyCache: false });
  const explainer = new Explainer(matcher, { list: () => policies }, now);
  return {
    explain: (body: Record<string, unknown>, decision: 'check' | 'acquire' = 'check') => explainer.explain(parseRequestContext(body), decision),
    check: (body: Record<string, unknown>) => decisions.check(parseRequestContext(body)),
  };
}

const byId = (e: Explanation, layer: string) => Object.fromEntries(e.layers.find((l) => l.layer === layer)!.candidates.map((c) => [c.policy_id, c]));

describe('explain: which policy of each layer decides, and why not the others', () => {
  const POLICIES = [
    makePolicy({ policy_id: 'per-user', scope: { org_id: 'acme', user_id: '*' }, algorithm: window }),
    makePolicy({ policy_id: 'other-org', scope: { org_id: 'globex', user_id: '*' }, algorithm: window }),
    makePolicy({ policy_id: 'needs-tag', scope: { org_id: 'acme', tags: { plan: 'pro' } }, algorithm: window }),
    makePolicy({ policy_id: 'wrong-method', scope: { org_id: 'acme', method: 'post' }, algorithm: window }),
    makePolicy({ policy_id: 'by-expr', scope: { org_id: 'acme' }, metadata: { match_expr: 'user_id == "nobody"' }, algorithm: window }),
    makePolicy({ policy_id: 'no-rollout', scope: { org_id: 'acme', user_id: '*' }, rollout_percent: 0, algorithm: window }),
    makePolicy({ policy_id: 'switched-off', scope: { org_id: 'acme', user_id: 'u1' }, enabled: false, algorithm: window }),
    makePolicy({ policy_id: 'later', scope: { org_id: 'acme' }, valid_from_unix: T0 / 1000 + 3600, algorithm: window }),
    makePolicy({ policy_id: 'slots', scope: { org_id: 'acme' }, algorithm: { type: 'concurrency', max_concurrency: 2 } }),
    makePolicy({ policy_id: 'shadowed', scope: { org_id: 'acme' }, enforcement_mode: 'shadow', algorithm: window }),
    makePolicy({ policy_id: 'everyone', algorithm: window }),
    makePolicy({ policy_id: 'org-total', layer: 'org', scope: { org_id: '*' }, algorithm: window }),
  ];
  const REQUEST = { org_id: 'acme', user_id: 'u1', method: 'GET', quantity: 1 };

  it('names every candidate with its reason, in winner order, layer by layer', () => {
    const e = setup(POLICIES).explain(REQUEST);
    expect(e.layers.map((l) => [l.layer, l.winner])).to.deep.equal([
      ['default', 'per-user'],
      ['org', 'org-total'],
    ]);
    const candidates = byId(e, 'default');
    const reasons = Object.fromEntries(Object.entries(candidates).map(([id, c]) => [id, c.covers ? 'covers' : c.why_not]));
    expect(reasons).to.deep.equal({
      'per-user': 'covers',
      'other-org': 'scope:org_id', // the pair it is indexed under: the decision never looks in its bucket
      'needs-tag': 'scope:tags.plan',
      'wrong-method': 'scope:method',
      'by-expr': 'match_expr',
      'no-rollout': 'rollout',
      'switched-off': 'disabled',
      later: 'not_valid_now',
      slots: 'algorithm',
      shadowed: 'covers',
      everyone: 'covers',
    });
    expect(candidates['per-user']).to.deep.equal({ policy_id: 'per-user', covers: true, specificity: 3, priority: 0, wins: true });
    expect(candidates['switched-off']).to.include({ specificity: 4, covers: false, wins: false });
    expect(candidates.shadowed.wins, 'the shadow winner').to.equal(true);
    expect(candidates.everyone).to.include({ specificity: 0, wins: false });
    // Winner order: specificity, then priority, then policy_id.
    const order = e.layers[0].candidates.map((c) => [c.specificity, c.priority, c.policy_id]);
    const sorted = [...order].sort((a, b) => (b[0] as number) - (a[0] as number) || (b[1] as number) - (a[1] as number) || String(a[2]).localeCompare(String(b[2])));
    expect(order).to.deep.equal(sorted);
    expect(byId(e, 'org')['org-total']).to.include({ covers: true, wins: true, specificity: 1 });
  });

  it('names the field or tag that refused, for every kind of scope miss', () => {
    const policies = [
      makePolicy({ policy_id: 'second-field', scope: { org_id: 'acme', endpoint: '/a', method: 'GET' }, algorithm: window }),
      makePolicy({ policy_id: 'wild-field', scope: { org_id: 'acme', api_key: '*' }, algorithm: window }),
      makePolicy({ policy_id: 'exact-tag', scope: { org_id: 'acme', tags: { tier: 'gold', plan: 'pro' } }, algorithm: window }),
      makePolicy({ policy_id: 'wild-tag', scope: { org_id: 'acme', tags: { region: '*' } }, algorithm: window }),
    ];
    const reasons = (body: Record<string, unknown>) =>
      Object.fromEntries(Object.entries(byId(setup(policies).explain(body), 'default')).map(([id, c]) => [id, c.covers ? 'covers' : c.why_not]));
    expect(reasons({ org_id: 'acme', endpoint: '/a', method: 'POST', tags: { tier: 'gold', plan: 'free' } })).to.deep.equal({
      'second-field': 'scope:method',
      'wild-field': 'scope:api_key',
      'exact-tag': 'scope:tags.plan',
      'wild-tag': 'scope:tags.region',
    });
    // No tags at all: a policy that names tags is refused on its first, in name order.
    expect(reasons({ org_id: 'acme', endpoint: '/a', method: 'GET', api_key: 'k' })).to.deep.equal({
      'second-field': 'covers',
      'wild-field': 'covers',
      'exact-tag': 'scope:tags.plan',
      'wild-tag': 'scope:tags.region',
    });
  });

  it('explains acquire against concurrency policies, and counts nothing', async () => {
    const s = setup(POLICIES);
    const e = s.explain({ org_id: 'acme', user_id: 'u1' }, 'acquire');
    expect(e.layers.find((l) => l.layer === 'default')!.winner).to.equal('slots');
    expect(byId(e, 'default')['per-user'].why_not).to.equal('algorithm');
    for (let i = 0; i < 5; i++) s.explain(REQUEST);
    const decision = await s.check({ ...REQUEST, quantity: 0 });
    expect(decision).to.include({ matched_policy_id: 'per-user', remaining: 3 });
  });

  it('a winner the caller may not read is not named, and its policy is not listed', () => {
    const matcher = new LiveMatcher(POLICIES);
    const readable = POLICIES.filter((p) => p.policy_id !== 'per-user' && p.policy_id !== 'org-total');
    const e = new Explainer(matcher, { list: () => readable }, () => T0).explain(parseRequestContext(REQUEST), 'check');
    expect(e.layers.map((l) => [l.layer, l.winner])).to.deep.equal([['default', null]]);
    expect(e.layers[0].candidates.map((c) => c.policy_id)).not.to.include('per-user');
  });

  describe('for random policies and requests (fast-check)', () => {
    const value = (values: string[]) => fc.option(fc.constantFrom('*', ...values), { nil: undefined });
    const policyArb = fc.record({
      org_id: value(['acme', 'globex']),
      user_id: value(['u1', 'u2']),
      method: value(['GET', 'post']),
      plan: value(['pro']),
      priority: fc.integer({ min: 0, max: 2 }),
      shadow: fc.boolean(),
      enabled: fc.nat(9).map((n) => n > 0),
      rollout: fc.constantFrom(100, 100, 50, 0),
      expr: fc.option(fc.constant('user_id != "u2"'), { nil: undefined }),
      valid: fc.constantFrom('always', 'always', 'past', 'future'),
      layer: fc.constantFrom('default', 'default', 'org', 'platform'),
    });
    const contextArb = fc.record({
      org_id: fc.option(fc.constantFrom('acme', 'globex'), { nil: undefined }),
      user_id: fc.option(fc.constantFrom('u1', 'u2', 'u3'), { nil: undefined }),
      method: fc.option(fc.constantFrom('get', 'POST'), { nil: undefined }),
      plan: fc.option(fc.constantFrom('pro', 'free'), { nil: undefined }),
    });

    type Drawn<A> = A extends fc.Arbitrary<infer T> ? T : never;

    function policiesOf(drawn: Drawn<typeof policyArb>[], oneLayer: boolean): Policy[] {
      return drawn.map((d, i) => {
        const scope: Record<string, unknown> = {};
        for (const field of ['org_id', 'user_id', 'method'] as const) if (d[field] !== undefined) scope[field] = d[field];
        if (d.plan !== undefined) scope.tags = { plan: d.plan };
        const validity = d.valid === 'past' ? { valid_to_unix: T0 / 1000 - 60 } : d.valid === 'future' ? { valid_from_unix: T0 / 1000 + 60 } : {};
        return makePolicy({
          policy_id: `p${i}`,
          scope,
          priority: d.priority,
          enabled: d.enabled,
          rollout_percent: d.rollout,
          enforcement_mode: d.shadow ? 'shadow' : 'enforce',
          ...(d.expr && { metadata: { match_expr: d.expr } }),
          ...(!oneLayer && d.layer !== 'default' && { layer: d.layer }),
          ...validity,
          algorithm: window,
        });
      });
    }

    const bodyOf = (c: Drawn<typeof contextArb>) => {
      const { plan, ...fields } = c;
      return { ...Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)), ...(plan && { tags: { plan } }), quantity: 0 };
    };

    /** Each layer's winner is its first covering enforce candidate, and the shadow winner its first covering shadow one. */
    function expectReportAgrees(e: Explanation, policies: Policy[]): void {
      const shadow = new Set(policies.filter((p) => p.enforcement_mode === 'shadow').map((p) => p.policy_id));
      for (const layer of e.layers) {
        const enforce = layer.candidates.find((c) => c.covers && !shadow.has(c.policy_id));
        expect(layer.winner, layer.layer).to.equal(enforce?.policy_id ?? null);
        const shadowWinner = layer.candidates.find((c) => c.covers && shadow.has(c.policy_id));
        expect(layer.candidates.filter((c) => c.wins).map((c) => c.policy_id).sort(), layer.layer).to.deep.equal([enforce?.policy_id, shadowWinner?.policy_id].filter((id) => id !== undefined).sort());
      }
    }

    it("one layer: explain's winner is the decision's matched policy", async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(policyArb, { maxLength: 12 }), fc.array(contextArb, { minLength: 1, maxLength: 6 }), async (drawn, contexts) => {
          const policies = policiesOf(drawn, true);
          const s = setup(policies);
          for (const context of contexts) {
            const e = s.explain(bodyOf(context));
            expectReportAgrees(e, policies);
            const decision = await s.check(bodyOf(context));
            const winner = e.layers[0]?.winner ?? null;
            if (winner !== null) expect(decision.matched_policy_id).to.equal(winner);
            // No enforce winner: no policy decides, or a shadow winner answers alone.
            else expect(decision.matched_policy_id === '' || decision.shadow_mode).to.equal(true);
          }
        }),
        { numRuns: 150 },
      );
    });

    it('several layers: every layer reports its own winner, and the decision answers for those layers', async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(policyArb, { maxLength: 14 }), contextArb, async (drawn, context) => {
          const policies = policiesOf(drawn, false);
          const s = setup(policies);
          const e = s.explain(bodyOf(context));
          expectReportAgrees(e, policies);
          expect(e.layers.map((l) => l.layer)).to.deep.equal([...new Set(policies.map((p) => p.layer ?? 'default'))].sort());
          const decision = await s.check(bodyOf(context));
          const winners = e.layers.map((l) => l.winner).filter((w) => w !== null);
          // Every layer's verdict, once the decision reports them (`layers`, with two or more layers deciding).
          if (decision.layers !== undefined) {
            expect(decision.layers.map((l) => l.policy_id)).to.deep.equal(winners);
          } else if (!decision.shadow_mode && decision.matched_policy_id !== '') {
            expect(winners).to.include(decision.matched_policy_id);
          }
        }),
        { numRuns: 150 },
      );
    });
  });
});
