import { expect } from 'chai';
import type { RateSpec } from '../../src/counters/counter-spec.js';
import { counterKeys } from '../../src/counters/keys.js';
import { twoRedisNodes } from '../support/counter-stores.js';
import { randomPrefix } from '../support/redis.js';
import { everyRateSpec } from '../support/counter-specs.js';

/**
 * Refunds are atomic: consume/refund pairs racing through two separate connections (two server
 * nodes, as far as Redis can tell) leave every counter exactly where it started.
 */
describe('refund under concurrency (real Redis, two connections)', function () {
  this.timeout(60_000);
  const nodes = twoRedisNodes();

  const specs: RateSpec[] = everyRateSpec(5_000, 3_600_000, { rateUnits: 1, ratePeriodMs: 3_600_000_000 });
  for (const spec of specs) {
    it(`${spec.type}: 1,000 parallel consume/refund pairs leave the counter where it started`, async () => {
      const keys = counterKeys(randomPrefix(), 'pairs', spec, ['u']);
      // A starting level that is neither empty nor full, so a refund could overshoot either way.
      await nodes.a.consume(keys, spec, 100);
      const before = await nodes.a.peek(keys, spec);
      await Promise.all(
        Array.from({ length: 1_000 }, async (_, i) => {
          const [first, second] = i % 2 === 0 ? [nodes.a, nodes.b] : [nodes.b, nodes.a];
          const cost = 1 + (i % 3);
          const taken = await first.consume(keys, spec, cost);
          expect(taken.allowed).to.equal(true);
          await second.refund(keys, spec, cost);
        }),
      );
      const after = await nodes.b.peek(keys, spec);
      expect(after.remaining).to.equal(before.remaining);
      expect(after.remaining).to.equal(4_900);
    });
  }
});
