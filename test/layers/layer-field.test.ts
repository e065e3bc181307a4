import { expect } from 'chai';
import { RlError } from '../../src/errors.js';
import type { PolicyStore } from '../../src/policy-store/policy-store.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { PolicyService } from '../../src/policy-service/policy-service.js';
import { validatePolicy } from '../../src/policy/validate.js';
import { policyStoreBackends } from '../support/policy-store-backends.js';

const FIXED = { type: 'fixed_window', limit: 10, window: '1m' };

describe('layer on a policy', () => {
  it('is kept only when given, and must be a lower-case name of at most 32 characters', () => {
    const plain = validatePolicy({ policy_id: 'p', algorithm: FIXED });
    expect(plain.ok && 'layer' in plain.policy).to.equal(false);
    const named = validatePolicy({ policy_id: 'p', algorithm: FIXED, layer: 'platform' });
    expect(named.ok && named.policy.layer).to.equal('platform');
    for (const bad of ['Platform', '1st', '', 'a'.repeat(33), 'has space', 7]) {
      const r = validatePolicy({ policy_id: 'p', algorithm: FIXED, layer: bad });
      expect(r.ok, String(bad)).to.equal(false);
      if (!r.ok) expect(r.errors.map((e) => e.field)).to.deep.equal(['layer']);
    }
    expect(validatePolicy({ policy_id: 'p', algorithm: FIXED, layer: `a${'-_9'.repeat(10)}b` }).ok).to.equal(true);
  });

  it('rides along with the quota-shaped body', () => {
    const r = validatePolicy({ id: 'q', resource: 'api', config: { quota: 5, window_seconds: 60 }, layer: 'org' });
    expect(r.ok && r.policy.layer).to.equal('org');
  });
});

const BACKENDS = policyStoreBackends('rl-layers-');

for (const backend of BACKENDS) {
  describe(`at most 16 layers in a policy set (${backend.name} store)`, function () {
    this.timeout(20_000);
    let store: PolicyStore;
    let cleanup: () => Promise<void>;
    let service: PolicyService;

    beforeEach(async () => {
      ({ store, cleanup } = await backend.open());
      service = new PolicyService({ store, matcher: new LiveMatcher() });
    });
    afterEach(async () => {
      service.close();
      await cleanup();
    });

    const create = (id: string, layer?: string) => service.create({ policy_id: id, algorithm: FIXED, ...(layer !== undefined && { layer }) }, 'tester');

    async function refusal(write: Promise<unknown>): Promise<RlError> {
      try {
        await write;
      } catch (error) {
        if (error instanceof RlError) return error;
        throw error;
      }
      throw new Error('the write was accepted');
    }

    it('the 17th layer is a 422 naming layer; existing layers, moves and freed layers stay writable', async () => {
      await create('d'); // the default layer is one of the 16
      for (let i = 1; i <= 15; i++) await create(`p${i}`, `l${String(i).padStart(2, '0')}`);
      const refused = await refusal(create('x', 'l16'));
      expect([refused.kind, refused.field]).to.deep.equal(['failed_validation', 'layer']);
      expect(refused.message).to.contain('at most 16 layers');
      // A layer the set holds takes more policies, named or by default.
      await create('more', 'l01');
      await create('plain');
      // Moving the only policy of a layer to a new one keeps 16.
      const moved = await service.patch('p15', { layer: 'l16' }, 'tester');
      expect(moved.layer).to.equal('l16');
      expect(moved.version).to.equal(2);
      expect((await refusal(service.patch('more', { layer: 'l17' }, 'tester'))).field).to.equal('layer');
      // Deleting a layer's last policy frees its room.
      await service.delete('p14', 'tester');
      await create('x', 'l17');
      expect(service.get('x').layer).to.equal('l17');
      expect((await service.versions('p15')).map((v) => v.snapshot.layer)).to.deep.equal(['l15', 'l16']);
    });
  });
}
