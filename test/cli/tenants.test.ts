import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { createAdminClient } from '@rl/client';
import { cliServerSuite, policyDir, rl, rlJson } from './rl.js';

/**
 * `rl` with a team's key (docs/tenants.md): `diff` and `apply --prune` plan from the listing the key
 * sees, so they never touch another team's or a global policy, and `rl policies audit` names the key by
 * its fingerprint, never the key.
 */

const PLATFORM = 'cli-platform-key-0123';
const TEAM_A = 'cli-team-a-key-012345';
const seed = (policy_id: string, org_id: string) => ({ policy_id, scope: { org_id, user_id: '*' }, algorithm: { type: 'fixed_window', limit: 5, window: '1m' } });
const A_FILE = JSON.stringify([{ ...seed('a-new', 'team-a') }]);

describe('rl with a key limited to an organisation (built binary, real server)', function () {
  this.timeout(240_000);
  const cli = cliServerSuite(JSON.stringify([seed('a-old', 'team-a'), seed('b-limit', 'team-b'), seed('global', '*')]), {
    RL_AUTH_ENABLED: 'true',
    RL_AUTH_MODE: 'apikey',
    RL_AUTH_API_KEYS: `${PLATFORM},${TEAM_A}:admin:team-a`,
  });

  it('diff and apply --prune see only the team\'s policies; audit names the key by its fingerprint', async () => {
    const team = { RL_URL: cli.server.url, RL_API_KEY: TEAM_A };
    const dir = policyDir({ 'team-a.json': A_FILE });

    const diff = await rl(['diff', '-f', dir, '--prune'], team);
    expect(diff.stdout).to.contain('a-new').and.to.contain('a-old');
    expect(diff.stdout).not.to.contain('b-limit');
    expect(diff.stdout).not.to.contain('global');

    const applied = await rlJson<{ results: { action: string; policy_id: string; ok: boolean }[] }>(['apply', '-f', dir, '--prune'], team);
    expect(applied.code, applied.stderr).to.equal(0);
    expect(applied.body.results.map((r) => `${r.action} ${r.policy_id} ${r.ok}`)).to.deep.equal(['create a-new true', 'delete a-old true']);

    const all = (await createAdminClient({ url: cli.server.url, apiKey: PLATFORM }).listPolicies()).map((p) => p.policy_id);
    expect(all).to.deep.equal(['a-new', 'b-limit', 'global']);

    // A file that would put a policy in another organisation: the server's 403 names scope.org_id (exit 1, as
    // every refusal of the credential), and nothing is created.
    const outside = await rl(['apply', '-f', policyDir({ 'b.json': JSON.stringify([seed('b-new', 'team-b')]) })], team);
    expect(outside.code).to.equal(1);
    expect(outside.stdout + outside.stderr).to.contain('scope.org_id');
    expect((await createAdminClient({ url: cli.server.url, apiKey: PLATFORM }).listPolicies()).map((p) => p.policy_id)).not.to.include('b-new');

    const audit = await rl(['policies', 'audit', 'a-new'], team);
    expect(audit.code, audit.stderr).to.equal(0);
    const fingerprint = `key:${createHash('sha256').update(TEAM_A).digest('hex').slice(0, 8)}`;
    expect(audit.stdout.trim().split('\n')[1]).to.match(new RegExp(`^1\\s+create\\s+${fingerprint}\\s`));
    expect(audit.stdout).not.to.contain(TEAM_A);
    expect((await rl(['policies', 'get', 'b-limit'], team)).code).not.to.equal(0);
  });
});
