import { expect } from 'chai';
import { Matcher, type MatchResult } from '../../src/matching/matcher.js';
import type { RequestContext } from '../../src/model/request-context.js';
import type { Policy } from '../../src/policy/types.js';
import { validatePolicy } from '../../src/policy/validate.js';

const NOW = 1_900_000_000_000;

function policy(fields: Record<string, unknown>): Policy {
  const r = validatePolicy({ algorithm: { type: 'fixed_window', limit: 10, window: '1m' }, ...fields });
  if (!r.ok) throw new Error(`invalid test policy: ${JSON.stringify(r.errors)}`);
  return { ...r.policy, version: 1, created_at: '2030-01-01T00:00:00.000Z', updated_at: '2030-01-01T00:00:00.000Z' };
}

const req = (fields: Record<string, string>): RequestContext => ({ ...fields, quantity: 1, tags: {} }) as RequestContext;

/** Each layer's winners as ids, in the order the matcher lists them. */
function winners(r: MatchResult): { layer: string; enforce?: string; shadow?: string }[] {
  return (r.layers ?? [r]).map((l) => ({
    layer: l.layer,
    ...(l.enforce && { enforce: l.enforce.compiled.policy.policy_id }),
    ...(l.shadow && { shadow: l.shadow.compiled.policy.policy_id }),
  }));
}

describe('Matcher layers', () => {
  const stack = [
    policy({ policy_id: 'user', scope: { org_id: 'acme', user_id: '*' } }),
    policy({ policy_id: 'org', scope: { org_id: '*' }, layer: 'org' }),
    policy({ policy_id: 'org-vip', scope: { org_id: 'vip' }, layer: 'org', priority: 5 }),
    policy({ policy_id: 'platform', layer: 'platform' }),
    policy({ policy_id: 'platform-shadow', scope: { org_id: '*' }, layer: 'platform', enforcement_mode: 'shadow' }),
  ];
  const m = Matcher.build(stack);

  it('every layer chooses its own winners, listed in byte order of layer names', () => {
    // Without layers "user" (more specific) would have beaten "org" and "platform".
    expect(winners(m.match(req({ org_id: 'acme', user_id: 'u' }), 'rate', NOW))).to.deep.equal([
      { layer: 'default', enforce: 'user' },
      { layer: 'org', enforce: 'org' },
      { layer: 'platform', enforce: 'platform', shadow: 'platform-shadow' },
    ]);
    expect(m.layerNames).to.deep.equal(['default', 'org', 'platform']);
  });

  it('the top-level winners are the first layer\'s that has any; layers appear only with two or more', () => {
    const r = m.match(req({ org_id: 'vip' }), 'rate', NOW);
    expect(r.layer).to.equal('org');
    expect(r.enforce!.compiled.policy.policy_id).to.equal('org-vip');
    expect(r.layers![0]).to.equal(r);
    expect(winners(r)).to.deep.equal([
      { layer: 'org', enforce: 'org-vip' },
      { layer: 'platform', enforce: 'platform', shadow: 'platform-shadow' },
    ]);
    const alone = m.match(req({}), 'rate', NOW);
    expect(alone.layers).to.equal(undefined);
    expect(winners(alone)).to.deep.equal([{ layer: 'platform', enforce: 'platform' }]);
  });

  it('a one-layer set answers as before layers: one object, no layers list', () => {
    const one = Matcher.build([policy({ policy_id: 'a', scope: { org_id: '*' } }), policy({ policy_id: 'b', scope: { org_id: 'x' } })]);
    const r = one.match(req({ org_id: 'x' }), 'rate', NOW);
    expect(Object.keys(r).sort()).to.deep.equal(['enforce', 'layer']);
    expect(r.enforce!.compiled.policy.policy_id).to.equal('b');
    expect(one.match(req({}), 'rate', NOW)).to.deep.equal({ layer: 'default' });
  });

  it('a change moves a policy between layers, and an emptied layer is dropped', () => {
    const live = Matcher.build(stack);
    live.apply('platform', policy({ policy_id: 'platform', layer: 'org', priority: -1 }));
    live.apply('platform-shadow', undefined);
    expect(live.layerNames).to.deep.equal(['default', 'org']);
    expect(winners(live.match(req({ org_id: 'acme', user_id: 'u' }), 'rate', NOW))).to.deep.equal([
      { layer: 'default', enforce: 'user' },
      { layer: 'org', enforce: 'org' },
    ]);
    live.apply('edge', policy({ policy_id: 'edge', layer: 'a-edge' }));
    expect(live.layerNames).to.deep.equal(['a-edge', 'default', 'org']);
    expect(winners(live.match(req({}), 'rate', NOW))).to.deep.equal([{ layer: 'a-edge', enforce: 'edge' }, { layer: 'org', enforce: 'platform' }]);
  });
});
