import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Matcher } from '../../src/matching/matcher.js';
import { loadPolicyFile, PolicyFileError } from '../../src/policy/policy-file.js';
import { ALGORITHM_TYPES, LIMIT_ACTIONS } from '../../src/policy/types.js';
import { tempDir } from '../support/temp-dir.js';

const EXAMPLES = fileURLToPath(new URL('../../examples/policies.json', import.meta.url));
const NOW_ISO = '2030-01-02T03:04:05.000Z';

describe('loadPolicyFile', () => {
  let dir: string;
  tempDir('rl-policy-file-', { made: (path) => (dir = path) });

  function file(name: string, content: unknown): string {
    const path = join(dir, name);
    writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
    return path;
  }

  function loadError(path: string): PolicyFileError {
    try {
      loadPolicyFile(path, NOW_ISO);
    } catch (err) {
      expect(err).to.be.instanceOf(PolicyFileError);
      return err as PolicyFileError;
    }
    throw new Error('expected a PolicyFileError');
  }

  const good = (id: string) => ({ policy_id: id, algorithm: { type: 'fixed_window', limit: 5, window: '1s' } });

  describe('examples/policies.json', () => {
    const policies = loadPolicyFile(EXAMPLES, NOW_ISO);

    it('loads and covers all seven algorithms', () => {
      expect(new Set(policies.map((p) => p.algorithm.type))).to.have.all.keys(...ALGORITHM_TYPES);
    });

    it('covers the actions, a shadow policy, a * per-user scope, a match_expr, quota cost and lease_ttl', () => {
      const actions = new Set(policies.map((p) => p.action));
      for (const a of LIMIT_ACTIONS) expect(actions, a).to.include(a);
      expect(policies.some((p) => p.enforcement_mode === 'shadow')).to.equal(true);
      expect(policies.some((p) => p.scope.user_id === '*')).to.equal(true);
      expect(policies.some((p) => p.metadata.match_expr !== undefined)).to.equal(true);
      expect(policies.some((p) => p.algorithm.type === 'quota' && (p.algorithm.cost_per_request ?? 1) > 1)).to.equal(true);
      expect(policies.some((p) => p.algorithm.type === 'concurrency' && p.algorithm.lease_ttl !== undefined)).to.equal(true);
      for (const p of policies) {
        expect(p.description, p.policy_id).to.not.equal('');
      }
    });

    it('stamps version 1 and the timestamps', () => {
      for (const p of policies) {
        expect(p.version).to.equal(1);
        expect(p.created_at).to.equal(NOW_ISO);
        expect(p.updated_at).to.equal(NOW_ISO);
      }
    });

    it('compiles into a matcher without skipping anything', () => {
      const m = Matcher.build(policies);
      expect(m.skipped).to.deep.equal([]);
      expect(m.size).to.equal(policies.filter((p) => p.enabled).length);
      const r = m.match({ org_id: 'acme', signal_type: 'http', user_id: 'alice', quantity: 1, tags: {} }, 'rate', Date.parse(NOW_ISO));
      expect(r.enforce?.compiled.policy.policy_id).to.equal('acme-api-per-user');
      expect(r.enforce?.identity).to.deep.equal(['user_id', 'alice']);
    });
  });

  it('accepts a bare array, and the quota-shaped body', () => {
    const path = file('bare.json', [good('a'), { id: 'q', resource: 'r', algorithm: 'quota', config: { quota: 5, window_seconds: 60 }, action_deny: false }]);
    const policies = loadPolicyFile(path, NOW_ISO);
    expect(policies.map((p) => p.policy_id)).to.deep.equal(['a', 'q']);
    expect(policies[1].algorithm).to.deep.equal({ type: 'quota', limit: 5, quota_period: '60s' });
    expect(policies[1].enforcement_mode).to.equal('shadow');
  });

  it('accepts an empty list and a UTF-8 BOM', () => {
    expect(loadPolicyFile(file('empty.json', { policies: [] }))).to.deep.equal([]);
    expect(loadPolicyFile(file('bom.json', '\ufeff' + JSON.stringify([good('a')])))).to.have.length(1);
  });

  it('defaults the timestamps to now', () => {
    const [p] = loadPolicyFile(file('now.json', [good('a')]));
    expect(Date.parse(p.created_at)).to.be.closeTo(Date.now(), 60_000);
  });

  it('names the file, the policy and the field', () => {
    const path = file('bad.json', {
      policies: [good('ok-1'), good('ok-2'), { policy_id: 'api-per-user', algorithm: { type: 'fixed_window', limit: 5, window: '10' } }],
    });
    const err = loadError(path);
    expect(err.message).to.contain(`${path}: policy "api-per-user" (index 2): algorithm.window: "10" is not a duration`);
    expect(err.path).to.equal(path);
    expect(err.problems).to.have.length(1);
    expect(err.problems[0]).to.include({ index: 2, policy_id: 'api-per-user', field: 'algorithm.window' });
  });

  it('lists every problem of every policy; a policy without an id is named by index', () => {
    const path = file('many.json', [
      { algorithm: { type: 'fixed_window', limit: 5, window: '1s' } },
      { policy_id: 'x', algorithm: { type: 'token_bucket' }, scope: { usr_id: 'u' } },
      { id: 'q', algorithm: 'quota', config: { quota: -1, window_seconds: 60 } },
      7,
    ]);
    const err = loadError(path);
    const lines = err.message.split('\n');
    expect(lines).to.include(`${path}: policy at index 0: policy_id: is required`);
    expect(lines.some((l) => l.startsWith(`${path}: policy "x" (index 1): scope.usr_id: unknown field; did you mean \`user_id\`?`))).to.equal(true);
    expect(lines.some((l) => l.startsWith(`${path}: policy "x" (index 1): algorithm.limit:`))).to.equal(true);
    expect(lines.some((l) => l.startsWith(`${path}: policy "x" (index 1): algorithm.window:`))).to.equal(true);
    expect(lines.some((l) => l.startsWith(`${path}: policy "q" (index 2): config.quota:`))).to.equal(true);
    expect(lines.some((l) => l.startsWith(`${path}: policy at index 3: body:`))).to.equal(true);
  });

  it('rejects duplicate policy ids', () => {
    const path = file('dup.json', [good('a'), good('b'), good('a')]);
    const err = loadError(path);
    expect(err.message).to.equal(`${path}: policy "a" (index 2): policy_id: duplicate policy_id (first defined at index 0)`);
  });

  it('rejects a duplicate between the two shapes', () => {
    const err = loadError(file('dup2.json', [good('q'), { id: 'q', algorithm: 'quota', config: { quota: 1, window_seconds: 1 } }]));
    expect(err.message).to.contain('policy "q" (index 1): policy_id: duplicate');
  });

  it('explains a missing file, invalid JSON and the wrong top-level shape', () => {
    const missing = join(dir, 'nope.json');
    expect(loadError(missing).message).to.equal(`${missing}: cannot read policy file: no such file or directory`);
    expect(loadError(dir).message).to.match(/cannot read policy file/);
    const invalid = file('invalid.json', '{"policies": [');
    expect(loadError(invalid).message).to.equal(`${invalid}:1:15: invalid JSON: unexpected end of input\n  {"policies": [\n                ^`);
    expect(loadError(invalid).problems[0]).to.include({ line: 1, column: 15 });
    // An object without `policies` is one policy (see 'reads a single policy'), checked as such.
    const obj = file('obj.json', { rules: [] });
    expect(loadError(obj).message.split('\n')).to.include.members([`${obj}: policy at index 0: policy_id: is required`, `${obj}: policy at index 0: algorithm: is required (an object with "type": one of fixed_window, sliding_window_log, sliding_window_counter, token_bucket, leaky_bucket, concurrency, quota)`]);
    expect(loadError(obj).message.split('\n')[0]).to.match(/policy at index 0: rules: unknown field \(policy fields: policy_id, /);
    const notArray = file('notarray.json', { policies: {} });
    expect(loadError(notArray).message).to.equal(`${notArray}: policies: must be a list of policies`);
    const nothing = file('null.json', 'null');
    expect(loadError(nothing).message).to.equal(`${nothing}: must hold a policy, a list of policies or {"policies": [...]}`);
  });

  it('a YAML error gives file (and document), line, column, the line and a caret', () => {
    const path = file('broken.yaml', 'policy_id: ok\nalgorithm: {type: fixed_window, limit: 5, window: 1m}\n---\npolicy_id: bad\nscope:\n  org_id: a\n   user_id: b\nalgorithm: {type: fixed_window, limit: 5, window: 1m}\n');
    const err = loadError(path);
    expect(err.problems[0]).to.include({ source: `${path}#1`, line: 6, column: 11 });
    expect(err.message.split('\n').slice(0, 3)).to.deep.equal([`${path}#1:6:11: invalid YAML: Nested mappings are not allowed in compact mappings`, '    org_id: a', `  ${' '.repeat(10)}^`]);
  });

  it('reads a single policy, as `rl validate` does', () => {
    const [p] = loadPolicyFile(file('one.json', good('solo')), NOW_ISO);
    expect(p).to.include({ policy_id: 'solo', version: 1, created_at: NOW_ISO, updated_at: NOW_ISO });
  });

  it('reads YAML by extension, several documents included, and names the document of a problem', () => {
    const yaml = file('two.yaml', 'policy_id: y1\nalgorithm: {type: fixed_window, limit: 5, window: 1s}\n---\npolicies:\n  - policy_id: y2\n    algorithm: {type: token_bucket, limit: 3, window: 1s}\n');
    expect(loadPolicyFile(yaml, NOW_ISO).map((p) => p.policy_id)).to.deep.equal(['y1', 'y2']);
    const bad = file('bad.yml', 'policy_id: y1\nalgorithm: {type: fixed_window, limit: 5, window: 1s}\n---\npolicy_id: y1\nalgorithm: {type: fixed_window, limit: 0, window: 1s}\n');
    expect(loadError(bad).message).to.match(new RegExp(`^${bad.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}#1: policy "y1" \\(index 0\\): algorithm\\.limit: `));
    // JSON stays JSON whatever the name (only .yaml and .yml are YAML).
    expect(loadError(file('yaml-like.conf', 'policy_id: x')).message).to.match(/yaml-like\.conf:1:1: invalid JSON: unexpected "p"/);
    // ...and says so where the name is not .json (a YAML file passed as /dev/stdin, say).
    expect(loadError(file('yaml-like.conf', 'policy_id: x')).message).to.match(/invalid JSON: .* \(a file is read as YAML only when named \.yaml or \.yml\)$/m);
    expect(loadError(file('broken.json', '{')).message).to.not.include('YAML');
  });
});
