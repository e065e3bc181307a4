import { expect } from 'chai';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createAdminClient, type AdminClient } from '@rl/client';
import { cliServerSuite, policyDir, rl, rlJson } from './rl.js';

/**
 * `rl validate`, `rl diff`, `rl apply` (files, --dry-run, --prune, --plan) against a real server
 * process with an empty policy store, checked through the API afterwards.
 */

const SEED = JSON.stringify({ policies: [{ policy_id: 'seeded', algorithm: { type: 'fixed_window', limit: 5, window: '1m' } }] });

const API_YAML = `# two policies in one YAML stream
policy_id: api-per-user
scope: {org_id: acme, user_id: "*"}
algorithm: {type: fixed_window, limit: 10, window: 1m}
---
policy_id: api-per-ip
priority: 5
scope: {source_ip: "*"}
algorithm: {type: sliding_window_counter, limit: 100, window: 1m, sub_window_count: 6}
`;
const BATCH_JSON = JSON.stringify({
  policies: [
    { policy_id: 'exports', scope: { resource: 'export' }, algorithm: { type: 'concurrency', max_concurrency: 2 } },
    // The quota-shaped alias: stored in the Policy shape, and still "unchanged" on the next apply.
    { id: 'credits', resource: 'credits', algorithm: 'quota', config: { quota: 500, window_seconds: 3600 }, action_deny: true },
  ],
});
const LIST_YML = `- policy_id: jobs
  scope: {job_type: report}
  algorithm: {type: token_bucket, limit: 20, window: 1m, burst: 5}
`;

