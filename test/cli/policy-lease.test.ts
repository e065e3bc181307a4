/** What `rl policies list|get` says of a policy's lease and budget, defaults filled in. */
import { expect } from 'chai';
import type { StoredPolicy } from '@rl/client';
import { budgetText, leaseComment, leaseText } from '../../src/cli/policy-lease.js';

const base = { policy_id: 'p', algorithm: { type: 'fixed_window', limit: 10, window: '1m' } } as unknown as StoredPolicy;

describe('rl: a policy\'s lease and budget', () => {
  it('no lease, no budget: no lease, the regional budget (the default)', () => {
    expect([leaseText(base), budgetText(base), leaseComment(base)]).to.deep.equal([undefined, 'regional', '# lease: none; budget: regional\n']);
  });

  it('a lease as given, its defaults filled in (max_units 100, max_hold 1s)', () => {
    expect(leaseText({ ...base, lease: { max_units: 7, max_hold: '250ms' } })).to.equal('7/250ms');
    expect(leaseText({ ...base, lease: { max_hold: '5s' } })).to.equal('100/5s');
    expect(leaseText({ ...base, lease: {} })).to.equal('100/1s');
  });

  it('a budget the server sends is shown as sent', () => {
    const global: StoredPolicy = { ...base, budget: 'global', lease: { max_units: 20 } };
    expect([leaseText(global), budgetText(global), leaseComment(global)]).to.deep.equal(['20/1s', 'global', '# lease: max_units/max_hold 20/1s; budget: global\n']);
    expect(budgetText({ ...base, budget: 'regional' })).to.equal('regional');
  });

  it('budget_shares beside a global budget, weights as given', () => {
    const shared: StoredPolicy = { ...base, budget: 'global', budget_shares: { eu: 3, us: 1, '*': 1 } };
    expect([budgetText(shared), leaseComment(shared)]).to.deep.equal(['global (shares eu=3 us=1 *=1)', '# lease: none; budget: global (shares eu=3 us=1 *=1)\n']);
  });
});
