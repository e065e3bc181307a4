/**
 * `budget_shares` on a policy: accepted only beside `budget: "global"` on a window-shaped algorithm (fixed
 * and sliding windows, quota), with
 * region names (RL_REGION syntax) or `*` mapped to positive integer weights, kept as given; anything else
 * is a 422 naming `budget_shares`. Compiled, region r is guaranteed floor(limit × w_r / W) and the rest is
 * the common share.
 */
import { expect } from 'chai';
import { Value } from '@sinclair/typebox/value';
import type { CounterSpec } from '../../src/counters/counter-spec.js';
import { policySpecOf } from '../../src/matching/counter-spec-of.js';
import { compileShares } from '../../src/policy/budget-shares.js';
import { validatePolicy } from '../../src/policy/validate.js';
import { PolicySchema } from '../../src/schema/policy.js';
import { postJson } from '../support/http.js';
import { servePolicyApi, type PolicyApi } from '../support/policy-api.js';
import { invalidFields } from '../support/policies.js';

const base = { policy_id: 'shared', scope: { service: 'api' }, budget: 'global', algorithm: { type: 'fixed_window', limit: 10, window: '1m' } };

describe('policy field "budget_shares"', () => {
  it('is accepted beside budget "global" on fixed and sliding windows and quota, and kept as given', () => {
    const windows = [
      base.algorithm,
      { type: 'quota', limit: 10, quota_period: '1d' },
      { type: 'sliding_window_counter', limit: 10, window: '1m', sub_window_count: 4 },
      { type: 'sliding_window_log', limit: 10, window: '1m' },
    ];
    for (const algorithm of windows) {
      for (const budget_shares of [{ eu: 3, us: 1, '*': 1 }, { 'eu-west-1': 1 }, { '*': 2 }, { a: 1_000_000 }]) {
        const result = validatePolicy({ ...base, algorithm, budget_shares });
        expect(result.ok, `${algorithm.type} ${JSON.stringify(budget_shares)}`).to.equal(true);
        if (result.ok) expect(result.policy.budget_shares).to.deep.equal(budget_shares);
      }
    }
    expect('budget_shares' in (validatePolicy(base) as { policy: object }).policy).to.equal(false);
    const stored = { ...(validatePolicy({ ...base, budget_shares: { eu: 3, '*': 1 } }) as { policy: object }).policy, version: 1, created_at: '2026-01-01T00:00:00Z', updated_at: '2026-01-01T00:00:00Z' };
    expect([...Value.Errors(PolicySchema, stored)]).to.deep.equal([]);
  });

  it('is refused naming "budget_shares" without budget "global", on bucket-shaped and other algorithms, and when malformed', () => {
    const shares = { eu: 1 };
    expect(invalidFields({ ...base, budget: undefined, budget_shares: shares })).to.deep.equal(['budget_shares']);
    expect(invalidFields({ ...base, budget: 'regional', budget_shares: shares })).to.deep.equal(['budget_shares']);
    for (const algorithm of [
      { type: 'token_bucket', limit: 10, window: '1s' },
      { type: 'leaky_bucket', limit: 10, window: '1s' },
      { type: 'concurrency', max_concurrency: 2 },
    ]) {
      expect(invalidFields({ ...base, algorithm, budget_shares: shares }), algorithm.type).to.deep.equal(['budget_shares']);
    }
    for (const budget_shares of [{}, [1], 'eu', 3, { EU: 1 }, { 'e u': 1 }, { ['x'.repeat(33)]: 1 }, { '**': 1 }, { eu: 0 }, { eu: -1 }, { eu: 1.5 }, { eu: '1' }, { eu: 1_000_001 }]) {
      expect(invalidFields({ ...base, budget_shares }), JSON.stringify(budget_shares)).to.deep.equal(['budget_shares']);
    }
    expect(validatePolicy({ ...base, budget_shares: { eu: 0 } })).to.have.nested.property('errors[0].message').that.matches(/integers from 1/);
    expect(invalidFields({ ...base, budget_shares: null })).to.deep.equal([]);
  });

  it('compiles to floor(limit × w / W) per named region, the rest common', () => {
    expect(compileShares({ eu: 3, us: 1, '*': 1 }, 10)).to.deep.equal({ guaranteed: { eu: 6, us: 2 }, common: 2 });
    // 100 / 3 each: 33 and 33, the 34 left common (rounding joins it).
    expect(compileShares({ eu: 1, us: 1, ap: 1 }, 100)).to.deep.equal({ guaranteed: { eu: 33, us: 33, ap: 33 }, common: 1 });
    expect(compileShares({ '*': 5 }, 7)).to.deep.equal({ guaranteed: {}, common: 7 });
    // Exact where limit × weight passes 2^53.
    expect(compileShares({ eu: 1_000_000, us: 1_000_000 }, Number.MAX_SAFE_INTEGER)).to.deep.equal({ guaranteed: { eu: 4_503_599_627_370_495, us: 4_503_599_627_370_495 }, common: 1 });
    const spec = policySpecOf({ policy_id: 'p', budget: 'global', budget_shares: { eu: 1, '*': 1 }, algorithm: { type: 'quota', limit: 9, quota_period: '1d' } }) as CounterSpec & { global: { shares: unknown } };
    expect(spec.global.shares).to.deep.equal({ guaranteed: { eu: 4 }, common: 5 });
  });

  describe('over HTTP (memory mode)', () => {
    let api: PolicyApi;
    before(async () => {
      api = await servePolicyApi({ maxBodyBytes: 1 << 20 });
    });
    after(() => api.close());

    it('POST answers 422 naming the field, 201 with the shares as given; a PATCH dropping the global budget is a 422', async () => {
      const bucket = await postJson(`${api.server.url}/rl/v1/policies`, { ...base, algorithm: { type: 'token_bucket', limit: 10, window: '1s' }, budget_shares: { eu: 1 } });
      expect([bucket.status, bucket.body.errors.map((e: { field: string }) => e.field)]).to.deep.equal([422, ['budget_shares']]);
      const created = await postJson(`${api.server.url}/rl/v1/policies`, { ...base, budget_shares: { eu: 3, us: 1, '*': 1 } });
      expect([created.status, created.body.budget_shares]).to.deep.equal([201, { eu: 3, us: 1, '*': 1 }]);
      const patch = await fetch(`${api.server.url}/rl/v1/policies/shared`, { method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: JSON.stringify({ budget: null }) });
      const body = (await patch.json()) as { errors: { field: string }[] };
      expect([patch.status, body.errors.map((e) => e.field)]).to.deep.equal([422, ['budget_shares']]);
    });
  });
});
