import { expect } from 'chai';
import fc from 'fast-check';
import { CounterKeyCache, counterKeys, counterTag, takesKey } from '../../src/counters/keys.js';
import type { CounterSpec } from '../../src/counters/counter-spec.js';

const fixed: CounterSpec = { type: 'fixed_window', limit: 1, windowMs: 1000 };
const log: CounterSpec = { type: 'sliding_window_log', limit: 1, windowMs: 1000 };

/** The Redis Cluster hash tag of a key: between the first `{` and the first `}` after it. */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  const close = key.indexOf('}', open + 1);
  return key.slice(open + 1, close);
}

describe('counter keys', () => {
  it('keeps short identities readable and tags every key of a counter alike', () => {
    const [zset, sum] = counterKeys('rl:', 'login', log, ['source_ip', '10.0.0.1']);
    expect(zset).to.equal('rl:{5:login9:source_ip8:10.0.0.1}:sliding_window_log');
    expect(sum).to.equal(`${zset}:sum`);
    expect(hashTag(zset)).to.equal(hashTag(sum));
  });

  it('keeps the take ledger of a counter beside it, in its hash slot, whatever the identity', () => {
    fc.assert(
      fc.property(fc.string(), fc.string({ maxLength: 300 }), (policy, value) => {
        const [counter] = counterKeys('rl:', policy, fixed, ['user', value]);
        expect(takesKey(counter)).to.equal(`${counter}:takes`);
        expect(hashTag(takesKey(counter))).to.equal(hashTag(counter));
      }),
    );
  });

  it('never lets user input end the hash tag or collide', () => {
    expect(hashTag(counterKeys('rl:', 'p', fixed, ['user_id', 'x}y{z'])[0])).to.equal('1:p7:user_id5:x%7Dy{z');
    fc.assert(
      fc.property(fc.string(), fc.array(fc.string(), { maxLength: 6 }), fc.string(), fc.array(fc.string(), { maxLength: 6 }), (p1, i1, p2, i2) => {
        const a = counterKeys('rl:', p1, fixed, i1)[0];
        const b = counterKeys('rl:', p2, fixed, i2)[0];
        // The whole key lies inside one tag: nothing after the closing brace but the algorithm.
        expect(a.endsWith('}:fixed_window')).to.equal(true);
        expect(hashTag(a).includes('}')).to.equal(false);
        if (p1 !== p2 || JSON.stringify(i1) !== JSON.stringify(i2)) expect(a).to.not.equal(b);
      }),
      { numRuns: 2000 },
    );
    expect(counterTag('a:b', ['c'])).to.not.equal(counterTag('a', ['b:c']));
    expect(counterTag('p', ['%7D'])).to.not.equal(counterTag('p', ['}']));
  });

  it('digests long identities so a key never grows with the request', () => {
    const key = counterKeys('rl:', 'p', fixed, ['user_id', 'u'.repeat(100_000)])[0];
    expect(key.length).to.be.below(60);
    expect(hashTag(key)).to.match(/^#[A-Za-z0-9_-]{22}$/);
    expect(counterKeys('rl:', 'p', fixed, ['user_id', 'u'.repeat(100_001)])[0]).to.not.equal(key);
  });
});

describe('CounterKeyCache', () => {
  const policy = {};
  const other = {};

  it('answers exactly what counterKeys builds, and the same array every time', () => {
    const cache = new CounterKeyCache('rl:');
    const identity = ['user_id', 'alice'];
    const keys = cache.keysOf(policy, 'p', fixed, identity);
    expect(keys).to.deep.equal(counterKeys('rl:', 'p', fixed, identity));
    expect(cache.keysOf(policy, 'p', fixed, ['user_id', 'alice'])).to.equal(keys);
    expect(cache.keysOf(policy, 'p', fixed, [])).to.deep.equal(counterKeys('rl:', 'p', fixed, []));
    expect(cache.keysOf(policy, 'p', log, ['source_ip', '10.0.0.1'])).to.deep.equal(counterKeys('rl:', 'p', log, ['source_ip', '10.0.0.1']));
  });

  // Two identities of one policy: the same names, values from a tiny alphabet (so that `ab`+`c` against
  // `a`+`bc`, and values that look like length prefixes, turn up often).
  const value = fc.string({ unit: fc.constantFrom('a', 'b', '1', ':'), maxLength: 4 });
  const sameLengthLists = fc
    .integer({ min: 1, max: 4 })
    .chain((n) => fc.tuple(fc.array(value, { minLength: n, maxLength: n }), fc.array(value, { minLength: n, maxLength: n })));

  it('keeps policies apart, and identities that only differ in where one value ends', () => {
    const cache = new CounterKeyCache('rl:');
    expect(cache.keysOf(policy, 'p', fixed, ['user_id', 'u'])).to.not.equal(cache.keysOf(other, 'q', fixed, ['user_id', 'u']));
    fc.assert(
      fc.property(sameLengthLists, ([a, b]) => {
        const identity = (values: string[]) => values.flatMap((v, i) => [`field${i}`, v]);
        const fresh = new CounterKeyCache('rl:');
        fresh.keysOf(policy, 'p', fixed, identity(a));
        expect(fresh.keysOf(policy, 'p', fixed, identity(b))).to.deep.equal(counterKeys('rl:', 'p', fixed, identity(b)));
      }),
      { numRuns: 2000 },
    );
    const cache2 = new CounterKeyCache('rl:');
    const ab = cache2.keysOf(policy, 'p', fixed, ['f', 'ab', 'g', 'c']);
    expect(cache2.keysOf(policy, 'p', fixed, ['f', 'a', 'g', 'bc'])).to.not.deep.equal(ab);
  });

  it('rejects a capacity that is not a positive integer (a NaN one would never rotate)', () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) expect(() => new CounterKeyCache('p:', bad)).to.throw(RangeError, /capacity/);
  });

  it('holds at most two generations of its capacity, however many identities pass through', () => {
    const cache = new CounterKeyCache('rl:', 100);
    const hot = cache.keysOf(policy, 'p', fixed, ['user_id', 'hot']);
    for (let i = 0; i < 10_000; i++) {
      const owner = i % 2 === 0 ? policy : other;
      expect(cache.keysOf(owner, 'p', fixed, ['user_id', `user-${i}`])).to.deep.equal(counterKeys('rl:', 'p', fixed, ['user_id', `user-${i}`]));
      expect(cache.size).to.be.at.most(200);
      // A counter in use keeps its keys across every rotation.
      if (i % 50 === 0) expect(cache.keysOf(policy, 'p', fixed, ['user_id', 'hot'])).to.equal(hot);
    }
  });

  it('does not hold identities long enough to be digested', () => {
    const cache = new CounterKeyCache('rl:');
    const identity = ['user_id', 'u'.repeat(10_000)];
    expect(cache.keysOf(policy, 'p', fixed, identity)).to.deep.equal(counterKeys('rl:', 'p', fixed, identity));
    expect(cache.size).to.equal(0);
  });

  it('forgets everything on clear', () => {
    const cache = new CounterKeyCache('rl:');
    const keys = cache.keysOf(policy, 'p', fixed, ['user_id', 'u']);
    cache.clear();
    expect(cache.size).to.equal(0);
    const rebuilt = cache.keysOf(policy, 'p', fixed, ['user_id', 'u']);
    expect(rebuilt).to.not.equal(keys);
    expect(rebuilt).to.deep.equal(keys);
  });
});
