/**
 * The take ledger's entries: named fields in the code, and the stored form (`a`, `b`, `c` by kind) that
 * memory-mode snapshots write, unchanged, so saved counters read back as they were written.
 */
import { expect } from 'chai';
import { entryOf, storedOf, type StoredLedgerEntry } from '../../src/counters/parent-take-ledger.js';

describe('take ledger entries (src/counters/parent-take-ledger.ts)', () => {
  const grant: StoredLedgerEntry = { expireAt: 61_000, seq: 3, kind: 'g', a: 5, b: 1_000, c: 1_000 };
  const give: StoredLedgerEntry = { expireAt: 62_000, seq: 4, kind: 'v', a: 2, b: 1, c: 0 };
  const reclaim: StoredLedgerEntry = { expireAt: 63_000, seq: 5, kind: 'r', a: 0, b: 0, c: 0, by: 'holder-1' };

  it('reads each kind by name', () => {
    expect(entryOf(grant)).to.deep.equal({ expireAt: 61_000, seq: 3, kind: 'g', units: 5, tag: 1_000, giveTag: 1_000 });
    expect(entryOf(give)).to.deep.equal({ expireAt: 62_000, seq: 4, kind: 'v', back: 2, lapsed: 1 });
    expect(entryOf(reclaim)).to.deep.equal({ expireAt: 63_000, seq: 5, kind: 'r', back: 0, lapsed: 0, by: 'holder-1' });
  });

  it('stores each kind as before, byte for byte in JSON (a give has no reclaimer, a reclaim always one)', () => {
    for (const stored of [grant, give, reclaim]) expect(JSON.stringify(storedOf(entryOf(stored)))).to.equal(JSON.stringify(stored));
    expect(JSON.stringify(storedOf({ expireAt: 1, seq: 1, kind: 'r', back: 0, lapsed: 0 }))).to.equal('{"expireAt":1,"seq":1,"kind":"r","a":0,"b":0,"c":0,"by":""}');
  });
});
