import { expect } from 'chai';
import fc from 'fast-check';
import { counterKeys, counterTag } from '../../src/counters/keys.js';
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
