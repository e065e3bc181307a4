import { expect } from 'chai';
import { RestartBackoff } from '../../src/workers/restart-backoff.js';

describe('RestartBackoff', () => {
  it('doubles the delay while a slot keeps crashing, up to the maximum', () => {
    const backoff = new RestartBackoff(250, 4000, 60_000);
    expect(Array.from({ length: 7 }, () => backoff.next(10))).to.deep.equal([250, 500, 1000, 2000, 4000, 4000, 4000]);
  });

  it('starts over once a worker has lived the stable time', () => {
    const backoff = new RestartBackoff(100, 10_000, 5_000);
    expect([backoff.next(0), backoff.next(0), backoff.next(0)]).to.deep.equal([100, 200, 400]);
    expect(backoff.next(5_000)).to.equal(100);
    expect(backoff.next(4_999)).to.equal(200);
  });
});
