/**
 * How a bucket's usage reports credit its grants when they came from different counters: a report does
 * not say which grant its requests spent, so a grant of another counter (an older window, a replaced
 * policy) counts as spent up to everything reported since it was sent. Crediting the oldest grant first
 * across counters would give back to the new counter units Envoy really spent of it: over the limit.
 */
import { expect } from 'chai';
import type { LayerCounter } from '../../src/lease/rlqs-grant.js';
import { BucketLedger, type HeldGrant } from '../../src/lease/rlqs-ledger.js';
import type { LocalMs } from '../../src/lease/types.js';

const HOLD_MS = 1000;
const layer = { policyId: 'p', holdMs: HOLD_MS } as LayerCounter;
const at = (ms: number) => ms as LocalMs;

function held(units: number, counter: string): HeldGrant {
  return { grant: { units, layers: [layer], windowTags: [0], spendBy: at(1e9), failedOpen: false }, layers: [layer], expiresAt: at(1e9), spent: 0, counter };
}

describe('RLQS bucket ledger: crediting reports across counters', () => {
  for (const [change, older, newer] of [
    ['a window rollover', 'checkout\n1\n100', 'checkout\n1\n101'],
    ['a policy swap', 'checkout\n1\n100', 'checkout-v2\n1\n100'],
  ] as const) {
    it(`across ${change}, the new counter's grant is credited with every request reported since it was sent`, () => {
      const ledger = new BucketLedger();
      const old = held(10, older);
      ledger.replace(old, at(0));
      // Envoy spent 3 of the old grant, then all 10 of the new one: its report says 13.
      const next = held(10, newer);
      ledger.replace(next, at(10));
      ledger.report(13, at(20));
      expect(next.spent, 'the new counter keeps all it handed out').to.equal(10);
      expect(old.spent, 'the old counter: as spent as the report allows').to.equal(10);
      // A hold later the old grant settles: nothing of it goes back that may have been spent.
      const settled = ledger.report(0, at(10 + HOLD_MS));
      expect(settled).to.deep.equal([old]);
      expect(ledger.unitsHeld()).to.equal(0);
    });
  }

  it('grants of one counter are credited oldest first, so a report is counted once there', () => {
    const ledger = new BucketLedger();
    const first = held(10, 'c\n1\n100');
    ledger.replace(first, at(0));
    const second = held(10, 'c\n1\n100');
    ledger.replace(second, at(10));
    ledger.report(13, at(20));
    expect([first.spent, second.spent]).to.deep.equal([10, 3]);
    expect(ledger.unitsHeld()).to.equal(7);
  });
});
