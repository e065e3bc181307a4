import { expect } from 'chai';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { readLuaScript } from '../../src/redis/lua-scripts.js';
import { defineProtocol, luaName, protocolProblems } from '../../src/redis/script-protocol.js';

/** A script that takes its operation first, and a reply with an optional id at the end. */
const SAMPLE = defineProtocol({
  script: 'sample',
  operationArg: true,
  operations: { put: ['units', 'lockMs', 'fresh', 'tag'], peek: [] },
  reply: { done: 'flag', left: 'number', tag: 'tag', lock: 'id', stale: 'id' },
  optionalFields: 1,
});

const HEADER = [
  '-- sample: a script for the protocol tests.',
  '-- ARGV[1]  now',
  '-- ARGV[2]  operation; its arguments follow:',
  '--            put   units lock_ms fresh tag (a remark)',
  '--            peek',
  '-- Returns  {done 1/0, left, tag, lock,',
  '--          [, stale]}: what each means',
  '',
  'return {1, 2}',
].join('\n');

/** A script of one operation, whose ARGV lines name its arguments. */
const SINGLE = defineProtocol({ script: 'single', operationArg: false, operations: { run: ['policyId', 'expectedHead'] }, reply: { ok: 'flag', revision: 'number' } });

/** Optional trailing arguments: `run` sends its window pair only when it applies; `peek` has none. */
const TAILED = defineProtocol({
  script: 'tailed',
  operationArg: true,
  operations: { run: ['units', 'limit', 'start', 'end'], peek: ['units'] },
  optionalArgs: ['start', 'end'],
  reply: { ok: 'flag' },
});

/** A reply with nested field/value lists (as lua/policy/snapshot.lua's HGETALLs). */
const LISTS = defineProtocol({ script: 'lists', operationArg: false, operations: { read: [] }, reply: { revision: 'number', owners: 'pairs', heads: 'pairs' } });

