/**
 * `"lease"` on a policy (docs/distribution.md "Process leases below a region, and sidecars"): accepted on the five algorithms that support it,
 * returned as given (durations as strings), refused with 422 naming `lease` on sliding_window_log and
 * concurrency and naming lease.max_units / lease.max_hold when out of range; in memory mode it changes
 * nothing.
 */
import { expect } from 'chai';
import { validatePolicy } from '../../src/policy/validate.js';
import { PolicySchema } from '../../src/schema/policy.js';
import { servePolicyApi, type PolicyApi } from '../support/policy-api.js';
import { invalidFields } from '../support/policies.js';
import { postJson } from '../support/http.js';
import { Value } from '@sinclair/typebox/value';

const base = { policy_id: 'leased', scope: { service: 'api' }, algorithm: { type: 'fixed_window', limit: 10, window: '1s' } };

describe('policy field "lease"', () => {
  it('is accepted on fixed_window, sliding_window_counter, token_bucket, leaky_bucket and quota, and kept as given', () => {
    const algorithms = [
      { type: 'fixed_window', limit: 10, window: '1s' },
      { type: 'sliding_window_counter', limit: 10, window: '1s', sub_window_count: 4 },
      { type: 'token_bucket', limit: 10, window: '1s' },
      { type: 'leaky_bucket', limit: 10, window: '1s' },
      { type: 'quota', limit: 10, quota_period: '1h' },
    ];
    for (const algorithm of algorithms) {
      for (const lease of [{}, { max_units: 1 }, { max_hold: '100ms' }, { max_units: 1_000_000, max_hold: '60s' }, { max_units: 100, max_hold: '1s' }]) {
        const result = validatePolicy({ ...base, algorithm, lease });
        expect(result.ok, `${algorithm.type} ${JSON.stringify(lease)}`).to.equal(true);
        if (result.ok) expect(result.policy.lease).to.deep.equal(lease);
      }
    }
    const without = validatePolicy(base);
    expect(without.ok && 'lease' in without.policy).to.equal(false);
  });

  it('is refused naming "lease" on sliding_window_log and concurrency', () => {
    expect(invalidFields({ ...base, algorithm: { type: 'sliding_window_log', limit: 10, window: '1s' }, lease: {} })).to.deep.equal(['lease']);
    expect(invalidFields({ ...base, algorithm: { type: 'concurrency', max_concurrency: 3 }, lease: { max_units: 5 } })).to.deep.equal(['lease']);
    expect(invalidFields({ ...base, lease: 'yes' })).to.deep.equal(['lease']);
  });

  it('names lease.max_units and lease.max_hold when out of range or malformed', () => {
    for (const max_units of [0, 1_000_001, 1.5, '10', -1]) expect(invalidFields({ ...base, lease: { max_units } })).to.deep.equal(['lease.max_units']);
    for (const max_hold of ['99ms', '61s', '2m', 1000, 'soon', '']) expect(invalidFields({ ...base, lease: { max_hold } })).to.deep.equal(['lease.max_hold']);
    expect(invalidFields({ ...base, lease: { max_units: 0, max_hold: '1h' } })).to.deep.equal(['lease.max_units', 'lease.max_hold']);
    expect(invalidFields({ ...base, lease: { chunk: 5 } })).to.deep.equal(['lease.chunk']);
  });

  it('a stored policy with a lease matches the Policy schema', () => {
    const result = validatePolicy({ ...base, lease: { max_units: 500, max_hold: '2s' } });
    expect(result.ok).to.equal(true);
    const stored = { ...(result.ok ? result.policy : {}), version: 1, created_at: '2026-01-01T00:00:00Z', updated_at: '2026-01-01T00:00:00Z' };
    expect([...Value.Errors(PolicySchema, stored)]).to.deep.equal([]);
  });

  describe('over HTTP (memory mode)', () => {
    let api: PolicyApi;
    before(async () => {
      // A fixed clock: the 12 decisions below fall in one 1-second window however slowly they run.
      api = await servePolicyApi({ maxBodyBytes: 1 << 20, now: () => Date.UTC(2026, 0, 1, 12, 0, 0, 500) });
    });
    after(() => api.close());

    it('POST answers 422 naming the field, and 201 with the lease returned as given', async () => {
      const log = await postJson(`${api.server.url}/rl/v1/policies`, { ...base, algorithm: { type: 'sliding_window_log', limit: 1, window: '1s' }, lease: {} });
      expect(log.status).to.equal(422);
      expect(log.body.errors.map((e: { field: string }) => e.field)).to.deep.equal(['lease']);
      const units = await postJson(`${api.server.url}/rl/v1/policies`, { ...base, lease: { max_units: 0 } });
      expect(units.status).to.equal(422);
      expect(units.body.errors.map((e: { field: string }) => e.field)).to.deep.equal(['lease.max_units']);
      const hold = await postJson(`${api.server.url}/rl/v1/policies`, { ...base, lease: { max_hold: '90s' } });
      expect(hold.status).to.equal(422);
      expect(hold.body.errors.map((e: { field: string }) => e.field)).to.deep.equal(['lease.max_hold']);
      const created = await postJson(`${api.server.url}/rl/v1/policies`, { ...base, lease: { max_units: 50, max_hold: '1500ms' } });
      expect(created.status).to.equal(201);
      expect(created.body.lease).to.deep.equal({ max_units: 50, max_hold: '1500ms' });
      const read = await fetch(`${api.server.url}/rl/v1/policies/leased`);
      expect(((await read.json()) as { lease: unknown }).lease).to.deep.equal({ max_units: 50, max_hold: '1500ms' });
    });

    it('changes nothing in memory mode: exact answers, no metadata.lease', async () => {
      const answers = [];
      for (let i = 0; i < 12; i++) answers.push((await postJson(`${api.server.url}/rl/v1/check`, { service: 'api' })).body);
      expect(answers.filter((d) => d.allowed)).to.have.length(10);
      expect(answers.every((d) => d.matched_policy_id === 'leased' && d.metadata.lease === undefined)).to.equal(true);
    });
  });
});
