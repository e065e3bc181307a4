import { expect } from 'chai';
import { auditAction, changeLine, changeSummary, policyChanges } from '../../src/policy/policy-changes.js';

/** The change lines `rl policies audit`, `rl diff` and the dashboard's audit trail all print. */
describe('policy changes (one implementation for the CLI and the dashboard)', () => {
  const v1 = {
    policy_id: 'p',
    version: 1,
    created_at: '2030-01-01T00:00:00.000Z',
    updated_at: '2030-01-01T00:00:00.000Z',
    algorithm: { type: 'fixed_window', limit: 5, window: '1m' },
    scope: { org_id: 'acme', tags: { env: 'prod' } },
    description: '',
  };

  it('lists each changed leaf by dotted path, old -> new, ignoring the fields the server sets', () => {
    const v2 = { ...v1, version: 2, updated_at: '2030-01-01T00:01:00.000Z', algorithm: { ...v1.algorithm, limit: 6 }, scope: { org_id: 'acme', tags: { env: 'dev', team: 'a' } } };
    expect(policyChanges(v1, v2).map(changeLine)).to.deep.equal([
      'algorithm.limit: 5 -> 6',
      'scope.tags.env: "prod" -> "dev"',
      'scope.tags.team: (none) -> "a"',
    ]);
    expect(changeSummary(v1, v2)).to.equal('algorithm.limit: 5 -> 6, scope.tags.env: "prod" -> "dev", scope.tags.team: (none) -> "a"');
  });

  it('says created, deleted, or that no field changed; key order is no change', () => {
    expect(changeSummary(null, v1)).to.equal('created');
    expect(changeSummary(v1, null)).to.equal('deleted');
    const reordered = { ...v1, version: 2, scope: { tags: { env: 'prod' }, org_id: 'acme' } };
    expect(policyChanges(v1, reordered)).to.deep.equal([]);
    expect(changeSummary(v1, reordered)).to.equal('no field changed');
  });

  it('names the action, and for a rollback the version it restored (when the entry records it)', () => {
    expect(auditAction({ action_type: 'rollback', restored_version: 2 })).to.equal('rollback to v2');
    expect(auditAction({ action_type: 'rollback' })).to.equal('rollback');
    expect(auditAction({ action_type: 'patch' })).to.equal('patch');
  });
});