describe('script protocols (src/redis/script-protocol.ts)', function () {
  it('spells names in the Lua header in snake_case', function () {
    expect(luaName('retryAfterMs')).to.equal('retry_after_ms');
    expect(luaName('left')).to.equal('left');
  });

  it('builds an operation ARGV in declared order, its name first', function () {
    expect(SAMPLE.argv('put', { tag: null, fresh: true, lockMs: 25, units: 3 })).to.deep.equal(['put', '3', '25', '1', '']);
    expect(SAMPLE.argv('peek', {})).to.deep.equal(['peek']);
    expect(SINGLE.argv('run', { expectedHead: 4, policyId: 'p1' })).to.deep.equal(['p1', '4']);
  });

  it('leaves optional trailing arguments out of ARGV when they do not apply, sends those given', function () {
    expect(TAILED.argv('run', { units: 2, limit: 5 })).to.deep.equal(['run', '2', '5']);
    expect(TAILED.argv('run', { units: 2, limit: 5, start: 100, end: 200 })).to.deep.equal(['run', '2', '5', '100', '200']);
    expect(TAILED.argv('run', { units: 2, limit: 5, start: 100 })).to.deep.equal(['run', '2', '5', '100']);
    // null is a value ('' none), not a left-out argument.
    expect(TAILED.argv('run', { units: 2, limit: 5, start: null, end: null })).to.deep.equal(['run', '2', '5', '', '']);
    expect(TAILED.argv('peek', { units: 1 })).to.deep.equal(['peek', '1']);
  });

  it('refuses an optional argument given after one left out, and an optional argument declared before a required one', function () {
    expect(() => TAILED.argv('run', { units: 2, limit: 5, end: 200 })).to.throw('tailed run: end given without start');
    expect(() =>
      defineProtocol({ script: 'bad', operationArg: false, operations: { run: ['start', 'units'] }, optionalArgs: ['start'], reply: { ok: 'flag' } }),
    ).to.throw('bad run: optional arguments must come last, but units follows them');
  });

  it('reads a reply into named fields, the optional id absent or present', function () {
    expect(SAMPLE.parse([1, 5, '', 0])).to.deep.equal({ done: true, left: 5, tag: null, lock: undefined, stale: undefined });
    expect(SAMPLE.parse([0, '2.5', '7', 'r:1', 'r:0'])).to.deep.equal({ done: false, left: 2.5, tag: 7, lock: 'r:1', stale: 'r:0' });
  });

  it('refuses a reply of another shape', function () {
    expect(() => SAMPLE.parse([1, 5, ''])).to.throw(/unexpected sample reply/);
    expect(() => SAMPLE.parse([1, 5, '', 0, 0, 0])).to.throw(/unexpected sample reply/);
    expect(() => SAMPLE.parse('OK')).to.throw(/unexpected sample reply/);
    expect(() => SAMPLE.parse([1, 'x', '', 0])).to.throw(/unexpected number "x" in sample reply/);
  });

  it('builds the reply a port of the script returns, which reads back the same', function () {
    const wire = SAMPLE.encodeReply({ done: true, left: 4, tag: '9', lock: undefined, stale: undefined });
    expect(wire).to.deep.equal([1, 4, '9', 0]);
    expect(SAMPLE.encodeReply({ done: false, left: 0, tag: '', lock: 'r:2', stale: 'r:1' })).to.deep.equal([0, 0, '', 'r:2', 'r:1']);
    expect(SAMPLE.parse(wire)).to.deep.equal({ done: true, left: 4, tag: 9, lock: undefined, stale: undefined });
  });

  it('reads a nested field/value list as a Map, in its order, and builds it back as the flat list', function () {
    const parsed = LISTS.parse([7, ['b', '2', 'a', '1'], []]);
    expect(parsed.revision).to.equal(7);
    expect([...parsed.owners]).to.deep.equal([['b', '2'], ['a', '1']]);
    expect(parsed.heads.size).to.equal(0);
    const wire = LISTS.encodeReply({ revision: 3, owners: ['p', '{"x":1}'], heads: ['p', '4'] });
    expect(wire).to.deep.equal([3, ['p', '{"x":1}'], ['p', '4']]);
    expect(LISTS.parse(wire).heads.get('p')).to.equal('4');
  });

  it('refuses a field/value list that is not one: a field without its value, a number, no list', function () {
    expect(() => LISTS.parse([1, ['a'], []])).to.throw(/unexpected field\/value list \["a"\] in lists reply/);
    expect(() => LISTS.parse([1, ['a', 1], []])).to.throw(/unexpected field\/value list/);
    expect(() => LISTS.parse([1, 'a,b', []])).to.throw(/unexpected field\/value list "a,b"/);
    expect(() => LISTS.parse([1, []])).to.throw(/unexpected lists reply/);
  });

  it('allows only ids to be optional', function () {
    expect(() => defineProtocol({ script: 'bad', operationArg: false, operations: {}, reply: { a: 'id', b: 'number' }, optionalFields: 1 })).to.throw(/only id fields/);
  });

  it('finds a header that lists the same names in the same order', function () {
    expect(protocolProblems(SAMPLE, HEADER)).to.deep.equal([]);
    const single = ['-- single: one operation.', '-- ARGV[1]  policy_id', '-- ARGV[2]  expected_head, as read', '-- Returns  {ok 1/0, revision}', 'return {1}'].join('\n');
    expect(protocolProblems(SINGLE, single)).to.deep.equal([]);
    const lists = ['-- lists: no arguments.', '-- KEYS[1..2]  owners, heads', '-- Returns  {revision, owners, heads}: each list flat', 'return {0, {}, {}}'].join('\n');
    expect(protocolProblems(LISTS, lists)).to.deep.equal([]);
    expect(protocolProblems(LISTS, lists.replace('owners, heads}', 'HGETALL owners, heads}'))).to.deep.equal(['reply fields {revision, HGETALL, heads}, declared {revision, owners, heads}']);
  });

  it('names each difference: an argument out of order, a missing operation, a reply field renamed', function () {
    const swapped = HEADER.replace('units lock_ms fresh', 'lock_ms units fresh').replace('--            peek\n', '').replace('left,', 'remaining,');
    const problems = protocolProblems(SAMPLE, swapped);
    expect(problems).to.have.length(3);
    expect(problems[0]).to.match(/^operation put: no header line "--   put units lock_ms fresh tag" \(found: lock_ms units fresh tag\)/);
    expect(problems[1]).to.match(/^operation peek: no header line/);
    expect(problems[2]).to.equal('reply fields {done, remaining, tag, lock, stale}, declared {done, left, tag, lock, stale}');
    expect(protocolProblems(SAMPLE, HEADER.replace('Returns', 'Answers'))).to.deep.equal(['no "Returns  {...}" in the header']);
    expect(protocolProblems(SINGLE, '-- ARGV[1]  expected_head\n-- Returns  {ok, revision}')[0]).to.match(/^ARGV lines name expected_head, not ending with policy_id expected_head/);
  });

  it('is checked by the loader when it is given the protocol', function () {
    const dir = mkdtempSync(join(tmpdir(), 'protocol-'));
    writeFileSync(join(dir, 'sample.lua'), HEADER);
    const url = pathToFileURL(`${dir}/`);
    expect(readLuaScript('sample', 1, url, SAMPLE).lua).to.equal(HEADER);
    writeFileSync(join(dir, 'sample.lua'), HEADER.replace('lock,', 'refill,'));
    expect(() => readLuaScript('sample', 1, url, SAMPLE)).to.throw(/sample\.lua: header differs from its protocol: reply fields \{done, left, tag, refill, stale\}/);
  });
});
