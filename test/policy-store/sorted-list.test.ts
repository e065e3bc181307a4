import { expect } from 'chai';
import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FilePolicyStore } from '../../src/policy-store/file-policy-store.js';
import { resortOne } from '../../src/policy-store/policy-store.js';
import type { Policy } from '../../src/policy/types.js';
import { createChange, removeChange, updateChange, versionedPolicy } from '../support/policies.js';

const byId = (a: Policy, b: Policy) => (a.policy_id < b.policy_id ? -1 : a.policy_id > b.policy_id ? 1 : 0);

describe('the policy list kept sorted change by change', () => {
  it('property: resortOne after each change equals sorting the current set again', () => {
    const op = fc.record({ id: fc.constantFrom('a', 'b', 'B', 'c', 'a-1', 'z', '0'), present: fc.boolean(), version: fc.integer({ min: 1, max: 9 }) });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        const current = new Map<string, Policy>();
        const sorted: Policy[] = [];
        for (const { id, present, version } of ops) {
          const policy = present ? versionedPolicy(id, version) : undefined;
          if (policy) current.set(id, policy);
          else current.delete(id);
          resortOne(sorted, id, policy);
          expect(sorted).to.deep.equal([...current.values()].sort(byId));
        }
      }),
    );
  });

  it("FilePolicyStore.list() follows creates, updates and deletes made after it was first read", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-sorted-'));
    const store = await FilePolicyStore.open(dir);
    try {
      const b1 = versionedPolicy('b', 1);
      await store.commit(createChange(b1));
      expect(store.list().map((p) => p.policy_id)).to.deep.equal(['b']);
      await store.commit(createChange(versionedPolicy('a', 1)));
      await store.commit(createChange(versionedPolicy('c', 1)));
      await store.commit(updateChange(versionedPolicy('b', 2, 20), b1));
      expect(store.list().map((p) => [p.policy_id, p.version])).to.deep.equal([['a', 1], ['b', 2], ['c', 1]]);
      await store.commit(removeChange(versionedPolicy('a', 1)));
      expect(store.list().map((p) => p.policy_id)).to.deep.equal(['b', 'c']);
      const listed = store.list();
      listed.pop(); // a caller's copy: changing it changes nothing held
      expect(store.list().map((p) => p.policy_id)).to.deep.equal(['b', 'c']);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
