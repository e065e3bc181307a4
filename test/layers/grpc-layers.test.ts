/** `layers` on the rl.v1 gRPC answer: present for a decision over two or more layers, as over HTTP. */
import { expect } from 'chai';
import type { Decision } from '../../src/model/decision.js';
import { setLogLevel } from '../../src/util/log.js';
import { makePolicy } from '../support/policies.js';
import { rateLimitClient, startGrpc, unary, type GrpcFixture } from '../grpc/helpers.js';

describe('Layers over gRPC (rl.v1 CheckLimit)', () => {
  let fixture: GrpcFixture;
  before(() => setLogLevel('silent'));
  after(async () => fixture?.close());

  it('answers every layer\'s verdict; a one-layer answer has none', async () => {
    fixture = await startGrpc([
      makePolicy({ policy_id: 'per-user', layer: 'user', scope: { user_id: '*' }, algorithm: { type: 'fixed_window', limit: 1, window: '1m' } }),
      makePolicy({ policy_id: 'per-org', layer: 'org', scope: { org_id: '*' }, algorithm: { type: 'fixed_window', limit: 5, window: '1m' } }),
    ]);
    const client = rateLimitClient(fixture.target);
    try {
      await unary<Decision>(client, 'CheckLimit', { org_id: 'o', user_id: 'u' });
      const refused = await unary<Decision>(client, 'CheckLimit', { org_id: 'o', user_id: 'u' });
      expect(refused).to.deep.include({ allowed: false, matched_policy_id: 'per-user' });
      expect(refused.layers?.map((l) => [l.layer, l.policy_id, l.allowed, String(l.remaining)])).to.deep.equal([
        ['org', 'per-org', true, '4'],
        ['user', 'per-user', false, '0'],
      ]);
      const single = await unary<Decision>(client, 'CheckLimit', { org_id: 'other' });
      expect(single.matched_policy_id).to.equal('per-org');
      expect(single.layers ?? []).to.deep.equal([]);
    } finally {
      client.close();
    }
  });
});
