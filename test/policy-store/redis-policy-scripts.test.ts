import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { protocolProblems } from '../../src/redis/script-protocol.js';
import { POLICY_SCRIPT_NAMES } from '../../src/redis/lua-scripts.js';
import { POLICY_PROTOCOLS, commitArgs, commitReply, entryOf, seededRevision, snapshotOf } from '../../src/policy-store/redis-policy-scripts.js';
import type { PolicyChange } from '../../src/policy-store/policy-store.js';

/** The policy scripts' protocols (redis-policy-scripts.ts) against their headers and the replies they read. */
describe('lua/policy script protocols', () => {
  for (const [name, protocol] of Object.entries(POLICY_PROTOCOLS)) {
    it(`${name}.lua's header lists its declared arguments and reply fields`, () => {
      const source = readFileSync(new URL(`../../lua/policy/${name}.lua`, import.meta.url), 'utf8');
      expect(protocolProblems(protocol, source)).to.deep.equal([]);
    });
  }

  it('every policy script has a declared protocol, so the loader checks each header', () => {
    expect(Object.keys(POLICY_PROTOCOLS).sort()).to.deep.equal([...POLICY_SCRIPT_NAMES].sort());
    for (const [name, protocol] of Object.entries(POLICY_PROTOCOLS)) expect(protocol.script).to.equal(`policy/${name}`);
  });

  it('commit sends its nine arguments in ARGV order, flags as 1/0, a delete with empty JSON', () => {
    const change = { policy_id: 'p', expectedHead: 3, mustExist: true, policy: null, audit: { action: 'delete' } } as unknown as PolicyChange;
    expect(commitArgs(change, { newHead: 3, channel: 'ch', kind: 'deleted' })).to.deep.equal(['p', '3', '1', '3', '', '', '{"action":"delete"}', 'ch', 'deleted']);
  });

  it('commit reads a commit as its revision and a refusal as the stored head and whether it exists', () => {
    expect(commitReply([1, 42, 4, 1])).to.deep.equal({ ok: true, revision: 42 });
    expect(commitReply([0, 0, 7, 0])).to.deep.equal({ ok: false, reason: 'conflict', head: 7, exists: false });
    expect(() => commitReply([1, 42])).to.throw(/unexpected policy\/commit reply/);
  });

  it('seed reads the revision it seeded at, 0 when the store had held policies', () => {
    expect(seededRevision([3])).to.equal(3);
    expect(seededRevision([0])).to.equal(0);
  });

  it('snapshot reads the revision and each hash\'s field/value list as a Map', () => {
    const snapshot = snapshotOf([12, ['p1', '{"policy_id":"p1"}', 'p2', '{"policy_id":"p2"}'], ['p1', '3', 'p2', '1'], ['p1', '12', 'p2', '9']]);
    expect(snapshot.revision).to.equal(12);
    expect([...snapshot.current.keys()]).to.deep.equal(['p1', 'p2']);
    expect(Object.fromEntries(snapshot.heads)).to.deep.equal({ p1: '3', p2: '1' });
    expect(Object.fromEntries(snapshot.changed)).to.deep.equal({ p1: '12', p2: '9' });
    expect(snapshotOf([0, [], [], []]).current.size).to.equal(0);
    expect(() => snapshotOf([3, ['p1'], [], []])).to.throw(/unexpected field\/value list/);
  });

  it('read_one reads an absent policy as undefined beside its head and last change', () => {
    expect(entryOf(['', 5, 9, 12])).to.deep.equal({ policy: undefined, head: 5, changed: 9 });
  });
});
