import { expect } from 'chai';
import { CounterStoreUnavailableError, RlError } from '../../src/errors.js';
import { errorResponse } from '../../src/http/errors.js';
import { setLogLevel } from '../../src/util/log.js';

describe('errorResponse (the one HTTP mapping of thrown errors)', () => {
  const where = { method: 'POST', path: '/rl/v1/check' };

  it('maps a typed error by its kind, with its details', () => {
    const { status, body } = errorResponse(new RlError('conflict', 'stale version', 'version'), where);
    expect(status).to.equal(409);
    expect(body).to.include({ error: 'stale version', status: 409 });
  });

  it('answers a counter store outage that escaped the failure modes with 503, as gRPC answers UNAVAILABLE', () => {
    expect(errorResponse(new CounterStoreUnavailableError('redis down'), where)).to.deep.equal({
      status: 503,
      body: { error: 'counter store unavailable', status: 503 },
    });
  });

  it('answers anything else with a 500 that reveals nothing', () => {
    setLogLevel('silent');
    try {
      expect(errorResponse(new TypeError('secret detail'), where)).to.deep.equal({ status: 500, body: { error: 'internal error', status: 500 } });
    } finally {
      setLogLevel('info');
    }
  });
});
