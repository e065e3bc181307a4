/**
 * The exact local deny cache: against a real server (the server's own decision count shows which
 * calls reached it), and its bounds and key with an injected clock.
 */
import { expect } from 'chai';
import { manualClock } from '../support/manual-clock.js';
import { createClient, type Decision } from '@rl/client';
import { DenyCache, denyCacheKey } from '../../sdk/src/deny-cache.js';
import { freshUser, startService, type Service } from './service.js';

function refusal(overrides: Partial<Decision> = {}): Decision {
  return {
    allowed: false,
    action: 'deny',
    reason: 'limit_exceeded',
    matched_policy_id: 'p',
    remaining: 0,
    retry_after: 1000,
    reset_after: 5000,
    limit: 10,
    window: 60_000,
    shadow_mode: false,
    metadata: {},
    ...overrides,
  };
}

describe('SDK deny cache against the server', function () {
  this.timeout(60_000);
  let service: Service;
  before(async () => {
    service = await startService('memory');
  });
  after(async () => {
    await service?.stop();
  });

  it('a flood on a denied key reaches the server not at all until retry_after, then exactly once', async () => {
    const client = createClient({ url: service.url, timeoutMs: 2000 });
    const ctx = { resource: 'flood', user_id: freshUser() };
    try {
      const start = await service.decisionCalls();
      expect(await client.check(ctx)).to.include({ allowed: true });
      const denied = await client.check(ctx);
      expect(denied).to.include({ allowed: false, action: 'deny', matched_policy_id: 'sdk-flood' });
      expect(denied.metadata.deny_cache).to.equal(undefined);
      expect(await service.decisionCalls()).to.equal(start + 2);

      // 1,000 identical requests (sequential and concurrent) while the refusal stands: none is sent.
      let last: Decision = denied;
      for (let i = 0; i < 500; i++) {
        last = await client.check(ctx);
        expect(last).to.include({ allowed: false, action: 'deny', matched_policy_id: 'sdk-flood' });
        expect(last.metadata.deny_cache).to.equal('true');
        expect(last.retry_after).to.be.within(1, denied.retry_after);
      }
      const burst = await Promise.all(Array.from({ length: 500 }, () => client.check(ctx)));
      for (const d of burst) expect(d.metadata.deny_cache).to.equal('true');
      expect(await service.decisionCalls()).to.equal(start + 2);
      // Another quantity is another request: it is asked.
      expect(await client.check({ ...ctx, quantity: 2 })).to.include({ allowed: false });
      expect(await service.decisionCalls()).to.equal(start + 3);

      // Once retry_after has passed, the next request goes to the server: exactly one call, admitted.
      const lapse = Math.max(...burst.map((d) => d.retry_after), last.retry_after);
      await new Promise((resolve) => setTimeout(resolve, lapse + 5));
      const again = await client.check(ctx);
      expect(again).to.include({ allowed: true, reason: 'within_limit' });
      expect(await service.decisionCalls()).to.equal(start + 4);
      // ...which used the unit again: the next refusal is asked once and cached once more.
      expect((await client.check(ctx)).metadata.deny_cache).to.equal(undefined);
      expect((await client.check(ctx)).metadata.deny_cache).to.equal('true');
      expect(await service.decisionCalls()).to.equal(start + 5);
    } finally {
      await client.close();
    }
  });

  it('a refund through the client clears it; peeks and allowed answers are never cached', async () => {
    const client = createClient({ url: service.url, timeoutMs: 2000 });
    const ctx = { resource: 'plain', user_id: freshUser() };
    try {
      expect(await client.check({ ...ctx, quantity: 5 })).to.include({ allowed: true, remaining: 0 });
      expect(await client.check(ctx)).to.include({ allowed: false });
      expect((await client.check(ctx)).metadata.deny_cache).to.equal('true');
      expect(client.denyCacheSize).to.equal(1);
      expect(await client.peek(ctx)).to.include({ allowed: false });
      expect(client.denyCacheSize).to.equal(1);
      expect(await client.refund({ ...ctx, quantity: 1 })).to.include({ reason: 'refunded', remaining: 1 });
      expect(client.denyCacheSize).to.equal(0);
      expect(await client.check(ctx)).to.include({ allowed: true, remaining: 0 });
    } finally {
      await client.close();
    }
  });
});

