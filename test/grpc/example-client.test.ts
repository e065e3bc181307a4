import * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import { runExample } from '../../examples/grpc-client.js';
import { RlError } from '../../src/errors.js';
import { credentialsFromMetadata } from '../../src/grpc/server.js';
import { loadPolicyFile } from '../../src/policy/policy-file.js';
import { setLogLevel } from '../../src/util/log.js';
import { startGrpc, type GrpcFixture } from './helpers.js';

describe('examples/grpc-client.ts', () => {
  let fixture: GrpcFixture | undefined;

  before(() => setLogLevel('silent'));
  after(() => setLogLevel('info'));
  afterEach(async () => {
    await fixture?.close();
    fixture = undefined;
  });

  it('runs CheckLimit, Acquire and Release against the example policies', async () => {
    fixture = await startGrpc(loadPolicyFile('examples/policies.json'));
    const lines: string[] = [];
    const decisions = await runExample(fixture.target, { print: (line) => lines.push(line) });
    expect(decisions).to.have.length(3);
    expect(decisions[0]).to.deep.include({
      allowed: true,
      action: 'allow',
      reason: 'within_limit',
      matched_policy_id: 'acme-api-per-user',
      remaining: 99,
      limit: 100,
      retry_after: 0,
      shadow_mode: false,
    });
    expect(decisions[1]).to.deep.include({ allowed: true, reason: 'lease_acquired', matched_policy_id: 'report-export-concurrency', remaining: 2, limit: 3 });
    expect(decisions[1].metadata.lease_id).to.equal('example-export-42');
    expect(decisions[2]).to.deep.include({ allowed: true, reason: 'lease_released', remaining: 3 });
    expect(lines).to.have.length(3);
    expect(lines[0]).to.match(/^CheckLimit /);
  });

  it('sends the API key as x-api-key metadata and surfaces gRPC errors', async () => {
    fixture = await startGrpc(loadPolicyFile('examples/policies.json'), {
      authenticate: (metadata) => {
        if (credentialsFromMetadata(metadata).apiKey !== 'k-123') throw new RlError('unauthenticated', 'bad key');
        return { subject: 'example', role: 'read-only' };
      },
    });
    const decisions = await runExample(fixture.target, { apiKey: 'k-123', print: () => {} });
    expect(decisions.map((d) => d.reason)).to.deep.equal(['within_limit', 'lease_acquired', 'lease_released']);
    try {
      await runExample(fixture.target, { print: () => {} });
      expect.fail('expected UNAUTHENTICATED');
    } catch (error) {
      expect((error as grpc.ServiceError).code).to.equal(grpc.status.UNAUTHENTICATED);
    }
  });
});