describe('rl apply / diff / validate (built binary, real server)', function () {
  this.timeout(240_000);
  const cli = cliServerSuite(SEED);
  let api: AdminClient;
  let env: Record<string, string>;

  before(() => {
    api = createAdminClient({ url: cli.server.url });
    env = { RL_URL: cli.server.url };
  });

  const ids = async (): Promise<string[]> => (await api.listPolicies()).map((p) => p.policy_id);

  it('validate: valid files pass offline (no server needed), exit 0', async () => {
    const dir = policyDir({ 'api.yaml': API_YAML, 'batch.json': BATCH_JSON, 'list.yml': LIST_YML, 'notes.txt': 'not a policy file' });
    const result = await rl(['validate', '-f', dir], { RL_URL: 'http://127.0.0.1:9' });
    expect(result.code, result.stderr).to.equal(0);
    expect(result.stdout).to.contain('valid: 5 policies in 3 files');
    const json = await rlJson<{ valid: boolean; policies: string[] }>(['validate', '-f', dir]);
    expect(json.code).to.equal(0);
    expect(json.body.valid).to.equal(true);
    expect(json.body.policies).to.have.members(['api-per-user', 'api-per-ip', 'exports', 'credits', 'jobs']);
  });

  it('validate: every problem of every file, naming file, policy and field; exit 2', async () => {
    const dir = policyDir({
      'bad.yaml': 'policy_id: broken\nalgorithm: {type: fixed_window, limit: 10, window: 10}\n',
      'worse.json': '{"policies": [{"policy_id": "x", "algorithm": {"type": "nope"}}]',
      'dup-a.yaml': 'policy_id: twice\nalgorithm: {type: fixed_window, limit: 1, window: 1s}\n',
      'dup-b.yaml': 'policy_id: twice\nalgorithm: {type: fixed_window, limit: 2, window: 1s}\n',
      'syntax.yml': 'policy_id: [unclosed\n',
    });
    const result = await rl(['validate', '-f', dir]);
    expect(result.code).to.equal(2);
    expect(result.stderr).to.match(/bad\.yaml: policy "broken" \(index 0\): algorithm\.window: /);
    // A syntax error: file:line:column, the line, and a caret under the column.
    expect(result.stderr).to.contain(`worse.json:1:65: invalid JSON: unexpected end of input\n  {"policies": [{"policy_id": "x", "algorithm": {"type": "nope"}}]\n  ${' '.repeat(64)}^`);
    expect(result.stderr).to.match(/dup-b\.yaml: policy "twice" \(index 0\): policy_id: duplicate policy_id \(first defined in .*dup-a\.yaml \(index 0\)\)/);
    expect(result.stderr).to.match(/syntax\.yml:2:1: invalid YAML: .+\n/);
    const json = await rlJson<{ valid: boolean; errors: { source: string; field?: string }[] }>(['validate', '-f', dir]);
    expect(json.code).to.equal(2);
    expect(json.body.valid).to.equal(false);
    expect(json.body.errors.map((e) => e.field)).to.include.members(['algorithm.window', 'policy_id']);
  });

  it('validate, diff and apply refuse unknown policy fields, naming each with the nearest known one; nothing changes', async () => {
    const before = await api.listPolicies();
    const dir = policyDir({
      'typos.yaml': 'policy_id: typos\nacton: delay\ndescripton: checkout\nalgorithm: {type: token_bucket, limit: 5, window: 1s, burts: 2}\n',
      'quota.json': JSON.stringify({ id: 'q-typo', algorithm: 'quota', config: { quoat: 5, window_seconds: 60 } }),
    });
    const expected = [
      'typos.yaml: policy "typos" (index 0): acton: unknown field; did you mean `action`?',
      'typos.yaml: policy "typos" (index 0): descripton: unknown field; did you mean `description`?',
      'typos.yaml: policy "typos" (index 0): algorithm.burts: unknown field; did you mean `burst`?',
      'quota.json: policy "q-typo" (index 0): config.quoat: unknown field; did you mean `quota`?',
    ];
    for (const args of [['validate', '-f', dir], ['diff', '-f', dir], ['apply', '-f', dir]]) {
      const result = await rl(args, env);
      expect(result.code, `${args[0]}: ${result.stderr}`).to.equal(2);
      for (const line of expected) expect(result.stderr, args[0]).to.contain(line);
      expect(result.stdout, args[0]).to.not.contain('valid:');
    }
    expect(await api.listPolicies()).to.deep.equal(before);
  });

  it('validate: a path that does not exist is a problem, exit 2', async () => {
    const result = await rl(['validate', '-f', '/nonexistent/rl-policies']);
    expect(result.code).to.equal(2);
    expect(result.stderr).to.contain('/nonexistent/rl-policies: cannot read: no such file or directory');
  });

  it('apply: a bad file among good ones changes nothing (exit 2), before the server is asked anything', async () => {
    const before = await api.listPolicies();
    const dir = policyDir({ 'api.yaml': API_YAML, 'bad.yaml': 'policy_id: bad\nalgorithm: {type: fixed_window, limit: -1, window: 1m}\n' });
    const result = await rl(['apply', '-f', dir, '--prune'], env);
    expect(result.code).to.equal(2);
    expect(result.stderr).to.match(/bad\.yaml: policy "bad" \(index 0\): algorithm\.limit: /);
    expect(result.stderr).to.contain('nothing was changed');
    expect(await api.listPolicies()).to.deep.equal(before);
  });

  it('diff and apply --dry-run show the plan and change nothing', async () => {
    const dir = policyDir({ 'api.yaml': API_YAML, 'batch.json': BATCH_JSON, 'list.yml': LIST_YML });
    const diff = await rl(['diff', '-f', dir], env);
    expect(diff.code, diff.stderr).to.equal(0);
    for (const id of ['api-per-user', 'api-per-ip', 'exports', 'credits', 'jobs']) expect(diff.stdout).to.match(new RegExp(`\\+ create\\s+${id}\\b`));
    expect(diff.stdout).to.contain('in no file, kept (--prune deletes them): seeded');
    expect(diff.stdout).to.contain('Plan: 5 to create, 0 to update, 0 to delete, 0 unchanged, 1 not in files and kept.');

    const dry = await rl(['apply', '-f', dir, '--dry-run', '--prune'], env);
    expect(dry.code).to.equal(0);
    expect(dry.stdout).to.match(/- delete\s+seeded/);
    expect(dry.stdout).to.contain('Dry run: nothing changed.');
    expect(await ids()).to.deep.equal(['seeded']);
  });

  it('apply creates, then has nothing to do; a changed field is an update of exactly that field', async () => {
    const dir = policyDir({ 'api.yaml': API_YAML, 'batch.json': BATCH_JSON, 'list.yml': LIST_YML });
    const first = await rl(['apply', '-f', dir], env);
    expect(first.code, first.stderr).to.equal(0);
    expect(first.stdout).to.contain('Applied 5 of 5 changes.');
    expect(await ids()).to.deep.equal(['api-per-ip', 'api-per-user', 'credits', 'exports', 'jobs', 'seeded']);
    expect((await api.getPolicy('credits')).algorithm).to.deep.include({ type: 'quota', limit: 500 });

    const again = await rl(['apply', '-f', dir], env);
    expect(again.code).to.equal(0);
    expect(again.stdout).to.contain('Nothing to do.');
    expect(again.stdout).to.contain('5 unchanged');

    writeFileSync(join(dir, 'api.yaml'), API_YAML.replace('limit: 10,', 'limit: 20,').replace('priority: 5', 'priority: 7'));
    const plan = await rlJson<{ actions: { action: string; policy_id: string; version?: number; changes?: { field: string; from: unknown; to: unknown }[] }[] }>(['diff', '-f', dir], env);
    const updates = plan.body.actions.filter((a) => a.action === 'update');
    expect(updates.map((u) => [u.policy_id, u.version, u.changes])).to.deep.equal([
      ['api-per-ip', 1, [{ field: 'priority', from: 5, to: 7 }]],
      ['api-per-user', 1, [{ field: 'algorithm.limit', from: 10, to: 20 }]],
    ]);
    const human = await rl(['diff', '-f', dir], env);
    expect(human.stdout).to.match(/~ update\s+api-per-user\s+\(version 1, .*api\.yaml#0\)\n\s+algorithm\.limit: 10 -> 20/);

    const applied = await rlJson<{ ok: boolean; results: { action: string; policy_id: string; ok: boolean; version: number }[] }>(['apply', '-f', dir], env);
    expect(applied.code).to.equal(0);
    expect(applied.body.ok).to.equal(true);
    expect(applied.body.results).to.deep.equal([
      { action: 'update', policy_id: 'api-per-ip', ok: true, version: 2 },
      { action: 'update', policy_id: 'api-per-user', ok: true, version: 2 },
    ]);
    expect((await api.getPolicy('api-per-user')).algorithm).to.deep.include({ limit: 20 });
    const audit = await api.audit('api-per-user');
    expect(audit.map((a) => a.action_type)).to.deep.equal(['create', 'update']);
  });

  it('a change made after the plan was read is a conflict (409, exit 2), not an overwrite', async () => {
    // api-per-ip goes back to priority 5 (an update that applies), api-per-user to limit 30 (the conflict).
    const dir = policyDir({ 'api.yaml': API_YAML.replace('limit: 10,', 'limit: 30,') });
    const planFile = join(policyDir({}), 'plan.json');
    const diff = await rl(['diff', '-f', dir, '--out', planFile], env);
    expect(diff.code, diff.stderr).to.equal(0);
    expect(diff.stdout).to.match(/~ update\s+api-per-user\s+\(version 2/);

    // Someone else changes the policy between the plan and the apply.
    const concurrent = await api.patchPolicy('api-per-user', { algorithm: { limit: 99 } });
    expect(concurrent.version).to.equal(3);

    const result = await rl(['apply', '--plan', planFile], env);
    expect(result.code).to.equal(2);
    expect(result.stdout).to.match(/failed to update api-per-user: conflict \(409.*If-Match "2" does not match: the current version is 3/);
    expect(result.stdout).to.contain('updated api-per-ip (version 3)');
    expect(result.stderr).to.contain('Applied 1 of 2 changes.');
    const after = await api.getPolicy('api-per-user');
    expect(after.version).to.equal(3);
    expect(after.algorithm).to.deep.include({ limit: 99 });

    // Planned afresh, the same files apply over the current version.
    const retry = await rl(['apply', '-f', dir], env);
    expect(retry.code, retry.stderr).to.equal(0);
    expect((await api.getPolicy('api-per-user')).algorithm).to.deep.include({ limit: 30 });
  });

  it('apply --plan refuses a plan made against another server, and a plan whose policies no longer validate', async () => {
    const dir = policyDir({ 'list.yml': LIST_YML.replace('limit: 20', 'limit: 21') });
    const planFile = join(policyDir({}), 'plan.json');
    expect((await rl(['diff', '-f', dir, '--out', planFile], env)).code).to.equal(0);
    const other = await rl(['apply', '--plan', planFile], { RL_URL: 'http://127.0.0.1:9' });
    expect(other.code).to.equal(1);
    expect(other.stderr).to.contain(`the plan was made against ${cli.server.url}`);

    const plan = JSON.parse(readFileSync(planFile, 'utf8')) as { actions: { action: string; policy?: { algorithm: { window: unknown } } }[] };
    plan.actions.find((a) => a.action === 'update')!.policy!.algorithm.window = 'soon';
    writeFileSync(planFile, JSON.stringify(plan));
    const tampered = await rl(['apply', '--plan', planFile], env);
    expect(tampered.code).to.equal(2);
    expect(tampered.stderr).to.contain('jobs: algorithm.window:');
    expect((await api.getPolicy('jobs')).version).to.equal(1);
  });

  it('--prune deletes what is in no file (with If-Match); without it those are kept', async () => {
    const dir = policyDir({ 'list.yml': LIST_YML });
    const kept = await rl(['apply', '-f', dir], env);
    expect(kept.code).to.equal(0);
    expect(await ids()).to.include('seeded');

    const pruned = await rlJson<{ results: { action: string; policy_id: string; ok: boolean }[] }>(['apply', '-f', dir, '--prune'], env);
    expect(pruned.code, pruned.stderr).to.equal(0);
    expect(pruned.body.results.filter((r) => r.action === 'delete').map((r) => r.policy_id)).to.deep.equal(['api-per-ip', 'api-per-user', 'credits', 'exports', 'seeded']);
    expect(await ids()).to.deep.equal(['jobs']);
    // Deleted policies keep their history.
    expect((await api.audit('seeded')).map((a) => a.action_type)).to.deep.equal(['create', 'delete']);
  });

  it('a policy created or deleted by someone else after the plan is a conflict too (exit 2)', async () => {
    await api.createPolicy({ policy_id: 'temp', algorithm: { type: 'fixed_window', limit: 1, window: '1s' } });
    const dir = policyDir({ 'list.yml': LIST_YML, 'late.yaml': 'policy_id: late\nalgorithm: {type: fixed_window, limit: 2, window: 1s}\n' });
    const planFile = join(policyDir({}), 'plan.json');
    const diff = await rl(['diff', '-f', dir, '--prune', '--out', planFile], env);
    expect(diff.stdout).to.match(/\+ create\s+late[\s\S]*- delete\s+temp/);

    await api.createPolicy({ policy_id: 'late', algorithm: { type: 'fixed_window', limit: 9, window: '1s' } });
    const created = await rl(['apply', '--plan', planFile], env);
    expect(created.code).to.equal(2);
    expect(created.stdout).to.match(/failed to create late: conflict \(409/);
    expect(created.stderr).to.contain('Not tried after the failure: delete temp.');
    expect((await api.getPolicy('late')).algorithm).to.deep.include({ limit: 9 });

    await api.deletePolicy('late');
    await api.deletePolicy('temp');
    const deleted = await rl(['apply', '--plan', planFile], env);
    expect(deleted.code).to.equal(2);
    expect(deleted.stdout).to.contain('created late (version 2)');
    expect(deleted.stdout).to.match(/failed to delete temp: not found \(404\)/);
    expect(deleted.stderr).to.contain('Someone changed a policy since the plan was read');
  });

  it('apply without -f or --plan is a usage error (exit 1)', async () => {
    const result = await rl(['apply'], env);
    expect(result.code).to.equal(1);
    expect(result.stderr).to.contain('give either -f <file|dir> or --plan <plan.json>');
  });
});
