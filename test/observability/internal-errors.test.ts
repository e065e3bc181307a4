import * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import { RlError } from '../../src/errors.js';
import { toGrpcStatus } from '../../src/grpc/status.js';
import { errorResponse } from '../../src/http/errors.js';
import { Metrics } from '../../src/observability/metrics.js';
import { setLogLevel } from '../../src/util/log.js';

/** rl_internal_errors_total{transport}: every HTTP 500 and gRPC INTERNAL answer, and nothing else. */
describe('rl_internal_errors_total', () => {
  before(() => setLogLevel('silent'));
  after(() => setLogLevel('info'));

  async function counts(metrics: Metrics): Promise<Record<string, number>> {
    const text = await metrics.exposition();
    const out: Record<string, number> = {};
    for (const [, transport, value] of text.matchAll(/^rl_internal_errors_total\{transport="(\w+)"\} (\d+)$/gm)) out[transport] = Number(value);
    return out;
  }

  it('counts the 500s and INTERNALs the error mappers answer, not the 4xx or typed errors', async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const before = await counts(metrics);
    expect(Object.keys(before)).to.have.members(['http', 'grpc']);

    expect(errorResponse(new Error('bug'), { method: 'POST', path: '/rl/v1/check' }).status).to.equal(500);
    expect(errorResponse(new Error('bug'), { method: 'GET', path: '/rl/v1/policies' }).status).to.equal(500);
    expect(errorResponse(new RlError('invalid_argument', 'quantity: bad', 'quantity'), { method: 'POST', path: '/rl/v1/check' }).status).to.equal(400);
    expect(errorResponse(Object.assign(new Error('too big'), { status: 413 }), { method: 'POST', path: '/rl/v1/check' }).status).to.equal(413);
    expect(toGrpcStatus(new Error('bug'), 'CheckLimit').code).to.equal(grpc.status.INTERNAL);
    expect(toGrpcStatus(new RlError('unauthenticated', 'no key'), 'CheckLimit').code).to.equal(grpc.status.UNAUTHENTICATED);

    expect(await counts(metrics)).to.deep.equal({ http: before.http + 2, grpc: before.grpc + 1 });
    // Process-wide: a second registry of the same process reports the same counts.
    expect(await counts(new Metrics({ defaultMetrics: false }))).to.deep.equal({ http: before.http + 2, grpc: before.grpc + 1 });
  });
});
