import { expect } from 'chai';
import { manualClock } from '../support/manual-clock.js';
import { CircuitBreaker } from '../../sdk/src/circuit-breaker.js';

describe('SDK circuit breaker', () => {
  const clock = manualClock(0);
  /** A breaker opened by one failure at 0, with a cool-down of 100 ms. */
  const openedAtZero = () => {
    const breaker = new CircuitBreaker({ failureThreshold: 1, coolDownMs: 100 }, clock.read);
    breaker.recordFailure();
    return breaker;
  };

  it('opens after failureThreshold consecutive failures; a success in between resets the count', () => {
    const breaker = new CircuitBreaker({ failureThreshold: 3, coolDownMs: 100 }, clock.read);
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
    const breaker = openedAtZero();
    clock.now = 99;
    expect(breaker.tryAcquire()).to.equal(false);
    clock.now = 100;
    expect(breaker.tryAcquire()).to.equal(true);
    expect(breaker.tryAcquire()).to.equal(false); // the trial is in flight
    breaker.recordFailure();
    clock.now = 150;
    expect(breaker.tryAcquire()).to.equal(false); // a new cool-down from the failed trial
    clock.now = 200;
    expect(breaker.tryAcquire()).to.equal(true);
    breaker.recordSuccess();
    expect(breaker.isOpen).to.equal(false);
    expect(breaker.tryAcquire()).to.equal(true);
    expect(breaker.tryAcquire()).to.equal(true);
  });

  it('a trial that never reports does not wedge it: another goes after a further cool-down', () => {
    const breaker = openedAtZero();
    // tryAcquire at 100 (the trial, never reported), at 199 and at 200.
    const acquired = [100, 199, 200].map((at) => {
      clock.now = at;
      return breaker.tryAcquire();
    });
    expect(acquired).to.deep.equal([true, false, true]);
  });

  it('rejects bad options naming them', () => {
    expect(() => new CircuitBreaker({ failureThreshold: 0 })).to.throw(TypeError, /^breaker.failureThreshold/);
    expect(() => new CircuitBreaker({ coolDownMs: -1 })).to.throw(TypeError, /^breaker.coolDownMs/);
  });
});
