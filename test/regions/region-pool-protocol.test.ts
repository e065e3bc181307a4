/**
 * lua/region_pool.lua's protocol (src/regions/region-pool-protocol.ts): the script's header lists the
 * declared operations, arguments and reply fields in their order, and RegionPool sends each operation's
 * arguments in that order.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { LUA_DIR, readLuaScript } from '../../src/redis/lua-scripts.js';
import { protocolProblems } from '../../src/redis/script-protocol.js';
import { REGION_POOL } from '../../src/regions/region-pool-protocol.js';
import { RegionPool, type RegionPoolScript } from '../../src/regions/region-pool.js';

describe('lua/region_pool.lua protocol', () => {
  it('the header lists the declared names in their order, and the loader given the protocol reads it', () => {
    expect(protocolProblems(REGION_POOL, readFileSync(new URL('region_pool.lua', LUA_DIR), 'utf8'))).to.deep.equal([]);
    expect(readLuaScript('region_pool', 1, LUA_DIR, REGION_POOL).lua).to.include('-- >>> include "pool"');
  });

  it('RegionPool sends each operation its arguments in the declared order', async () => {
    const sent: string[][] = [];
    const reply = REGION_POOL.encodeReply({
      spent: true, left: 1, retryAfterMs: 0, refill: undefined, recent: 0, parentRemaining: -1, lapsed: 0, down: false, resetAfterMs: 0, tag: '', storeNow: 5, waiting: 0, waitsFor: 0, stale: undefined,
    });
    const script: RegionPoolScript = { runRegionPool: (_key, args, parse) => (sent.push(args), Promise.resolve(parse(reply))) };
    const pool = new RegionPool(script);
    const answer = await pool.spend('k', { cost: 2, lockMs: 10.5, token: 'srv', measureMs: 1000, op: 'take' });
    expect(answer).to.include({ spent: true, left: 1, lock: false, tag: null, storeNow: 5, stale: undefined });
    await pool.add('k', { units: 3, expiresAt: 99.7, tag: 4, window: true, parentRemaining: 7, retryAfterMs: 0.2, asked: 5 }, 'srv:1:20', 1000);
    await pool.fail('k', 'srv:1:20', 0.5);
    await pool.drain('k', 0, false);
    await pool.refund('k', 2);
    await pool.refund('k', 2, { tag: null });
    await pool.peek('k');
    expect(sent).to.deep.equal([
      ['take', '2', '11', 'srv', '1000', '1', '0'],
      ['add', '3', '99', '4', '7', 'srv:1:20', '1', '5', '1000', '1'],
      ['fail', 'srv:1:20', '1'],
      ['drain', '0', '0'],
      ['refund', '2', '', '0'],
      ['refund', '2', '', '1'],
      ['peek'],
    ]);
  });
});
