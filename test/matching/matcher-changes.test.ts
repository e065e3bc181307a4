/**
 * A policy change is applied to the live matcher alone, never by a rebuild (issue 15, target 5): work
 * is bounded by counting (policies compiled, matcher objects built, sorted lists asked of the store),
 * not by time.
 */
import { expect } from 'chai';
import type { RequestContext } from '../../src/model/request-context.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { PolicyService } from '../../src/policy-service/policy-service.js';
import type { PolicyStore } from '../../src/policy-store/policy-store.js';
import type { Policy } from '../../src/policy/types.js';
import { makePolicy } from '../support/policies.js';
import { randomPrefix } from '../support/redis.js';
import { policyStoreBackends } from '../support/policy-store-backends.js';

const NOW = Date.UTC(2030, 0, 1);
const FIXED = { type: 'fixed_window', limit: 10, window: '1m' };

function winner(live: LiveMatcher, ctx: Partial<RequestContext>): string | undefined {
  return live.current().match({ quantity: 1, tags: {}, ...ctx }, 'rate', NOW).enforce?.compiled.policy.policy_id;
}

describe('LiveMatcher: one change among 100,000 policies', function () {
  this.timeout(60_000);
  const COUNT = 100_000;
  let live: LiveMatcher;

  before(() => {
    // One validated template, copied: validating 100,000 policies would only slow the test down.
    const template = makePolicy({ policy_id: 'template', scope: { org_id: 'o', user_id: '*' }, algorithm: FIXED });
    const policies: Policy[] = [];
    for (let i = 0; i < COUNT; i++) policies.push({ ...template, policy_id: `org-${i}`, scope: { org_id: `org-${i}`, user_id: '*' } });
    policies.push({ ...template, policy_id: 'everyone', scope: {} });
    live = new LiveMatcher(policies);
  });

  it('compiles exactly the changed policy, in the same matcher, for a create, an update and a delete', () => {
    const matcher = live.current();
    const compiled = matcher.stats.compiled;
    expect(compiled).to.equal(COUNT + 1);

    const created = makePolicy({ policy_id: 'new-org', scope: { org_id: 'new-org' }, priority: 5, algorithm: FIXED });
    live.apply('new-org', created);
    expect(live.current()).to.equal(matcher);
    expect(matcher.stats.compiled).to.equal(compiled + 1);
    expect(winner(live, { org_id: 'new-org' })).to.equal('new-org');

    const updated = { ...makePolicy({ policy_id: 'org-7', scope: { org_id: 'org-7', api_key: 'k' }, algorithm: FIXED }), version: 2 };
    live.apply('org-7', updated);
    expect(live.current()).to.equal(matcher);
    expect(matcher.stats.compiled).to.equal(compiled + 2);
    expect(winner(live, { org_id: 'org-7', user_id: 'u' })).to.equal('everyone');
    expect(winner(live, { org_id: 'org-7', api_key: 'k' })).to.equal('org-7');

    live.apply('org-9', undefined);
    expect(live.current()).to.equal(matcher);
    expect(matcher.stats.compiled).to.equal(compiled + 2);
    expect(winner(live, { org_id: 'org-9', user_id: 'u' })).to.equal('everyone');
    expect(winner(live, { org_id: 'org-10', user_id: 'u' })).to.equal('org-10');
    expect(matcher.size).to.equal(COUNT + 1);
    expect(matcher.stats.renumbered).to.equal(0);
  });

  it('a whole set in which few policies changed (a reload) is applied policy by policy; a new set is built', () => {
    const matcher = live.current();
    const compiled = matcher.stats.compiled;
    const policies = ['org-20', 'org-21', 'org-22', 'everyone'].map((id) => matcher.get(id)!.policy);
    const all: Policy[] = [];
    for (let i = 0; i < COUNT; i++) if (i !== 9) all.push(matcher.get(`org-${i}`)?.policy ?? policies[0]);
    // Every policy the matcher holds, as the same objects, except two: one changed, one gone.
    const set = all.filter((p) => p.policy_id !== 'org-21').map((p) => (p.policy_id === 'org-20' ? { ...p, priority: 9, version: 2 } : p));
    set.push(policies[3], matcher.get('new-org')!.policy);
    live.replace(set);
    expect(live.current()).to.equal(matcher);
    expect(matcher.stats.compiled).to.equal(compiled + 1);
    expect(matcher.get('org-21')).to.equal(undefined);
    expect(matcher.get('org-20')!.policy.priority).to.equal(9);
    expect(matcher.size).to.equal(set.length);

    live.replace(set.map((p) => ({ ...p })));
    expect(live.current()).to.not.equal(matcher);
    expect(live.current().size).to.equal(set.length);
  });

  it('keeps the compiled object of every policy that did not change', () => {
    const before = live.current().get('org-11');
    live.apply('org-12', { ...live.current().get('org-12')!.policy, priority: 3, version: 2 });
    expect(live.current().get('org-11')).to.equal(before);
  });
});