describe('SDK deny cache bounds and key', () => {
  const clock = manualClock(1_000);

  it('caches only deterministic refusals with a retry_after', () => {
    const cache = new DenyCache({}, clock.read);
    cache.offer('deny', refusal());
    cache.offer('drop', refusal({ action: 'drop' }));
    cache.offer('low', refusal({ action: 'drop_low_priority' }));
    cache.offer('allowed', refusal({ allowed: true, action: 'allow' }));
    cache.offer('delay', refusal({ action: 'delay' }));
    cache.offer('sample', refusal({ action: 'sample' }));
    cache.offer('no-retry', refusal({ retry_after: 0 }));
    cache.offer('shadow', refusal({ shadow_mode: true }));
    expect(['deny', 'drop', 'low'].map((k) => cache.get(k)?.action)).to.deep.equal(['deny', 'drop', 'drop_low_priority']);
    for (const k of ['allowed', 'delay', 'sample', 'no-retry', 'shadow']) expect(cache.get(k)).to.equal(undefined);
    expect(cache.size).to.equal(3);
  });

  it('answers until retry_after from when the call was sent, counting retry_after and reset_after down', () => {
    const cache = new DenyCache({}, clock.read);
    cache.offer('k', refusal({ retry_after: 1000, reset_after: 5000 }), 900);
    clock.now = 1_300;
    expect(cache.get('k')).to.include({ retry_after: 600, reset_after: 4600 });
    clock.now = 1_899;
    expect(cache.get('k')).to.include({ retry_after: 1 });
    clock.now = 1_900;
    expect(cache.get('k')).to.equal(undefined);
    expect(cache.size).to.equal(0);
    expect(cache.byteSize).to.equal(0);
  });

  it('keeps at most maxEntries, dropping the oldest', () => {
    const cache = new DenyCache({ maxEntries: 3 }, clock.read);
    for (let i = 0; i < 10; i++) cache.offer(`k${i}`, refusal());
    expect(cache.size).to.equal(3);
    expect(cache.get('k6')).to.equal(undefined);
    expect(['k7', 'k8', 'k9'].every((k) => cache.get(k) !== undefined)).to.equal(true);
  });

  it('keeps at most maxBytes, and never stores an entry larger than the whole cache', () => {
    const cache = new DenyCache({ maxBytes: 4_000 }, clock.read);
    for (let i = 0; i < 100; i++) cache.offer(`key-${i}-${'x'.repeat(200)}`, refusal());
    expect(cache.byteSize).to.be.at.most(4_000);
    expect(cache.size).to.be.within(1, 99);
    cache.offer('y'.repeat(5_000), refusal());
    expect(cache.get('y'.repeat(5_000))).to.equal(undefined);
    expect(cache.byteSize).to.be.at.most(4_000);
  });

  it('keys are canonical: field and tag order and an explicit quantity 1 do not matter; every value does', () => {
    const a = denyCacheKey({ user_id: 'u', resource: 'r', tags: { b: '2', a: '1' } });
    const b = denyCacheKey({ tags: { a: '1', b: '2' }, resource: 'r', quantity: 1, user_id: 'u' });
    expect(a).to.equal(b);
    expect(denyCacheKey({ user_id: 'u', resource: 'r', quantity: 2, tags: { a: '1', b: '2' } })).to.not.equal(a);
    expect(denyCacheKey({ user_id: 'u', resource: 'r', tags: { a: '1' } })).to.not.equal(a);
    expect(denyCacheKey({ user_id: 'u', resource: 'r2', tags: { a: '1', b: '2' } })).to.not.equal(a);
    // A tag is not a field of the same name.
    expect(denyCacheKey({ resource: 'r' })).to.not.equal(denyCacheKey({ tags: { resource: 'r' } }));
  });

  it('rejects bad bounds naming the option', () => {
    expect(() => new DenyCache({ maxEntries: 0 })).to.throw(TypeError, /^denyCache.maxEntries/);
    expect(() => new DenyCache({ maxBytes: 1.5 })).to.throw(TypeError, /^denyCache.maxBytes/);
  });
});
