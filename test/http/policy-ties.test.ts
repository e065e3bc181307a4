/**
 * Ties warned (docs/matching.md "Ties"): a create, replace or patch whose policy ties another of its layer
 * on specificity and priority, where both could cover one request, is accepted and answers `warnings`
 * naming the other policy and the winner; anything that tells the two apart (a priority, a scope that
 * cannot overlap, another mode or family, a disabled policy) answers none. The decision agrees with what
 * the warning says wins.
 */
import { expect } from 'chai';
import { setLogLevel } from '../../src/util/log.js';
import { parseBody } from '../support/http.js';
import { servePolicyApi, type PolicyApi } from '../support/policy-api.js';

const window = { type: 'fixed_window', limit: 5, window: '1m' };
/** The general per-user limit: endpoint 2 points, user_id `*` 1, method `*` 1 = 4. */
const PER_USER = { policy_id: 'per-user', scope: { endpoint: '/api/things', user_id: '*', method: '*' }, algorithm: window };
/** The override the issue lost: endpoint 2, user_id exact 2 = 4, the same specificity; "per-user" < "vip-user". */
const VIP = { policy_id: 'vip-user', scope: { endpoint: '/api/things', user_id: 'vip' }, algorithm: { ...window, limit: 50 } };

describe('HTTP policy writes: ties warned', function () {
  this.timeout(30_000);
  let api: PolicyApi;

  before(() => setLogLevel('silent'));
  after(() => setLogLevel('info'));
  beforeEach(async () => {
    api = await servePolicyApi({ maxBodyBytes: 64 * 1024 });
  });
  afterEach(() => api.close());

  async function call(method: string, path: string, body?: unknown) {
    const response = await fetch(`${api.server.url}/rl/v1${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: await parseBody(response) };
  }

  it('the user_id: vip override of a general per-user policy: accepted with a warning that per-user wins; a priority settles it', async () => {
    const general = await call('POST', '/policies', PER_USER);
    expect(general.status).to.equal(201);
    expect(general.body).not.to.have.property('warnings');

    const vip = await call('POST', '/policies', VIP);
    expect(vip.status, JSON.stringify(vip.body)).to.equal(201);
    expect(vip.body).to.include({ policy_id: 'vip-user', version: 1 });
    expect(vip.body.warnings).to.have.length(1);
    const [warning] = vip.body.warnings;
    expect(warning.policy_id).to.equal('per-user');
    expect(warning.message).to.include('"per-user" wins').and.to.include('priority').and.to.include('specificity 4');
    // What the warning says is what decides.
    expect((await call('POST', '/check', { endpoint: '/api/things', user_id: 'vip', method: 'GET' })).body.matched_policy_id).to.equal('per-user');

    // The stored policy is the policy: the warning is not kept.
    expect((await call('GET', '/policies/vip-user')).body).not.to.have.property('warnings');

    const settled = await call('PATCH', '/policies/vip-user', { priority: 10 });
    expect(settled.status).to.equal(200);
    expect(settled.body).not.to.have.property('warnings');
    expect((await call('POST', '/check', { endpoint: '/api/things', user_id: 'vip', method: 'GET' })).body.matched_policy_id).to.equal('vip-user');
  });

  it('a replace or a patch that makes a tie warns too, and names the winner whichever side was written', async () => {
    await call('POST', '/policies', { ...VIP, priority: 1 });
    const created = await call('POST', '/policies', PER_USER);
    expect(created.body).not.to.have.property('warnings');

    // Back to priority 0: now a tie, and the written policy (vip-user) is the one that loses.
    const patched = await call('PATCH', '/policies/vip-user', { priority: 0 });
    expect(patched.body.warnings).to.deep.equal([{ policy_id: 'per-user', message: patched.body.warnings[0].message }]);
    expect(patched.body.warnings[0].message).to.include('"per-user" wins');

    // Written from the other side: per-user wins, and its answer names vip-user.
    const replaced = await call('PUT', '/policies/per-user', { ...PER_USER, description: 'the general limit' });
    expect(replaced.status).to.equal(200);
    expect(replaced.body.warnings.map((w: { policy_id: string }) => w.policy_id)).to.deep.equal(['vip-user']);
    expect(replaced.body.warnings[0].message).to.include('"per-user" wins');
  });

  it('no warning where the two cannot compete: scopes that cannot overlap, another specificity, shadow against enforce, another family, disabled, a rollout of 0', async () => {
    await call('POST', '/policies', PER_USER);
    const apart: Record<string, unknown>[] = [
      { ...VIP, policy_id: 'other-route', scope: { endpoint: '/api/other', user_id: 'vip' } },
      { ...VIP, policy_id: 'more-specific', scope: { endpoint: '/api/things', user_id: 'vip', method: 'GET' } },
      { ...VIP, policy_id: 'shadowed', enforcement_mode: 'shadow' },
      { ...VIP, policy_id: 'concurrent', algorithm: { type: 'concurrency', max_concurrency: 3 } },
      { ...VIP, policy_id: 'switched-off', enabled: false },
      { ...VIP, policy_id: 'not-rolled-out', rollout_percent: 0 },
    ];
    for (const body of apart) {
      const created = await call('POST', '/policies', body);
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      expect(created.body, String(body.policy_id)).not.to.have.property('warnings');
    }
    // Enabling the disabled one makes the tie: its patch warns.
    const enabled = await call('PATCH', '/policies/switched-off', { enabled: true });
    expect(enabled.body.warnings.map((w: { policy_id: string }) => w.policy_id)).to.deep.equal(['per-user']);
  });

  it('an exact value and a `*` of the same field can meet; the method is compared in its canonical form', async () => {
    await call('POST', '/policies', { policy_id: 'a-get', scope: { endpoint: '/x', method: 'get', user_id: '*' }, algorithm: window });
    const b = await call('POST', '/policies', { policy_id: 'b-get', scope: { endpoint: '/x', method: 'GET', tenant_id: '*' }, algorithm: window });
    expect(b.body.warnings.map((w: { policy_id: string }) => w.policy_id)).to.deep.equal(['a-get']);
    const c = await call('POST', '/policies', { policy_id: 'c-post', scope: { endpoint: '/x', method: 'POST', tenant_id: '*' }, algorithm: window });
    expect(c.body).not.to.have.property('warnings');
  });
});
