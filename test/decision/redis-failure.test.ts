import { expect } from 'chai';
import { Redis } from 'ioredis';
import { connectRedisCounterStore, type CounterStoreErrorKind, type RedisCounterStore } from '../../src/redis/redis-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { parseRequestContext } from '../../src/model/request-context.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { setLogLevel } from '../../src/util/log.js';
import { makePolicy } from '../support/policies.js';
import { randomPrefix, startPrivateRedis, type RedisHandle } from '../support/redis.js';

/**
 * The decision layer over a real Redis that dies and comes back: failure modes answer at once (no
 * operation waits for its 100 ms deadline: each fails as not connected, or is refused by the open
 * breaker without asking Redis), and decisions recover by themselves, counting exactly once after a
 * restart and a SCRIPT FLUSH.
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

  it('fail_open allows and fail_closed denies at once while Redis is down (no operation waits for its deadline), then recovers', async () => {
    expect(await check('open')).to.deep.include({ allowed: true, reason: 'within_limit', remaining: 999 });
    expect(await check('closed')).to.deep.include({ allowed: true, reason: 'within_limit', remaining: 999 });

    const failures: CounterStoreErrorKind[] = [];
    const unsubscribe = store.onError((event) => failures.push(event.kind));
    await redis.stop();
    try {
      for (let i = 0; i < 20; i++) {
        const open = await check('open');
        expect(open).to.deep.include({ allowed: true, action: 'allow', reason: 'counter_store_unavailable' });
        const closed = await check('closed');
        expect(closed).to.deep.include({ allowed: false, action: 'deny', reason: 'counter_store_unavailable' });
      }
    } finally {
      unsubscribe();
    }
    // Why the answers were immediate: each of the 40 operations failed because nothing was connected,
    // or was refused by the breaker without asking Redis; none waited out its 100 ms deadline.
    expect(failures).to.have.length(40);
    expect(failures.filter((kind) => kind !== 'not_connected' && kind !== 'breaker_open'), failures.join(',')).to.deep.equal([]);
    expect(failures).to.include('breaker_open');
    expect(store.breaker.state).to.not.equal('closed');

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
