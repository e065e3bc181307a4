/**
 * A layer whose counter fails inside a Redis group answers by its own failure mode, and the other layers
 * are still decided and counted: a fail_open layer's error must not leave an admitted decision uncounted
 * in the layers that did run (that would let them admit past their limits).
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import type { RedisCounterStore } from '../../src/redis/redis-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { parseRequestContext } from '../../src/model/request-context.js';
import { connectRedisStore, getSuiteRedis, T0 } from '../support/counter-stores.js';
import { makePolicy } from '../support/policies.js';
import { randomPrefix } from '../support/redis.js';

describe('Layers on Redis: a layer whose counter fails inside the group', function () {
  this.timeout(30_000);
  let store: RedisCounterStore;
  let admin: Redis;
  before(async () => {
    const redis = await getSuiteRedis();
    store = connectRedisStore(redis.url);
    admin = new Redis(redis.url);
  });
  after(async () => {
    await store?.close();
    admin?.disconnect();
  });

  function service(prefix: string, failureMode: 'fail_open' | 'fail_closed'): DecisionService {
    const policies = [
      makePolicy({ policy_id: 'broken', layer: 'a', scope: { user_id: '*' }, algorithm: { type: 'token_bucket', limit: 5, window: '1m', burst: 5 }, failure_mode: failureMode }),
      makePolicy({ policy_id: 'counted', layer: 'b', scope: { user_id: '*' }, algorithm: { type: 'fixed_window', limit: 3, window: '1m' } }),
    ];
    return new DecisionService({ policies: new LiveMatcher(policies), counters: store, keyPrefix: prefix, now: () => T0 + 1_000, leases: false, denyCache: false }, { clockToStore: true });
  }

  /** Turns the token bucket's counter into a list, so its script fails (WRONGTYPE) inside the group. */
  async function breakBucket(prefix: string): Promise<void> {
    const keys = (await admin.keys(`${prefix}*`)).filter((k) => k.endsWith(':token_bucket'));
    expect(keys).to.have.length(1);
    await admin.del(keys[0]);
    await admin.rpush(keys[0], 'not a bucket');
  }

  /** A service in `failureMode` whose first check is admitted, after which the token bucket breaks. */
  async function brokenAfterOneCheck(failureMode: 'fail_open' | 'fail_closed') {
    const prefix = randomPrefix();
    const decisions = service(prefix, failureMode);
    const check = () => decisions.check(parseRequestContext({ user_id: 'u' }));
    expect((await check()).allowed).to.equal(true);
    await breakBucket(prefix);
    return { decisions, check };
  }

  it('fail_open: admitted by the failing layer, and the other layer still counts every admitted check', async () => {
    const { check } = await brokenAfterOneCheck('fail_open');
    const allowed = [];
    for (let i = 0; i < 5; i++) allowed.push((await check()).allowed);
    // The fixed window of 3 admitted one before the bucket broke, so two more, then it refuses.
    expect(allowed).to.deep.equal([true, true, false, false, false]);
  });

  it('fail_closed: refused by the failing layer, and the other layer gives back what it took', async () => {
    const { decisions, check } = await brokenAfterOneCheck('fail_closed');
    for (let i = 0; i < 3; i++) expect((await check()).allowed).to.equal(false);
    const peek = await decisions.check(parseRequestContext({ user_id: 'u', quantity: 0 }));
    const counted = (peek.layers ?? []).find((l) => l.layer === 'b');
    expect(counted?.remaining).to.equal(2);
  });
});
