/**
 * The deny cache in Redis mode, counted in Redis's own command statistics: a flood on a refused key
 * costs no script call until retry_after, then one; what drops a cached refusal (an admitted consume or
 * a refund on this node, a policy change, a failed call); what it never holds (leases, refusals whose
 * answer would change with time alone); and its documented limit: what another node does is seen at
 * the latest after `maxAgeMs`.
 */
import { expect } from 'chai';
import type { CounterResult } from '../../src/counters/counter-store.js';
import type { RateSpec } from '../../src/counters/counter-spec.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { ConfigError, loadServerConfig } from '../../src/config.js';
import type { RedisCounterStore } from '../../src/redis/redis-store.js';
import { DecisionService, type DecisionServiceDeps } from '../../src/decision/decision-service.js';
import { DenyCache } from '../../src/decision/deny-cache.js';
import type { RequestContext } from '../../src/model/request-context.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import type { Policy } from '../../src/policy/types.js';
import { T0, connectRedisStore, getSuiteRedis } from '../support/counter-stores.js';
import { makePolicy } from '../support/policies.js';
import { command, randomPrefix, type RedisHandle } from '../support/redis.js';

const ctx = (user: string, quantity = 1, service = 'api'): RequestContext => ({ service, user_id: user, quantity, tags: {} });

/** Script calls Redis has run so far (EVALSHA, and EVAL after a NOSCRIPT). */
async function scriptCalls(redis: RedisHandle): Promise<number> {
  const stats = String(await command(redis.host, redis.port, ['INFO', 'commandstats']));
  let calls = 0;
  for (const name of ['evalsha', 'eval']) {
    const match = new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm').exec(stats);
    if (match) calls += Number(match[1]);
  }
  return calls;
}

function fixedWindow(limit: number, extra: Record<string, unknown> = {}): Policy {
  return makePolicy({ policy_id: 'per-user', scope: { service: 'api', user_id: '*' }, algorithm: { type: 'fixed_window', limit, window: '1s' }, ...extra });
}