const BACKENDS = policyStoreBackends('rl-matcher-changes-');

for (const backend of BACKENDS) {
  describe(`PolicyService keeps the matcher up to date one policy at a time (${backend.name} store)`, function () {
    this.timeout(20_000);
    let store: PolicyStore;
    let cleanup: () => Promise<void>;
    let service: PolicyService;
    let live: LiveMatcher;
    let lists: number;

    beforeEach(async () => {
      ({ store, cleanup } = await backend.open());
      await store.seedIfEmpty(() => [makePolicy({ policy_id: 'seeded', scope: { org_id: 'acme' }, algorithm: FIXED })]);
      // Counts the whole sorted lists the service asks for: only at start-up and on a full reload.
      lists = 0;
      const list = store.list.bind(store);
      store.list = () => (lists++, list());
      live = new LiveMatcher();
      service = new PolicyService({ store, matcher: live });
    });
    afterEach(async () => {
      service?.close();
      await cleanup?.();
    });

    it('create, update, patch and delete each compile one policy, without a new matcher or a sorted list', async () => {
      expect(lists).to.equal(1);
      const matcher = live.current();
      const compiled = matcher.stats.compiled;
      expect(winner(live, { org_id: 'acme' })).to.equal('seeded');

      await service.create({ policy_id: 'users', scope: { org_id: 'acme', user_id: '*' }, algorithm: { type: 'fixed_window', limit: 5, window: '1m' } }, 'tester');
      expect(winner(live, { org_id: 'acme', user_id: 'u' })).to.equal('users');
      await service.replace('users', { scope: { org_id: 'other', user_id: '*' }, algorithm: { type: 'fixed_window', limit: 5, window: '1m' } }, 'tester');
      expect(winner(live, { org_id: 'acme', user_id: 'u' })).to.equal('seeded');
      await service.patch('seeded', { enabled: false }, 'tester');
      expect(winner(live, { org_id: 'acme' })).to.equal(undefined);
      await service.delete('users', 'tester');
      expect(winner(live, { org_id: 'other', user_id: 'u' })).to.equal(undefined);

      expect(live.current()).to.equal(matcher);
      // create + replace compile one each; disabling and deleting compile nothing.
      expect(matcher.stats.compiled).to.equal(compiled + 2);
      expect(matcher.size).to.equal(0);
      expect(lists).to.equal(1);
    });

    if (backend.name === 'redis') {
      it('a change made through another node arrives as one change too', async () => {
        const prefix = randomPrefix();
        const a = await backend.open(prefix);
        const b = await backend.open(prefix);
        const liveB = new LiveMatcher();
        const serviceA = new PolicyService({ store: a.store });
        const serviceB = new PolicyService({ store: b.store, matcher: liveB });
        try {
          const matcher = liveB.current();
          await serviceA.create({ policy_id: 'remote', scope: { org_id: 'r' }, algorithm: { type: 'fixed_window', limit: 5, window: '1m' } }, 'tester');
          for (let i = 0; i < 500 && winner(liveB, { org_id: 'r' }) === undefined; i++) await new Promise((resolve) => setTimeout(resolve, 10));
          expect(winner(liveB, { org_id: 'r' })).to.equal('remote');
          expect(liveB.current()).to.equal(matcher);
          expect(matcher.stats.compiled).to.equal(1);
        } finally {
          serviceA.close();
          serviceB.close();
          await a.cleanup();
          await b.cleanup();
        }
      });
    }
  });
}
