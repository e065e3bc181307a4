import { expect } from 'chai';
import fc from 'fast-check';
import { tieWarnings } from '../../src/policy-service/policy-ties.js';
import { TieIndex } from '../../src/policy-service/tie-index.js';
import { PolicyService } from '../../src/policy-service/policy-service.js';
import { FilePolicyStore } from '../../src/policy-store/file-policy-store.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PolicyChangeEvent, PolicyStore } from '../../src/policy-store/policy-store.js';
import type { Policy } from '../../src/policy/types.js';
import { makePolicy } from '../support/policies.js';

const value = fc.constantFrom(undefined, undefined, 'a', 'b', '*');
const definition = fc.record({
  id: fc.constantFrom(...Array.from({ length: 12 }, (_, i) => `p${i}`)),
  org: value,
  user: value,
  endpoint: value,
  method: fc.constantFrom(undefined, 'get', 'GET', 'post', '*'),
  env: value,
  // Mostly alike, so that ties are common.
  expr: fc.constantFrom(false, false, false, true),
  priority: fc.constantFrom(0, 0, 1),
  layer: fc.constantFrom(undefined, undefined, 'platform'),
  shadow: fc.constantFrom(false, false, false, true),
  enabled: fc.constantFrom(true, true, true, false),
});

function policyOf(d: Record<string, unknown>): Policy {
  const scope: Record<string, unknown> = {};
  if (d.org !== undefined) scope.org_id = d.org;
  if (d.user !== undefined) scope.user_id = d.user;
  if (d.endpoint !== undefined) scope.endpoint = d.endpoint === '*' ? '*' : `/${d.endpoint}`;
  if (d.method !== undefined) scope.method = d.method;
  if (d.env !== undefined) scope.tags = { env: d.env };
  return makePolicy({
    policy_id: d.id,
    scope,
    priority: d.priority,
    enabled: d.enabled,
    enforcement_mode: d.shadow ? 'shadow' : 'enforce',
    ...(d.layer ? { layer: d.layer } : {}),
    ...(d.expr ? { metadata: { match_expr: 'quantity >= 1' } } : {}),
    algorithm: { type: 'fixed_window', limit: 10, window: '1m' },
  });
}

/** Just what TieIndex reads of a store. */
function storeOver(current: Map<string, Policy>): PolicyStore {
  return { get: (id: string) => current.get(id), list: () => [...current.values()] } as unknown as PolicyStore;
}

describe('TieIndex: the rivals it finds give the warnings a walk over every policy gives', () => {
  it('property: after random creates, replacements and deletes, every policy is warned as against the whole set', () => {
    let warned = 0;
    fc.assert(
      fc.property(fc.array(definition, { minLength: 1, maxLength: 16 }), fc.array(definition, { maxLength: 10 }), fc.array(fc.constantFrom('p0', 'p3', 'p6'), { maxLength: 3 }), (initial, changes, deletes) => {
        const current = new Map<string, Policy>();
        for (const d of initial) current.set(d.id, policyOf(d));
        const index = new TieIndex(storeOver(current), [...current.values()]);
        const event = (policy_id: string, change: PolicyChangeEvent['change']): PolicyChangeEvent => ({ policy_id, change, version: 1, revision: 1, local: true });
        for (const d of changes) {
          const existed = current.has(d.id);
          current.set(d.id, policyOf(d));
          index.changed(event(d.id, existed ? 'updated' : 'created'));
        }
        for (const id of deletes) {
          if (!current.delete(id)) continue;
          index.changed(event(id, 'deleted'));
        }
        const all = [...current.values()].sort((a, b) => (a.policy_id < b.policy_id ? -1 : 1));
        for (const policy of all) {
          const expected = tieWarnings(policy, all, 0);
          expect(tieWarnings(policy, index.rivals(policy), 0), policy.policy_id).to.deep.equal(expected);
          if (expected.length > 0) warned++;
        }
      }),
      { numRuns: 500 },
    );
    expect(warned, 'policies that were warned at all').to.be.greaterThan(50);
  });

  it('a reload rebuilds it from the store', () => {
    const current = new Map<string, Policy>();
    const index = new TieIndex(storeOver(current), []);
    const a = policyOf({ id: 'p0', user: 'a', priority: 0, enabled: true, shadow: false, expr: false });
    const b = policyOf({ id: 'p1', org: 'b', priority: 0, enabled: true, shadow: false, expr: false });
    current.set('p0', a).set('p1', b);
    index.changed({ policy_id: '', change: 'reloaded', version: 0, revision: 2, local: false });
    expect(index.rivals(a).map((p) => p.policy_id)).to.deep.equal(['p1']);
    expect(tieWarnings(a, index.rivals(a), 0)).to.have.length(1);
  });

  it('a write and its warnings read no whole policy list (at 100,000 policies that walk stalled decisions)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-tie-index-'));
    const store = await FilePolicyStore.open(dir);
    try {
      const service = new PolicyService({ store });
      const window = { type: 'fixed_window', limit: 5, window: '1m' };
      await service.create({ policy_id: 'per-user', scope: { endpoint: '/api/things', user_id: '*', method: '*' }, algorithm: window }, 'tester');
      for (let i = 0; i < 50; i++) await service.create({ policy_id: `user-${i}`, scope: { user_id: `u${i}` }, algorithm: window }, 'tester');
      let listed = 0;
      const list = store.list.bind(store);
      store.list = () => {
        listed++;
        return list();
      };
      const vip = await service.create({ policy_id: 'vip-user', scope: { endpoint: '/api/things', user_id: 'vip' }, algorithm: window }, 'tester');
      const warnings = service.warningsFor(vip);
      expect(warnings.map((w) => w.policy_id)).to.deep.equal(['per-user']);
      expect(listed, 'whole-list reads during one write and its warnings').to.equal(0);
      service.close();
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
