/**
 * Platform layers for tenants (docs/tenants.md, RL_PLATFORM_LAYERS) and explain with restricted and
 * unrestricted API keys, over a real server process: a team's key neither reads (404) nor writes (403
 * naming `layer`) a platform layer's policies, whatever their organisation; the platform's key does;
 * the platform layer still binds the team's traffic; explain shows each key only what it may read.
 */
import { expect } from 'chai';
import { callApi } from '../support/http.js';
import { serverProcessSuite } from '../support/server-suite.js';

const PLATFORM = 'platform-key-0123456789';
const TEAM = 'team-a-key-0123456789';
const window = (limit: number) => ({ type: 'fixed_window', limit, window: '1h' });

describe('platform layers and explain with restricted keys (real server process)', function () {
  this.timeout(60_000);
  const suite = serverProcessSuite('rl-platform-layers-', {
    policies: [],
    env: () => ({
      RL_AUTH_ENABLED: 'true',
      RL_AUTH_MODE: 'apikey',
      RL_AUTH_API_KEYS: `${PLATFORM},${TEAM}:admin:team-a`,
      RL_PLATFORM_LAYERS: 'platform,shared',
    }),
  });

  const call = (key: string, method: string, path: string, body?: unknown) => callApi(suite.server.url, key, method, path, body);

  it('a team key cannot read or write a platform layer; the platform key can; the platform layer binds the team', async () => {
    // The platform's limit on the team's own organisation, in the platform layer: 2 an hour.
    const platform = { policy_id: 'platform-cap', layer: 'platform', scope: { org_id: 'team-a' }, algorithm: window(2) };
    expect((await call(PLATFORM, 'POST', '/policies', platform)).status).to.equal(201);
    expect((await call(PLATFORM, 'POST', '/policies', { policy_id: 'shared-cap', layer: 'shared', scope: { org_id: 'team-a' }, algorithm: window(100) })).status).to.equal(201);
    const own = { policy_id: 'a-users', scope: { org_id: 'team-a', user_id: '*' }, algorithm: window(50) };
    expect((await call(TEAM, 'POST', '/policies', own)).status).to.equal(201);

    const outcomes: Record<string, number | string> = {};
    const attempt = async (name: string, method: string, path: string, body?: unknown) => {
      const r = await call(TEAM, method, path, body);
      outcomes[name] = r.status === 403 ? `403 ${r.body.field}` : r.status;
    };
    await attempt('get platform-cap', 'GET', '/policies/platform-cap');
    await attempt('versions platform-cap', 'GET', '/policies/platform-cap/versions');
    await attempt('audit platform-cap', 'GET', '/policies/platform-cap/audit');
    await attempt('put platform-cap', 'PUT', '/policies/platform-cap', { ...platform, algorithm: window(1000) });
    await attempt('patch platform-cap', 'PATCH', '/policies/platform-cap', { algorithm: { limit: 1000 } });
    await attempt('delete platform-cap', 'DELETE', '/policies/platform-cap');
    await attempt('get shared-cap', 'GET', '/policies/shared-cap');
    await attempt('create in platform', 'POST', '/policies', { ...platform, policy_id: 'a-sneaky' });
    await attempt('create in shared', 'POST', '/policies', { ...platform, policy_id: 'a-sneaky', layer: 'shared' });
    await attempt('validate in platform', 'POST', '/policies/validate', platform);
    await attempt('patch own into platform', 'PATCH', '/policies/a-users', { layer: 'platform' });
    await attempt('create in own layer', 'POST', '/policies', { ...own, policy_id: 'a-org', layer: 'team', scope: { org_id: 'team-a' } });
    expect(outcomes).to.deep.equal({
      'get platform-cap': 404,
      'versions platform-cap': 404,
      'audit platform-cap': 404,
      'put platform-cap': 404,
      'patch platform-cap': 404,
      'delete platform-cap': 404,
      'get shared-cap': 404,
      'create in platform': '403 layer',
      'create in shared': '403 layer',
      'validate in platform': '403 layer',
      'patch own into platform': '403 layer',
      'create in own layer': 201,
    });
    const listed = (await call(TEAM, 'GET', '/policies')).body.map((p: { policy_id: string }) => p.policy_id);
    expect(listed).to.deep.equal(['a-org', 'a-users']);
    expect((await call(PLATFORM, 'GET', '/policies/platform-cap')).body).to.include({ layer: 'platform', version: 1 });

    // The platform layer decides the team's traffic too: 2 admitted, then refused, whatever the team's own limits.
    const checks = [];
    for (let i = 0; i < 3; i++) checks.push((await call(TEAM, 'POST', '/check', { user_id: `u${i}` })).body.allowed);
    expect(checks).to.deep.equal([true, true, false]);
  });

  it('explain shows each key the candidates it may read: the team sees its layers only, the platform every layer', async () => {
    const team = await call(TEAM, 'POST', '/explain', { user_id: 'u9' });
    expect(team.status).to.equal(200);
    expect(team.body.layers.map((l: { layer: string; winner: string }) => [l.layer, l.winner])).to.deep.equal([
      ['default', 'a-users'],
      ['team', 'a-org'],
    ]);
    const platform = await call(PLATFORM, 'POST', '/explain', { org_id: 'team-a', user_id: 'u9' });
    expect(platform.body.layers.map((l: { layer: string; winner: string }) => [l.layer, l.winner])).to.deep.equal([
      ['default', 'a-users'],
      ['platform', 'platform-cap'],
      ['shared', 'shared-cap'],
      ['team', 'a-org'],
    ]);
    // A team's explain is held to its organisations like its decisions.
    const other = await call(TEAM, 'POST', '/explain', { org_id: 'team-b' });
    expect([other.status, other.body.field]).to.deep.equal([403, 'org_id']);
  });
});
