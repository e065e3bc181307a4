import { expect } from 'chai';
import { DeniedIdentities, EVERYONE, bothRecorders, wildcardNames } from '../../src/analytics/denied-identities.js';
import type { DecisionEvent } from '../../src/decision/decision-service.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import type { Policy } from '../../src/policy/types.js';
import { allowedBy, deniedBy, event, shadowOnly } from '../support/decision-events.js';
import { makePolicy } from '../support/policies.js';

/** The live compiled policies the recorder reads, as the server's; `replace` swaps the set. */
const source = (policies: Policy[]) => new LiveMatcher(policies);
const compiled = (policy: Policy) => new LiveMatcher([policy]).current().get(policy.policy_id)!;

const perUser = makePolicy({ policy_id: 'per-user', scope: { org_id: 'acme', user_id: '*' }, algorithm: { type: 'fixed_window', limit: 1, window: '1m' } });
const perIpAndPlan = makePolicy({
  policy_id: 'per-ip-plan',
  scope: { source_ip: '*', tags: { plan: '*', region: 'eu' } },
  algorithm: { type: 'fixed_window', limit: 1, window: '1m' },
});
const global = makePolicy({ policy_id: 'global', algorithm: { type: 'fixed_window', limit: 1, window: '1m' } });

describe('DeniedIdentities', () => {
  it("names an identity by the policy's * scope fields and * tags, in sorted order", () => {
    expect(wildcardNames(compiled(perUser))).to.deep.equal(['user_id']);
    expect(wildcardNames(compiled(perIpAndPlan))).to.deep.equal(['source_ip', 'tags.plan']);
    expect(wildcardNames(compiled(global))).to.deep.equal([]);
    const denied = new DeniedIdentities(source([perUser, perIpAndPlan, global]));
    denied.record(deniedBy('per-user', { org_id: 'acme', user_id: 'carol' }));
    denied.record(deniedBy('per-ip-plan', { source_ip: '10.0.0.1', tags: { plan: 'free', region: 'eu' } }));
    denied.record(deniedBy('global', { user_id: 'dave' }));
    expect(denied.top(10).map((d) => [d.policy_id, d.identity]).sort()).to.deep.equal([
      ['global', EVERYONE],
      ['per-ip-plan', 'source_ip=10.0.0.1, tags.plan=free'],
      ['per-user', 'user_id=carol'],
    ]);
  });

  it('counts denials only: not allowed decisions, shadow-only answers, unmatched ones or a release without a lease', () => {
    const denied = new DeniedIdentities(source([perUser]));
    const ctx = { org_id: 'acme', user_id: 'carol' };
    denied.record(allowedBy('per-user', ctx));
    denied.record(shadowOnly('per-user', true, ctx));
    denied.record(event({ ctx, decision: { allowed: false, reason: 'limit_exceeded' } }));
    denied.record(event({ operation: 'release', ctx, decision: { matched_policy_id: 'per-user', allowed: false, reason: 'lease_not_found' } }));
    expect(denied.top(10)).to.deep.equal([]);
    for (let i = 0; i < 3; i++) denied.record(deniedBy('per-user', ctx));
    denied.record(deniedBy('per-user', { ...ctx, user_id: 'erin' }));
    expect(denied.top(10)).to.deep.equal([
      { policy_id: 'per-user', identity: 'user_id=carol', count: 3, error: 0 },
      { policy_id: 'per-user', identity: 'user_id=erin', count: 1, error: 0 },
    ]);
  });

  it('follows a changed scope from the next policy change on', () => {
    const policies = source([perUser]);
    const denied = new DeniedIdentities(policies);
    denied.record(deniedBy('per-user', { org_id: 'acme', user_id: 'carol', client_id: 'web' }));
    policies.replace([{ ...perUser, scope: { org_id: 'acme', client_id: '*' } }]);
    denied.record(deniedBy('per-user', { org_id: 'acme', user_id: 'carol', client_id: 'web' }));
    expect(denied.top(10).map((d) => d.identity).sort()).to.deep.equal(['client_id=web', 'user_id=carol']);
  });

  it('stays within its capacity and states how much a count may overstate', () => {
    const denied = new DeniedIdentities(source([perUser]), 4);
    // 40 denials of one user among 90: more than 90 / 4, so it is guaranteed to be reported.
    for (let i = 0; i < 50; i++) {
      denied.record(deniedBy('per-user', { org_id: 'acme', user_id: `cold-${i}` }));
      if (i < 40) denied.record(deniedBy('per-user', { org_id: 'acme', user_id: 'hot' }));
    }
    const top = denied.top(100);
    expect(top.length).to.equal(4);
    const hot = top.find((d) => d.identity === 'user_id=hot')!;
    expect(hot.count - hot.error).to.be.at.most(40);
    expect(hot.count).to.be.at.least(40);
    // Every other identity was denied once: its count less its error bound never exceeds that.
    for (const entry of top.filter((d) => d !== hot)) expect(entry.count - entry.error).to.be.at.most(1);
  });

  it('bothRecorders feeds both recorders every event, in order', () => {
    const seen: string[] = [];
    const recorder = bothRecorders({ record: (e: DecisionEvent) => seen.push(`a:${e.operation}`) }, { record: (e: DecisionEvent) => seen.push(`b:${e.operation}`) });
    recorder.record(event({ operation: 'acquire' }));
    expect(seen).to.deep.equal(['a:acquire', 'b:acquire']);
  });
});
