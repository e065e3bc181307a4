import { expect } from 'chai';
import { Redis } from 'ioredis';
import { connectRedisCounterStore, type RedisCounterStore } from '../../src/counters/redis-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { parseRequestContext } from '../../src/model/request-context.js';
import { LiveMatcher } from '../../src/policy/live-matcher.js';
import { setLogLevel } from '../../src/util/log.js';
import { makePolicy } from '../support/policies.js';
import { randomPrefix, startPrivateRedis, type RedisHandle } from '../support/redis.js';

/**
 * The decision layer over a real Redis that dies and comes back: failure modes answer within 50 ms,
 * and decisions recover by themselves, counting exactly once after a restart and a SCRIPT FLUSH.
 */
describe('decisions when Redis fails (private redis-server)', function () {
  this.timeout(60_000);
  let redis: RedisHandle;
  let store: RedisCounterStore;
  let service: DecisionService;

  const policies = [
    makePolicy({ policy_id: 'open', scope: { service: 'open' }, failure_mode: 'fail_open', algorithm: { type: 'fixed_window', limit: 1000, window: '1h' } }),
    makePolicy({ policy_id: 'closed', scope: { service: 'closed' }, failure_mode: 'fail_closed', algorithm: { type: 'fixed_window', limit: 1000, window: '1h' } }),
  ];
  const check = (service_: string) => service.check(parseRequestContext({ service: service_ }));

  before(async () => {
    setLogLevel('silent');
    redis = await startPrivateRedis();
    store = connectRedisCounterStore(redis.url, { commandTimeoutMs: 100 });
    await store.waitUntilReady(5_000);
    service = new DecisionService({ policies: new LiveMatcher(policies), counters: store, keyPrefix: randomPrefix() });
  });
  after(async () => {
    await store?.close();
    await redis?.stop();
    setLogLevel('info');
  });

  async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
    const started = performance.now();
    const value = await fn();
    return [value, performance.now() - started];
  }

  it('fail_open allows and fail_closed denies within 50 ms while Redis is down, then recovers', async () => {
    expect(await check('open')).to.deep.include({ allowed: true, reason: 'within_limit', remaining: 999 });
    expect(await check('closed')).to.deep.include({ allowed: true, reason: 'within_limit', remaining: 999 });

    await redis.stop();
    for (let i = 0; i < 20; i++) {
      const [open, openMs] = await timed(() => check('open'));
      expect(open).to.deep.include({ allowed: true, action: 'allow', reason: 'counter_store_unavailable' });
      expect(openMs, `fail_open took ${openMs.toFixed(1)} ms`).to.be.below(50);
      const [closed, closedMs] = await timed(() => check('closed'));
      expect(closed).to.deep.include({ allowed: false, action: 'deny', reason: 'counter_store_unavailable' });
      expect(closedMs, `fail_closed took ${closedMs.toFixed(1)} ms`).to.be.below(50);
    }

    // A restarted Redis has lost its scripts (and, with no persistence, its counters): the next
    // decisions load the scripts again by themselves and count once each.
    await redis.restart();
    const deadline = Date.now() + 10_000;
    let recovered = await check('open');
    while (recovered.reason !== 'within_limit' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      recovered = await check('open');
    }
    expect(recovered).to.deep.include({ allowed: true, reason: 'within_limit', remaining: 999 });
    const admin = new Redis(redis.url);
    try {
      await admin.script('FLUSH');
      expect(await check('open')).to.deep.include({ reason: 'within_limit', remaining: 998 });
      expect(await check('closed')).to.deep.include({ reason: 'within_limit', remaining: 999 });
    } finally {
      admin.disconnect();
    }
  });
});