describe('deny cache (Redis, counted)', function () {
  this.timeout(30_000);
  let redis: RedisHandle;
  let store: RedisCounterStore;
  const clock = { now: T0 };
  let matcher: LiveMatcher;
  let hits: number;

  before(async () => {
    redis = await getSuiteRedis();
    store = connectRedisStore(redis.url, { commandTimeoutMs: 15_000 });
  });
  after(async () => {
    await store.close();
  });
  beforeEach(() => {
    clock.now = T0 + 100;
    hits = 0;
    matcher = new LiveMatcher([fixedWindow(3)]);
  });

  /** A node: its own DecisionService on the shared counters (the same key prefix), with the test clock. */
  function node(prefix: string, deps: Partial<DecisionServiceDeps> = {}): DecisionService {
    return new DecisionService({
      policies: matcher,
      counters: store,
      keyPrefix: prefix,
      now: () => clock.now,
      onDenyCacheHit: () => hits++,
      ...deps,
    }, { clockToStore: true });
  }

  async function exhaust(service: DecisionService, user = 'hot'): Promise<void> {
    for (let i = 0; i < 3; i++) expect((await service.check(ctx(user))).allowed).to.equal(true);
    const refused = await service.check(ctx(user));
    expect(refused).to.deep.include({ allowed: false, reason: 'limit_exceeded', remaining: 0, retry_after: 900, reset_after: 900 });
  }

  it('a flood on a refused key makes zero script calls until retry_after, then one', async () => {
    const service = node(randomPrefix());
    await exhaust(service);
    const before = await scriptCalls(redis);

    // 1,000 concurrent checks and 899 more, one per ms, up to the last ms before retry_after.
    const flood = await Promise.all(Array.from({ length: 1000 }, () => service.check(ctx('hot'))));
    for (const decision of flood) expect(decision).to.deep.include({ allowed: false, retry_after: 900, remaining: 0 });
    for (let ms = 1; ms < 900; ms++) {
      clock.now = T0 + 100 + ms;
      expect(await service.check(ctx('hot'))).to.deep.include({ allowed: false, retry_after: 900 - ms, reset_after: 900 - ms });
    }
    expect(await scriptCalls(redis), 'script calls during the flood').to.equal(before);
    expect(hits).to.equal(1899);

    // retry_after has passed: one call, and the next window admits.
    clock.now = T0 + 1000;
    expect((await service.check(ctx('hot'))).allowed).to.equal(true);
    expect(await scriptCalls(redis)).to.equal(before + 1);
    expect(hits).to.equal(1899);
  });

  it('counts one hit per decision answered without a store call; a shadow policy still asked makes it no hit', async () => {
    const shadow = makePolicy({
      policy_id: 'per-user-shadow', scope: { service: 'api', user_id: '*' }, enforcement_mode: 'shadow', algorithm: { type: 'fixed_window', limit: 5, window: '1s' },
    });
    matcher = new LiveMatcher([fixedWindow(3), shadow]);
    const service = node(randomPrefix());
    for (let i = 0; i < 3; i++) expect((await service.check(ctx('hot'))).allowed).to.equal(true);
    // Checks 4-6: the enforcing refusal is cached after check 4, but the shadow counter (limit 5) must
    // still be asked: it admits 4 and 5 and refuses 6. None of them is a hit.
    for (let i = 4; i <= 6; i++) expect((await service.check(ctx('hot'))).allowed).to.equal(false);
    expect(hits, 'partial hits').to.equal(0);
    // Both refusals stand now: the next checks make no script call, one hit each.
    const before = await scriptCalls(redis);
    for (let i = 0; i < 5; i++) expect((await service.check(ctx('hot'))).allowed).to.equal(false);
    expect(await scriptCalls(redis)).to.equal(before);
    expect(hits).to.equal(5);
  });

  it('serves a peek from a refusal of cost 1, and keeps a refused peek for checks', async () => {
    const service = node(randomPrefix());
    await exhaust(service);
    const before = await scriptCalls(redis);
    const peek = await service.check(ctx('hot', 0));
    expect(peek).to.deep.include({ allowed: false, retry_after: 900, remaining: 0 });
    expect(peek.metadata.peek).to.equal('true');
    expect(await scriptCalls(redis)).to.equal(before);

    // Used up without a refused check: the refused peek is what the cache keeps.
    expect((await service.check(ctx('peeked', 3))).allowed).to.equal(true);
    const beforePeek = await scriptCalls(redis);
    expect((await service.check(ctx('peeked', 0))).allowed, 'refused peek: asks Redis').to.equal(false);
    expect(await service.check(ctx('peeked'))).to.deep.include({ allowed: false, retry_after: 900 });
    expect(await scriptCalls(redis)).to.equal(beforePeek + 1);
  });

  it('a refund, an admitted consume of another cost, and a policy change on this node drop the refusal', async () => {
    const service = node(randomPrefix());
    await exhaust(service);
    await service.refund(ctx('hot', 1));
    expect((await service.check(ctx('hot'))).allowed, 'after a refund').to.equal(true);
    expect((await service.check(ctx('hot'))).allowed).to.equal(false);

    // A refusal of cost 2 stands; cost 1 goes to the store, is admitted, and drops it (remaining changed).
    await service.refund(ctx('hot', 2));
    expect(await service.check(ctx('hot', 2))).to.deep.include({ allowed: true, remaining: 0 });
    await service.refund(ctx('hot', 1));
    expect(await service.check(ctx('hot', 2))).to.deep.include({ allowed: false, remaining: 1 });
    expect(await service.check(ctx('hot', 1))).to.deep.include({ allowed: true, remaining: 0 });
    expect(await service.check(ctx('hot', 2)), 'the store answers: remaining 0').to.deep.include({ allowed: false, remaining: 0 });

    // A live limit change keeps the counter and drops the refusal: the new limit admits at once,
    // whether the policy is updated in place (as PolicyService does) or the matcher rebuilt.
    matcher.apply('per-user', fixedWindow(5));
    expect(await service.check(ctx('hot'))).to.deep.include({ allowed: true, limit: 5 });
    expect(await service.check(ctx('hot'))).to.deep.include({ allowed: true, limit: 5 });
    expect(await service.check(ctx('hot'))).to.deep.include({ allowed: false, limit: 5 });
    matcher.replace([fixedWindow(6)]);
    expect(await service.check(ctx('hot'))).to.deep.include({ allowed: true, limit: 6 });
  });

  it('never holds a lease refusal: every acquire on a full concurrency policy asks Redis', async () => {
    matcher = new LiveMatcher([makePolicy({ policy_id: 'jobs', scope: { service: 'api' }, algorithm: { type: 'concurrency', max_concurrency: 1 } })]);
    const service = node(randomPrefix());
    expect((await service.acquire({ ...ctx('a'), request_id: 'lease-1' })).allowed).to.equal(true);
    const before = await scriptCalls(redis);
    for (let i = 0; i < 5; i++) expect((await service.acquire({ ...ctx('a'), request_id: `other-${i}` })).allowed).to.equal(false);
    expect(await scriptCalls(redis)).to.equal(before + 5);
    expect(hits).to.equal(0);
    // A release frees the slot at once.
    await service.release({ ...ctx('a'), request_id: 'lease-1' });
    expect((await service.acquire({ ...ctx('a'), request_id: 'other-9' })).allowed).to.equal(true);
  });

  it('another node: its consumes keep the refusal standing; its refund is seen after maxAgeMs (documented)', async () => {
    const prefix = randomPrefix();
    const here = node(prefix, { denyCache: { maxAgeMs: 200 } });
    const there = node(prefix, { denyCache: false });
    await exhaust(here);
    // The other node refunds 2 units: Redis would admit now, this node still answers the refusal...
    await there.refund(ctx('hot', 2));
    clock.now += 199;
    expect((await here.check(ctx('hot'))).allowed, 'within maxAgeMs').to.equal(false);
    // ...until maxAgeMs has passed since the refusal: then it asks Redis, which admits.
    clock.now += 1;
    expect(await here.check(ctx('hot'))).to.deep.include({ allowed: true, remaining: 1 });
    // Consumes elsewhere only prolong a refusal: the cached one is still a refusal Redis agrees with.
    expect((await there.check(ctx('hot'))).allowed).to.equal(true);
    expect((await here.check(ctx('hot'))).allowed).to.equal(false);
    expect((await there.check(ctx('hot'))).allowed).to.equal(false);
  });

  it('is not used with the in-memory store, and can be turned off', () => {
    const memory = new MemoryCounterStore({ sweepIntervalMs: 0 });
    expect(new DecisionService({ policies: matcher, counters: memory, keyPrefix: 'x' }).denyCache).to.equal(undefined);
    expect(new DecisionService({ policies: matcher, counters: store, keyPrefix: 'x', denyCache: false }).denyCache).to.equal(undefined);
    expect(new DecisionService({ policies: matcher, counters: store, keyPrefix: 'x' }).denyCache).to.be.instanceOf(DenyCache);
    return memory.close();
  });
});

