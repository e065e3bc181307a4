import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { revivedPolicy, StringPool, storedPolicy } from '../../src/policy/stored-policy.js';
import { validatePolicy, type PolicyInput } from '../../src/policy/validate.js';
import { REPO_ROOT } from '../support/server-process.js';

function input(raw: Record<string, unknown>): PolicyInput {
  const result = validatePolicy(raw);
  if (!result.ok) throw new Error(JSON.stringify(result.errors));
  return result.policy;
}

const RAW = {
  policy_id: 'tenant-a-per-user',
  scope: { tenant_id: 'tenant-a', endpoint: '/api/orders', user_id: '*', tags: { tier: 'gold' } },
  algorithm: { type: 'token_bucket', limit: 600, window: '1m', burst: 100 },
  metadata: { owner: 'team-a' },
};

describe('stored policies (the in-memory form every holder shares)', () => {
  it('holds exactly the validated fields and the server-set ones', () => {
    const validated = input(RAW);
    const stored = storedPolicy(validated, 3, '2026-01-01T00:00:00.000Z', '2026-01-02T00:00:00.000Z');
    expect(JSON.parse(JSON.stringify(stored))).to.deep.equal({
      ...JSON.parse(JSON.stringify(validated)),
      version: 3,
      created_at: '2026-01-01T00:00:00.000Z',
      updated_at: '2026-01-02T00:00:00.000Z',
    });
  });

  it('shares one frozen algorithm among equal ones and one empty metadata, so none can be changed in place', () => {
    const a = storedPolicy(input({ ...RAW, policy_id: 'a', metadata: undefined }), 1, 't', 't');
    const b = storedPolicy(input({ ...RAW, policy_id: 'b', metadata: undefined }), 1, 't', 't');
    expect(a.algorithm).to.equal(b.algorithm);
    expect(a.metadata).to.equal(b.metadata);
    expect(() => ((a.algorithm as { limit?: number }).limit = 1)).to.throw(TypeError);
    expect(() => ((a.metadata as Record<string, string>).x = 'y')).to.throw(TypeError);
    expect(b.algorithm.limit).to.equal(600);
  });

  it('revives a policy read back from JSON in place: equal content, shared parts, pooled strings', () => {
    const stored = storedPolicy(input(RAW), 2, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
    const pool = new StringPool();
    const first = revivedPolicy(JSON.parse(JSON.stringify(stored)), pool);
    const second = revivedPolicy(JSON.parse(JSON.stringify({ ...stored, policy_id: 'other' })), pool);
    expect(first).to.deep.equal(JSON.parse(JSON.stringify(stored)));
    expect(first.algorithm).to.equal(stored.algorithm);
    expect(Object.is(first.created_at, second.updated_at)).to.equal(true);
  });

  /**
   * Issue 23: at 100,000 policies the live heap after build <= 80 MiB, i.e. <= 839 bytes a policy for
   * the stored policy, its compiled form and the index together (a size, counted, not a timing). The
   * validated objects of the earlier form (prototype-less maps, `delete`d algorithm fields) took ~2 KB.
   */
  it('a policy loaded from a policy file and compiled holds at most 839 bytes of live heap, in fast-mode objects of one shape', function () {
    this.timeout(120_000);
    const out = execFileSync(process.execPath, ['--expose-gc', '--allow-natives-syntax', '--import', 'tsx', 'test/support/policy-heap-child.ts', '20000'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
    });
    const result = JSON.parse(out) as { bytes_per_policy: number; compiled: number; fast: boolean; same_shape: boolean; shared_algorithm: boolean; shared_metadata: boolean };
    console.log(`      ${Math.round(result.bytes_per_policy)} bytes of live heap a policy (20,000 policies)`);
    expect(result.compiled).to.equal(20_000);
    expect(result).to.include({ fast: true, same_shape: true, shared_algorithm: true, shared_metadata: true });
    expect(result.bytes_per_policy).to.be.at.most(839);
  });
});
