/**
 * The counter scripts' protocols (src/redis/counter-script-protocols.ts): each script's header lists the
 * declared arguments and reply fields in their order.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { COUNTER_PROTOCOLS, CONCURRENCY_RELEASE, SCRIPT_PROTOCOLS, FIXED_WINDOW, LEASE_REPLY, QUOTA, SLIDING_WINDOW_LOG, specParams } from '../../src/redis/counter-script-protocols.js';
import type { CounterSpec } from '../../src/counters/counter-spec.js';
import { LUA_DIR, SCRIPT_NAMES } from '../../src/redis/lua-scripts.js';
import { protocolProblems } from '../../src/redis/script-protocol.js';

describe('counter script protocols', () => {
  for (const protocol of COUNTER_PROTOCOLS) {
    it(`${protocol.script}.lua's header lists its declared arguments and reply fields`, () => {
      expect(protocolProblems(protocol, readFileSync(new URL(`${protocol.script}.lua`, LUA_DIR), 'utf8'))).to.deep.equal([]);
    });
  }

  it('the loader checks every counter script against its protocol (region_pool: src/regions/region-pool-protocol.ts)', () => {
    for (const name of SCRIPT_NAMES) if (name !== 'region_pool') expect(SCRIPT_PROTOCOLS[name]?.script, name).to.equal(name);
  });

  it('every reply starts with the decision fields the reader takes from one place, a share report last', () => {
    const decision = Object.keys(FIXED_WINDOW.reply);
    for (const protocol of COUNTER_PROTOCOLS) {
      if (protocol !== CONCURRENCY_RELEASE) expect(Object.keys(protocol.reply).slice(0, decision.length)).to.deep.equal(decision);
    }
    expect(Object.keys(CONCURRENCY_RELEASE.reply).slice(1)).to.deep.equal(decision.slice(1));
    expect(Object.keys(SLIDING_WINDOW_LOG.reply).at(-1)).to.equal('shares');
    expect(Object.keys(LEASE_REPLY.reply).at(-1)).to.equal('shares');
  });

  it("a calendar spec's period pair and a sliding log's region share go last, only when they apply", () => {
    const window = { operation: 'consume', units: 1, limit: 5, windowMs: 1000 };
    expect(FIXED_WINDOW.argv('counter', window)).to.deep.equal(['consume', '1', '5', '1000']);
    expect(FIXED_WINDOW.argv('counter', { ...window, windowMs: 0, periodStart: 10, nextStart: 20, nextEnd: 30 })).to.deep.equal(['consume', '1', '5', '0', '10', '20', '30']);
    expect(QUOTA.argv('counter', { operation: 'peek', units: 1, limit: 7, periodMs: 2000 })).to.deep.equal(['peek', '1', '7', '2000']);
    expect(SLIDING_WINDOW_LOG.argv('counter', window)).to.deep.equal(['consume', '1', '5', '1000']);
    expect(SLIDING_WINDOW_LOG.argv('counter', { ...window, region: 'us', guarantee: 2, common: 3 })).to.deep.equal(['consume', '1', '5', '1000', 'us', '2', '3']);
  });

  it("a spec's parameters go in its script's declared order, read from the spec's fields of those names", () => {
    const specs: [CounterSpec, string[]][] = [
      [{ type: 'fixed_window', limit: 5, windowMs: 1000 }, ['5', '1000']],
      [{ type: 'quota', limit: 7, periodMs: 2000 }, ['7', '2000']],
      [{ type: 'sliding_window_counter', limit: 5, windowMs: 1000, subWindows: 4 }, ['5', '1000', '4']],
      [{ type: 'sliding_window_log', limit: 3, windowMs: 500 }, ['3', '500']],
      [{ type: 'token_bucket', capacity: 9, rateUnits: 2, ratePeriodMs: 100 }, ['9', '2', '100']],
      [{ type: 'leaky_bucket', capacity: 8, rateUnits: 1, ratePeriodMs: 50 }, ['8', '1', '50']],
      [{ type: 'concurrency', maxConcurrency: 4, leaseTtlMs: 30000 }, ['4', '30000']],
    ];
    for (const [spec, params] of specs) expect(specParams(spec), spec.type).to.deep.equal(params);
  });
});
