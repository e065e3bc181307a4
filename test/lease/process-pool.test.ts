/**
 * ProcessUnitPool on its own: which batch a spend takes from, and how far a refund can go back. The
 * holder's tests (lease-holder.test.ts) and the simulation cover it through the LeaseHolder.
 */
import { expect } from 'chai';
import { ProcessUnitPool } from '../../src/lease/process-pool.js';
import type { Grant, LocalMs } from '../../src/lease/types.js';

function grant(granted: number, windowTag: number, spendBy: number): Grant {
  return { granted, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, windowTag, spendBy, parentNow: 0, outcome: 'done' };
}

const at = (ms: number): LocalMs => ms;

describe('ProcessUnitPool', () => {
  it('a unit spent from a batch emptied while a refill of the same window landed can be refunded (into the newer batch)', () => {
    const pool = new ProcessUnitPool();
    pool.add(grant(2, 7, 1000), at(0));
    pool.spend(1, at(1));
    pool.add(grant(3, 7, 2000), at(2));
    pool.spend(1, at(3)); // the last unit of the first batch
    expect(pool.refund(1, at(4))).to.deep.equal({ accepted: 1, lapsed: 0 });
    expect(pool.available(at(5))).to.equal(4);
  });

  it('a refund never brings back more than the window had spent (usage never below zero), whichever batch it came from', () => {
    const pool = new ProcessUnitPool();
    pool.add(grant(2, 7, 1000), at(0));
    pool.spend(1, at(1));
    pool.add(grant(3, 7, 2000), at(2));
    pool.spend(2, at(3)); // the first batch's last unit and one of the refill's
    expect(pool.refund(5, at(4)).accepted).to.equal(3);
    expect(pool.available(at(4))).to.equal(5); // all the parent granted
    expect(pool.refund(1, at(5)).accepted).to.equal(0);
  });

  it('a unit spent in an older window does not join a later window\'s batch: the refund lapses', () => {
    const pool = new ProcessUnitPool();
    pool.add(grant(2, 7, 1000), at(0));
    pool.spend(1, at(1));
    pool.add(grant(3, 8, 2000), at(2));
    expect(pool.refund(1, at(3)).accepted).to.equal(0);
    pool.spend(2, at(4)); // window 7's last unit, then one of window 8's
    expect(pool.refund(2, at(5)).accepted).to.equal(1);
  });

  it('a batch that lapsed with units spent: those stay refundable into a later batch of the same window', () => {
    const pool = new ProcessUnitPool();
    pool.add(grant(2, 7, 1000), at(0));
    pool.add(grant(3, 7, 2000), at(1));
    pool.spend(1, at(2));
    expect(pool.refund(1, at(1500))).to.deep.equal({ accepted: 1, lapsed: 1 });
    expect(pool.available(at(1500))).to.equal(4);
  });

  it('a bucket: a unit spent from a take emptied and dropped joins the newest take', () => {
    const pool = new ProcessUnitPool(true);
    pool.add(grant(2, 5000, 1000), at(0));
    pool.add(grant(3, 6000, 2000), at(1));
    pool.spend(2, at(2));
    expect(pool.refund(3, at(3)).accepted).to.equal(2);
    expect(pool.drain(at(4))).to.deep.equal({ units: 5, windowTag: 6000, lapsed: 0 });
  });

  it('once every batch is gone (lapsed or drained), a refund has nothing to join: it lapses', () => {
    const pool = new ProcessUnitPool();
    pool.add(grant(2, 7, 1000), at(0));
    pool.spend(1, at(1));
    pool.drain(at(2));
    pool.add(grant(2, 7, 1000), at(3));
    expect(pool.refund(1, at(4)).accepted).to.equal(0);
  });
});
