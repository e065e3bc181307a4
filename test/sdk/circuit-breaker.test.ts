import { expect } from 'chai';
import { CircuitBreaker } from '../../sdk/src/circuit-breaker.js';

describe('SDK circuit breaker', () => {
  let now = 0;
  const clock = () => now;
  beforeEach(() => {
    now = 0;
  });

  it('opens after failureThreshold consecutive failures; a success in between resets the count', () => {
    const breaker = new CircuitBreaker({ failureThreshold: 3, coolDownMs: 100 }, clock);
    breaker.recordFailure();
    breaker.recordFailure();
    breaker.recordSuccess();
    breaker.recordFailure();
    breaker.recordFailure();
    expect(breaker.isOpen).to.equal(false);
    expect(breaker.tryAcquire()).to.equal(true);
    breaker.recordFailure();
    expect(breaker.isOpen).to.equal(true);
    expect(breaker.tryAcquire()).to.equal(false);
  });

  it('lets one trial through per cool-down; its success closes, its failure re-opens', () => {
    const breaker = new CircuitBreaker({ failureThreshold: 1, coolDownMs: 100 }, clock);
    breaker.recordFailure();
    now = 99;
    expect(breaker.tryAcquire()).to.equal(false);
    now = 100;
    expect(breaker.tryAcquire()).to.equal(true);
    expect(breaker.tryAcquire()).to.equal(false); // the trial is in flight
    breaker.recordFailure();
    now = 150;
    expect(breaker.tryAcquire()).to.equal(false); // a new cool-down from the failed trial
    now = 200;
    expect(breaker.tryAcquire()).to.equal(true);
    breaker.recordSuccess();
    expect(breaker.isOpen).to.equal(false);
    expect(breaker.tryAcquire()).to.equal(true);
    expect(breaker.tryAcquire()).to.equal(true);
  });

  it('a trial that never reports does not wedge it: another goes after a further cool-down', () => {
    const breaker = new CircuitBreaker({ failureThreshold: 1, coolDownMs: 100 }, clock);
    breaker.recordFailure();
    now = 100;
    expect(breaker.tryAcquire()).to.equal(true);
    now = 199;
    expect(breaker.tryAcquire()).to.equal(false);
    now = 200;
    expect(breaker.tryAcquire()).to.equal(true);
  });

  it('rejects bad options naming them', () => {
    expect(() => new CircuitBreaker({ failureThreshold: 0 })).to.throw(TypeError, /^breaker.failureThreshold/);
    expect(() => new CircuitBreaker({ coolDownMs: -1 })).to.throw(TypeError, /^breaker.coolDownMs/);
  });
});
