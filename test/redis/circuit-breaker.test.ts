import { expect } from 'chai';
import { CircuitBreaker, type BreakerState } from '../../src/redis/circuit-breaker.js';

describe('CircuitBreaker', function () {
  let clock: number;
  let changes: string[];
  const make = (failureThreshold = 3, coolDownMs = 1000) =>
    new CircuitBreaker({
      failureThreshold,
      coolDownMs,
      now: () => clock,
      onStateChange: (to: BreakerState, from: BreakerState) => changes.push(`${from}->${to}`),
    });

  beforeEach(function () {
    clock = 1_000;
    changes = [];
  });

  it('starts closed and lets requests through', function () {
    const breaker = make();
    expect(breaker.state).to.equal('closed');
    for (let i = 0; i < 10; i++) expect(breaker.tryAcquire()).to.equal(true);
  });

  it('opens after failureThreshold consecutive failures, not before', function () {
    const breaker = make(3);
    breaker.recordFailure();
    breaker.recordFailure();
    expect(breaker.state).to.equal('closed');
    expect(breaker.consecutiveFailures).to.equal(2);
    breaker.recordFailure();
    expect(breaker.state).to.equal('open');
    expect(breaker.tryAcquire()).to.equal(false);
    expect(changes).to.deep.equal(['closed->open']);
  });

  it('a success resets the consecutive count', function () {
    const breaker = make(3);
    breaker.recordFailure();
    breaker.recordFailure();
    breaker.recordSuccess();
    expect(breaker.consecutiveFailures).to.equal(0);
    breaker.recordFailure();
    breaker.recordFailure();
    expect(breaker.state).to.equal('closed');
  });

  it('stays open for the cool-down, then lets exactly one trial through', function () {
    const breaker = make(1, 1000);
    breaker.recordFailure();
    clock += 999;
    expect(breaker.tryAcquire()).to.equal(false);
    expect(breaker.state).to.equal('open');
    clock += 1;
    expect(breaker.state).to.equal('half_open');
    expect(breaker.tryAcquire()).to.equal(true); // the trial
    expect(breaker.tryAcquire()).to.equal(false); // others wait for its outcome
    expect(breaker.tryAcquire()).to.equal(false);
    expect(changes).to.deep.equal(['closed->open', 'open->half_open']);
  });

  it('half-open: a successful trial closes it', function () {
    const breaker = make(2, 500);
    breaker.recordFailure();
    breaker.recordFailure();
    clock += 500;
    expect(breaker.tryAcquire()).to.equal(true);
    breaker.recordSuccess();
    expect(breaker.state).to.equal('closed');
    expect(breaker.tryAcquire()).to.equal(true);
    expect(breaker.tryAcquire()).to.equal(true);
    expect(changes).to.deep.equal(['closed->open', 'open->half_open', 'half_open->closed']);
  });

  it('half-open: a failed trial re-opens it for a new cool-down', function () {
    const breaker = make(2, 500);
    breaker.recordFailure();
    breaker.recordFailure();
    clock += 600;
    expect(breaker.tryAcquire()).to.equal(true);
    breaker.recordFailure(); // one failure is enough in half-open
    expect(breaker.state).to.equal('open');
    clock += 499;
    expect(breaker.tryAcquire()).to.equal(false);
    clock += 1;
    expect(breaker.tryAcquire()).to.equal(true);
    expect(changes).to.deep.equal(['closed->open', 'open->half_open', 'half_open->open', 'open->half_open']);
  });

  it('a trial that never reports does not wedge the breaker', function () {
    const breaker = make(1, 1000);
    breaker.recordFailure();
    clock += 1000;
    expect(breaker.tryAcquire()).to.equal(true); // trial lost: never reports
    clock += 999;
    expect(breaker.tryAcquire()).to.equal(false);
    clock += 1;
    expect(breaker.tryAcquire()).to.equal(true); // a new trial
  });

  it('reset() closes it', function () {
    const breaker = make(1);
    breaker.recordFailure();
    breaker.reset();
    expect(breaker.state).to.equal('closed');
    expect(breaker.consecutiveFailures).to.equal(0);
    expect(breaker.tryAcquire()).to.equal(true);
  });

  it('an open breaker refuses at once: one clock read per call, nothing waited for, nothing changed', function () {
    let clockReads = 0;
    const breaker = new CircuitBreaker({
      failureThreshold: 1,
      coolDownMs: 60_000,
      now: () => {
        clockReads++;
        return clock;
      },
      onStateChange: (to, from) => changes.push(`${from}->${to}`),
    });
    breaker.recordFailure();
    clockReads = 0;
    // Synchronous by its signature (a boolean, not a promise): the only work is the cool-down check.
    let refused = 0;
    for (let i = 0; i < 100_000; i++) if (breaker.tryAcquire() === false) refused++;
    expect(refused).to.equal(100_000);
    expect(clockReads).to.equal(100_000);
    expect(breaker.state).to.equal('open');
    expect(changes).to.deep.equal(['closed->open']);
  });

  it('rejects bad options', function () {
    expect(() => new CircuitBreaker({ failureThreshold: 0 })).to.throw(/failureThreshold/);
    expect(() => new CircuitBreaker({ failureThreshold: 1.5 })).to.throw(/failureThreshold/);
    expect(() => new CircuitBreaker({ coolDownMs: -1 })).to.throw(/coolDownMs/);
  });
});
