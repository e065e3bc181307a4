/**
 * The take ledger's lifetime (lua/includes/lease.lua): an entry lives a minute past the later of its
 * write and its deadline, whatever its units' window, so a counter with a 1 h window holds what a minute
 * of named takes wrote, not what the hour did, and never evicts a live entry below 256 a minute.
 */
import { expect } from 'chai';
import type { RateSpec } from '../../src/counters/counter-spec.js';
import { takesKey } from '../../src/counters/keys.js';
import type { RedisCounterStore } from '../../src/redis/redis-store.js';
import { at, forEachStore } from '../support/counter-stores.js';

const STEP_MS = 500;
const MINUTE_OF_TAKES = 60_000 / STEP_MS;

forEachStore((name, getStore) => {
  it('a 1 h window: ten minutes of named takes leave a minute of them in the ledger, each still answered', async () => {
    const { store, keys } = getStore();
    const spec: RateSpec = { type: 'fixed_window', limit: 100_000, windowMs: 3_600_000 };
    const k = keys('ledger-hour', spec);
    const ledgerKey = takesKey(k[0]);
    /** Entries whose expire-at has not passed, and fields in all (Redis: the hash itself). */
    const ledger = async (now: number): Promise<{ live: number; fields: number }> => {
      const flat = await (store as RedisCounterStore).client.hgetall(ledgerKey);
      const entries = Object.entries(flat).filter(([field]) => field !== 'x' && field !== 'n');
      return { live: entries.filter(([, v]) => Number(v.split(':')[0]) > now).length, fields: Object.keys(flat).length };
    };
    let last = 0;
    for (let i = 0; i < 1_200; i++) {
      last = at(i * STEP_MS);
      expect(await store.take!(k, spec, 1, last, { takeId: `t${i}`, deadline: last + 100 })).to.include({ units: 1, outcome: 'done' });
      if (name === 'redis' && i % 10 === 9) {
        const { live, fields } = await ledger(last);
        expect(live, `live entries after take #${i}`).to.be.at.most(MINUTE_OF_TAKES + 1);
        expect(fields, `fields after take #${i}`).to.be.at.most(256 + 2);
      }
    }
    // Every take of the last minute is still answered (none evicted); one from before is forgotten.
    const now = last + 1;
    for (let i = 1_200 - MINUTE_OF_TAKES; i < 1_200; i++) {
      expect((await store.take!(k, spec, 1, now, { takeId: `t${i}` })).outcome, `t${i}`).to.equal('repeat');
    }
    expect((await store.take!(k, spec, 1, now, { takeId: `t${1_200 - MINUTE_OF_TAKES - 2}` })).outcome).to.equal('done');
  });
});
