/**
 * The counter scripts' protocols (src/redis/counter-script-protocols.ts): each script's header lists the
 * declared arguments and reply fields in their order.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { COUNTER_PROTOCOLS } from '../../src/redis/counter-script-protocols.js';
import { LUA_DIR } from '../../src/redis/lua-scripts.js';
import { protocolProblems } from '../../src/redis/script-protocol.js';

describe('counter script protocols', () => {
  for (const protocol of COUNTER_PROTOCOLS) {
    it(`${protocol.script}.lua's header lists its declared arguments and reply fields`, () => {
      expect(protocolProblems(protocol, readFileSync(new URL(`${protocol.script}.lua`, LUA_DIR), 'utf8'))).to.deep.equal([]);
    });
  }
});
