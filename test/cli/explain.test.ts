/**
 * `rl explain`, and the tie warnings of `rl validate` (offline, among the files' policies) and `rl apply`
 * (the server's), with the built binary against a real server process.
 */
import { expect } from 'chai';
import { cliServerSuite, policyDir, rl, rlJson } from './rl.js';

/** The case: a per-user override that ties the general per-user policy on specificity (4) and priority. */
const TIED = JSON.stringify({
  policies: [
    { policy_id: 'per-user', scope: { endpoint: '/api/things', user_id: '*', method: '*' }, algorithm: { type: 'fixed_window', limit: 5, window: '1m' } },
    { policy_id: 'vip-user', scope: { endpoint: '/api/things', user_id: 'vip' }, algorithm: { type: 'fixed_window', limit: 50, window: '1m' } },
    { policy_id: 'org-total', layer: 'org', scope: { endpoint: '/api/things' }, algorithm: { type: 'fixed_window', limit: 20, window: '1m' } },
  ],
});

describe('rl explain, and tie warnings in rl validate / rl apply (built binary, real server)', function () {
  this.timeout(240_000);
  const cli = cliServerSuite('[]');
  let env: Record<string, string>;

  before(() => {
    env = { RL_URL: cli.server.url };
  });

  it('validate prints the tie among the files, offline, and still exits 0', async () => {
    const dir = policyDir({ 'tied.json': TIED });
    const result = await rl(['validate', '-f', dir], { RL_URL: 'http://127.0.0.1:9' });
    expect(result.code, result.stderr).to.equal(0);
    expect(result.stdout).to.contain('valid: 3 policies in 1 file');
    expect(result.stderr.trim().split('\n')).to.deep.equal([
      'warning: vip-user: "vip-user" ties "per-user" in layer "default" (specificity 4, priority 0) and both can cover one request: "per-user" wins there, on the smaller policy_id. Give the one that should win a higher priority: priority settles a tie',
    ]);
    const json = await rlJson<{ warnings: { policy_id: string; warning: { policy_id: string } }[] }>(['validate', '-f', dir]);
    expect(json.body.warnings.map((w) => [w.policy_id, w.warning.policy_id])).to.deep.equal([['vip-user', 'per-user']]);
  });

  it("apply prints the server's warning for the policy that ties, and makes every change", async () => {
    const dir = policyDir({ 'tied.json': TIED });
    const result = await rl(['apply', '-f', dir], env);
    expect(result.code, result.stderr).to.equal(0);
    expect(result.stdout).to.contain('created vip-user (version 1)');
    expect(result.stderr).to.match(/^warning: vip-user: "vip-user" ties "per-user" .*"per-user" wins there/m);
    expect(result.stderr).not.to.contain('warning: org-total');
  });

  it('explain prints each layer, its winner and every candidate with why not; --json is the API answer', async () => {
    const result = await rl(['explain', '--endpoint', '/api/things', '--user_id', 'vip', '--method', 'get'], env);
    expect(result.code, result.stderr).to.equal(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines[0]).to.equal('layer default: per-user decides');
    expect(lines[1].split(/\s+/).filter(Boolean)).to.deep.equal(['POLICY', 'COVERS', 'WHY_NOT', 'SPECIFICITY', 'PRIORITY', 'WINS']);
    expect(lines[2].split(/\s+/).filter(Boolean)).to.deep.equal(['per-user', 'yes', '-', '4', '0', 'yes']);
    expect(lines[3].split(/\s+/).filter(Boolean)).to.deep.equal(['vip-user', 'yes', '-', '4', '0', '-']);
    expect(result.stdout).to.contain('layer org: org-total decides');

    const other = await rlJson<{ layers: { layer: string; candidates: { policy_id: string; why_not?: string }[] }[] }>(['explain', '--endpoint', '/api/things', '--user_id', 'bob'], env);
    expect(other.code).to.equal(0);
    const vip = other.body.layers[0].candidates.find((c) => c.policy_id === 'vip-user');
    expect(vip?.why_not).to.equal('scope:user_id');
    const perUser = other.body.layers[0].candidates.find((c) => c.policy_id === 'per-user');
    expect(perUser?.why_not, 'method: "*" needs a method').to.equal('scope:method');

    const bad = await rl(['explain', '--decision', 'nope'], env);
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.contain('--decision');
  });
});
