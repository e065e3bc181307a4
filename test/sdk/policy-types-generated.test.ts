import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { POLICY_TYPES_FILE, policyTypesSource } from '../../scripts/generate-policy-types.js';

/**
 * The SDK's policy types are generated from the server's schema (scripts/generate-policy-types.ts);
 * a schema change without a regenerated file fails here.
 */
describe('SDK policy types: generated from the schema', () => {
  it('sdk/src/policy-types.generated.ts is what the generator writes today', () => {
    expect(readFileSync(POLICY_TYPES_FILE, 'utf8'), 'stale: run `npx tsx scripts/generate-policy-types.ts`').to.equal(policyTypesSource());
  });

  it('names every field of the stored policy, the scope and the lease', () => {
    const source = policyTypesSource();
    for (const field of ['policy_id', 'algorithm', 'budget_shares', 'layer', 'lease', 'max_hold', 'org_id', 'tags', 'calendar', 'lease_ttl']) {
      expect(source, field).to.match(new RegExp(`\\n  ${field}\\??: `));
    }
  });
});
