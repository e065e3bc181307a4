/**
 * The embedded client (src/embedded): the SDK's interface answered by the service's DecisionService
 * in-process, in memory mode and sharing a real server's Redis (policies and counters).
 */
import { expect } from 'chai';
import { createClient, RateLimitInputError, type RateLimitClient } from '@rl/client';
import { createEmbeddedClient } from '../../src/embedded/index.js';
import { startApp } from './apps.js';
import { freshUser, SDK_TEST_POLICIES, startService, type Service } from './service.js';

describe('SDK embedded client', function () {
  this.timeout(60_000);

  describe('memory mode', () => {
    let client: RateLimitClient;
    beforeEach(async () => {
      client = await createEmbeddedClient({ policies: { policies: SDK_TEST_POLICIES } });
    });
    afterEach(() => client.close());

    it('answers check, peek, refund, acquire and release like the service', async () => {
      const ctx = { resource: 'plain', user_id: freshUser() };
      for (let i = 1; i <= 5; i++) expect(await client.check(ctx)).to.include({ allowed: true, remaining: 5 - i, matched_policy_id: 'sdk-plain', window: 3_600_000 });
      expect(await client.check(ctx)).to.include({ allowed: false, action: 'deny', reason: 'limit_exceeded' });
      expect((await client.peek(ctx)).metadata.peek).to.equal('true');
      expect(await client.refund({ ...ctx, quantity: 2 })).to.include({ reason: 'refunded', remaining: 2 });
      const lease = { endpoint: '/slow', user_id: freshUser(), request_id: 'r1' };
      expect(await client.acquire(lease)).to.include({ allowed: true, reason: 'lease_acquired' });
      expect(await client.release(lease)).to.include({ allowed: true, reason: 'lease_released' });
    });

    it('counts client networks for source_ip "*" (source_ip_prefix)', async () => {
      const networks = await createEmbeddedClient({
        policies: [{ policy_id: 'net', scope: { resource: 'net', source_ip: '*' }, source_ip_prefix: { v6: 64 }, algorithm: { type: 'fixed_window', limit: 1, window: '1h' } }],
      });
      try {
        expect(await networks.check({ resource: 'net', source_ip: '2001:db8:0:1::1' })).to.include({ allowed: true });
        expect(await networks.check({ resource: 'net', source_ip: '2001:DB8:0:1:ffff::' })).to.include({ allowed: false });
        expect(await networks.check({ resource: 'net', source_ip: '::ffff:192.0.2.1' })).to.include({ allowed: true });
        expect(await networks.check({ resource: 'net', source_ip: '192.0.2.1' })).to.include({ allowed: false });
      } finally {
        await networks.close();
      }
    });

    it('bad input is the SDK RateLimitInputError naming the field', async () => {
      const error = await client.check({ resource: 'plain', signal_type: 'smoke' as never }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(RateLimitInputError);
      expect((error as RateLimitInputError).field).to.equal('signal_type');
      const refund = await client.refund({ resource: 'plain' }).catch((e: unknown) => e);
      expect((refund as RateLimitInputError).field).to.equal('quantity');
    });

    it('drives the middleware: exactly `limit` requests pass, then 429', async () => {
      const app = await startApp('koa', client);
      try {
        const user = freshUser();
        const statuses: number[] = [];
        for (let i = 0; i < 5; i++) statuses.push((await fetch(`${app.url}/deny`, { headers: { 'x-user': user } })).status);
        expect(statuses).to.deep.equal([200, 200, 200, 429, 429]);
      } finally {
        await app.close();
      }
    });

    it('without policies in memory mode it refuses to start, naming the option', async () => {
      const error = await createEmbeddedClient({}).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(TypeError);
      expect((error as Error).message).to.match(/^policies:/);
    });
  });

  describe("Redis mode (the service's shared Redis)", () => {
    let service: Service;
    let embedded: RateLimitClient;
    let remote: RateLimitClient;
    before(async () => {
      service = await startService('redis');
      // No policies given: they come from the store the server seeded.
      embedded = await createEmbeddedClient({ redisAddr: service.redisAddr!, keyPrefix: service.keyPrefix! });
      remote = createClient({ url: service.url, timeoutMs: 2000, denyCache: false });
    });
    after(async () => {
      await Promise.all([embedded?.close(), remote?.close()]);
      await service?.stop();
    });

    it('counts against the same counters as the server', async () => {
      const ctx = { resource: 'plain', user_id: freshUser() };
      expect(await embedded.check({ ...ctx, quantity: 3 })).to.include({ allowed: true, remaining: 2, matched_policy_id: 'sdk-plain' });
      expect(await remote.check(ctx)).to.include({ allowed: true, remaining: 1 });
      expect(await embedded.check(ctx)).to.include({ allowed: true, remaining: 0 });
      expect(await remote.check(ctx)).to.include({ allowed: false, reason: 'limit_exceeded' });
      expect(await embedded.peek(ctx)).to.include({ allowed: false, remaining: 0 });
    });

    it("follows policy changes made through the server's API", async () => {
      const created = await fetch(`${service.url}/rl/v1/policies`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ policy_id: 'sdk-late', scope: { resource: 'late' }, algorithm: { type: 'fixed_window', limit: 7, window: '1m' } }),
      });
      expect(created.status).to.equal(201);
      // The change arrives by pub/sub: ask until it has (bounded by a count, not a clock).
      let matched = '';
      for (let attempt = 0; attempt < 200 && matched === ''; attempt++) {
        matched = (await embedded.peek({ resource: 'late' })).matched_policy_id;
        if (matched === '') await new Promise((resolve) => setTimeout(resolve, 25));
      }
      expect(matched).to.equal('sdk-late');
      expect(await embedded.check({ resource: 'late' })).to.include({ allowed: true, limit: 7, remaining: 6 });
    });
  });
});