describe('deny cache configuration', () => {
  it('RL_DENY_CACHE_SIZE (0 = off) and RL_DENY_CACHE_MAX_AGE_MS, with their defaults', () => {
    expect(loadServerConfig({}).denyCache).to.deep.equal({ size: 10_000, maxAgeMs: 1_000 });
    expect(loadServerConfig({ RL_DENY_CACHE_SIZE: '0', RL_DENY_CACHE_MAX_AGE_MS: '250' }).denyCache).to.deep.equal({ size: 0, maxAgeMs: 250 });
    for (const [name, value] of [['RL_DENY_CACHE_SIZE', '-1'], ['RL_DENY_CACHE_SIZE', 'lots'], ['RL_DENY_CACHE_MAX_AGE_MS', '0'], ['RL_DENY_CACHE_MAX_AGE_MS', '1s']]) {
      expect(() => loadServerConfig({ [name]: value }), `${name}=${value}`).to.throw(ConfigError, new RegExp(`^${name}: `));
    }
  });
});

describe('DenyCache', () => {
  const FW: RateSpec = { type: 'fixed_window', limit: 10, windowMs: 1000 };
  const TB: RateSpec = { type: 'token_bucket', capacity: 10, rateUnits: 10, ratePeriodMs: 1000 };
  const refusal = (remaining: number, retryAfterMs: number, resetAfterMs = retryAfterMs): CounterResult => ({ allowed: false, remaining, retryAfterMs, resetAfterMs });
  const owner = {};

  it('counts retry_after and reset_after down, and answers nothing from retry_after on', () => {
    const cache = new DenyCache();
    cache.refused('k', owner, FW, 1, refusal(0, 500), 1000);
    expect(cache.lookup('k', owner, 1, 1000)).to.deep.equal(refusal(0, 500));
    expect(cache.lookup('k', owner, 1, 1499)).to.deep.equal(refusal(0, 1));
    expect(cache.lookup('k', owner, 1, 1500)).to.equal(undefined);
    expect(cache.size).to.equal(0);
  });

  it('answers only the same cost and the same compiled policy; a changed counter is dropped', () => {
    const cache = new DenyCache();
    cache.refused('k', owner, FW, 3, refusal(2, 500), 0);
    expect(cache.lookup('k', owner, 2, 10)).to.equal(undefined);
    expect(cache.lookup('k', {}, 3, 10), 'another policy version').to.equal(undefined);
    cache.refused('k', owner, FW, 3, refusal(2, 500), 0);
    cache.changed('k');
    expect(cache.lookup('k', owner, 3, 10)).to.equal(undefined);
  });

  it('keeps only refusals whose answer time alone cannot change', () => {
    const cache = new DenyCache();
    cache.refused('bucket-cost-3', owner, TB, 3, refusal(1, 200), 0);
    expect(cache.lookup('bucket-cost-3', owner, 3, 1), 'remaining 1 could grow to 2').to.equal(undefined);
    cache.refused('bucket-cost-3', owner, TB, 3, refusal(2, 50), 0);
    expect(cache.lookup('bucket-cost-3', owner, 3, 1)).to.deep.include({ remaining: 2, retryAfterMs: 49 });
    cache.refused('over-capacity', owner, FW, 11, refusal(10, 1000), 0);
    expect(cache.lookup('over-capacity', owner, 11, 1), 'a cost that never fits').to.equal(undefined);
    cache.refused('admitted', owner, FW, 1, { allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 10 }, 0);
    expect(cache.size).to.equal(1);
  });

  it('leaves the last ms before a bucket retry_after to the store, and no entry outlives maxAgeMs', () => {
    const cache = new DenyCache({ maxAgeMs: 300 });
    cache.refused('bucket', owner, TB, 1, refusal(0, 100), 0);
    expect(cache.lookup('bucket', owner, 1, 98)).to.deep.include({ retryAfterMs: 2 });
    expect(cache.lookup('bucket', owner, 1, 99)).to.equal(undefined);
    cache.refused('window', owner, FW, 1, refusal(0, 900), 0);
    expect(cache.lookup('window', owner, 1, 299)).to.deep.include({ retryAfterMs: 601 });
    expect(cache.lookup('window', owner, 1, 300)).to.equal(undefined);
  });

  it("a leased counter's refusal (the parent's own retry_after, a window's end) answers no longer than its max_hold: units given back meanwhile are found", () => {
    const cache = new DenyCache({ maxAgeMs: 1000 });
    const minute: RateSpec = { type: 'fixed_window', limit: 10, windowMs: 60_000 };
    cache.refused('global', owner, minute, 1, refusal(0, 58_000), 0, 200);
    // The caller is told the window's end, counted down...
    expect(cache.lookup('global', owner, 1, 199)).to.deep.include({ retryAfterMs: 57_801 });
    // ...but from max_hold on the holder is asked again (its next refill finds units others gave back).
    expect(cache.lookup('global', owner, 1, 200)).to.equal(undefined);
  });

  it('a clock stepped back asks the store', () => {
    const cache = new DenyCache();
    cache.refused('k', owner, FW, 1, refusal(0, 500), 1000);
    expect(cache.lookup('k', owner, 1, 999)).to.equal(undefined);
  });

  it('holds at most `capacity` counters, dropping the oldest written', () => {
    const cache = new DenyCache({ capacity: 2 });
    cache.refused('a', owner, FW, 1, refusal(0, 500), 0);
    cache.refused('b', owner, FW, 1, refusal(0, 500), 0);
    cache.refused('a', owner, FW, 1, refusal(0, 400), 100); // rewritten: now the newest
    cache.refused('c', owner, FW, 1, refusal(0, 500), 0);
    expect(cache.size).to.equal(2);
    expect(cache.lookup('b', owner, 1, 100)).to.equal(undefined);
    expect(cache.lookup('a', owner, 1, 100)).to.deep.include({ retryAfterMs: 400 });
    expect(cache.lookup('c', owner, 1, 100)).to.deep.include({ retryAfterMs: 400 });
    for (let i = 0; i < 1000; i++) cache.refused(`k${i}`, owner, FW, 1, refusal(0, 500), 0);
    expect(cache.size).to.equal(2);
  });
});
