/**
 * createClient over HTTP and over gRPC against a real server process: the same interface gives the
 * same decisions on both, and problems the caller must fix are typed errors.
 */
import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import {
  createClient,
  RateLimitAuthError,
  RateLimitError,
  RateLimitInputError,
  type Client,
  type ClientOptions,
  type RequestContext,
} from '@rl/client';
import { PROTO_FILE } from '../../sdk/src/grpc-transport.js';
import { freshUser, startService, type Service } from './service.js';

type Transport = 'http' | 'grpc';
const address = (service: Service, transport: Transport): ClientOptions =>
  transport === 'http' ? { url: service.url } : { grpcTarget: service.grpcTarget };

describe('SDK client against the server', function () {
  this.timeout(60_000);
  let service: Service;
  let secured: Service;

  before(async () => {
    [service, secured] = await Promise.all([
      startService('memory'),
      startService('memory', { env: { RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'apikey', RL_AUTH_API_KEYS: 'sdk-secret-key:read-only' } }),
    ]);
  });
  after(async () => {
    await Promise.all([service?.stop(), secured?.stop()]);
  });

  for (const transport of ['http', 'grpc'] as Transport[]) transportCases(transport, () => ({ service, secured }));

  it('HTTP and gRPC give the same decisions for the same input', async () => {
    const http = createClient({ url: service.url, timeoutMs: 2000, denyCache: false });
    const grpc = createClient({ grpcTarget: service.grpcTarget, timeoutMs: 2000, denyCache: false });
    try {
      const user = freshUser();
      const [a, b] = [{ resource: 'plain', user_id: `${user}-a` }, { resource: 'plain', user_id: `${user}-b` }];
      for (let i = 0; i < 7; i++) {
        const [x, y] = [await http.check(a), await grpc.check(b)];
        expect({ ...y, retry_after: 0, reset_after: 0 }).to.deep.equal({ ...x, retry_after: 0, reset_after: 0 });
      }
    } finally {
      await Promise.all([http.close(), grpc.close()]);
    }
  });

  it('a URL that is not the service is a RateLimitError, not a fail-mode answer', async () => {
    const client = createClient({ url: `${service.url}/not-here`, timeoutMs: 2000 });
    try {
      const error = await client.check({ resource: 'plain' }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(RateLimitError);
      expect((error as RateLimitError).status).to.equal(404);
    } finally {
      await client.close();
    }
  });

  it('options are checked when the client is made, naming the option', () => {
    expect(() => createClient({})).to.throw(TypeError, /url \/ grpcTarget/);
    expect(() => createClient({ url: 'http://x', grpcTarget: 'x:1' })).to.throw(TypeError, /url \/ grpcTarget/);
    expect(() => createClient({ url: 'ftp://x' })).to.throw(TypeError, /^url:/);
    expect(() => createClient({ url: 'http://x', timeoutMs: 0 })).to.throw(TypeError, /^timeoutMs:/);
    expect(() => createClient({ url: 'http://x', failMode: 'maybe' as never })).to.throw(TypeError, /^failMode:/);
    expect(() => createClient({ url: 'http://x', apiKey: 'a', token: 'b' })).to.throw(TypeError, /apiKey \/ token/);
  });
});

/** One transport's cases, against the services the suite started (read once they are up). */
function transportCases(transport: Transport, services: () => { service: Service; secured: Service }): void {
  describe(`over ${transport}`, () => {
    let service: Service;
    let secured: Service;
    before(() => ({ service, secured } = services()));
    let client: Client;
    beforeEach(() => {
      client = createClient({ ...address(service, transport), timeoutMs: 2000, denyCache: false });
    });
    afterEach(() => client.close());

    it('check counts exactly `limit`, then refuses with a complete Decision (window included)', async () => {
      const ctx: RequestContext = { resource: 'plain', user_id: freshUser() };
      for (let i = 1; i <= 5; i++) {
        expect(await client.check(ctx)).to.include({ allowed: true, action: 'allow', reason: 'within_limit', matched_policy_id: 'sdk-plain', remaining: 5 - i, limit: 5, window: 3_600_000 });
      }
      const refused = await client.check(ctx);
      expect(refused).to.include({ allowed: false, action: 'deny', reason: 'limit_exceeded', remaining: 0, limit: 5, window: 3_600_000, shadow_mode: false });
      expect(refused.retry_after).to.be.within(1, 3_600_000);
      expect(refused.reset_after).to.be.within(1, 3_600_000);
      expect(refused.metadata).to.be.an('object');
    });

    it('peek reads without consuming; refund gives units back', async () => {
      const ctx: RequestContext = { resource: 'plain', user_id: freshUser() };
      expect(await client.check({ ...ctx, quantity: 3 })).to.include({ allowed: true, remaining: 2 });
      const peeked = await client.peek(ctx);
      expect(peeked).to.include({ allowed: true, remaining: 2, matched_policy_id: 'sdk-plain' });
      expect(peeked.metadata.peek).to.equal('true');
      expect(await client.peek(ctx)).to.include({ remaining: 2 });
      expect(await client.refund({ ...ctx, quantity: 2 })).to.include({ allowed: true, reason: 'refunded', remaining: 4 });
      expect(await client.peek(ctx)).to.include({ remaining: 4 });
    });

    it('acquire takes a lease, a full policy refuses, release frees it', async () => {
      const user = freshUser();
      const lease = (id: string): RequestContext => ({ endpoint: '/slow', user_id: user, request_id: id });
      const first = await client.acquire(lease('a'));
      expect(first).to.include({ allowed: true, reason: 'lease_acquired', matched_policy_id: 'sdk-slots', remaining: 1, window: 0 });
      expect(first.metadata.lease_id).to.equal('a');
      expect(await client.acquire(lease('b'))).to.include({ allowed: true, remaining: 0 });
      expect(await client.acquire(lease('c'))).to.include({ allowed: false, reason: 'limit_exceeded' });
      expect(await client.release(lease('a'))).to.include({ allowed: true, reason: 'lease_released' });
      expect(await client.release(lease('a'))).to.include({ allowed: true, reason: 'lease_not_found' });
      expect(await client.acquire(lease('c'))).to.include({ allowed: true, reason: 'lease_acquired' });
    });

    it('bad input is a RateLimitInputError naming the field', async () => {
      const badSignal = await client.check({ resource: 'plain', signal_type: 'carrier-pigeon' as never }).catch((e: unknown) => e);
      expect(badSignal).to.be.instanceOf(RateLimitInputError);
      expect(badSignal).to.include({ status: 400, field: 'signal_type' });
      const badQuantity = await client.check({ resource: 'plain', quantity: -1 }).catch((e: unknown) => e);
      expect(badQuantity).to.be.instanceOf(RateLimitInputError);
      expect((badQuantity as RateLimitInputError).field).to.equal('quantity');
      const leaseRefund = await client.refund({ endpoint: '/slow', user_id: freshUser(), quantity: 1 }).catch((e: unknown) => e);
      expect(leaseRefund).to.be.instanceOf(RateLimitInputError);
      expect((leaseRefund as RateLimitInputError).field).to.equal('quantity');
    });

    it('missing or wrong credentials are a RateLimitAuthError; apiKey and token both work', async () => {
      const anonymous = createClient({ ...address(secured, transport), timeoutMs: 2000 });
      const wrong = createClient({ ...address(secured, transport), timeoutMs: 2000, apiKey: 'not-the-key' });
      const withKey = createClient({ ...address(secured, transport), timeoutMs: 2000, apiKey: 'sdk-secret-key' });
      const withToken = createClient({ ...address(secured, transport), timeoutMs: 2000, token: 'sdk-secret-key' });
      try {
        for (const c of [anonymous, wrong]) {
          const error = await c.check({ resource: 'plain', user_id: freshUser() }).catch((e: unknown) => e);
          expect(error).to.be.instanceOf(RateLimitAuthError);
          expect((error as RateLimitAuthError).status).to.equal(401);
        }
        for (const c of [withKey, withToken]) {
          expect(await c.check({ resource: 'plain', user_id: freshUser() })).to.include({ allowed: true, matched_policy_id: 'sdk-plain' });
        }
      } finally {
        await Promise.all([anonymous, wrong, withKey, withToken].map((c) => c.close()));
      }
    });
  });
}

describe('SDK proto', () => {
  it("inside the repository the SDK loads the server's proto/rl/v1/rate_limit.proto, not a copy", () => {
    expect(PROTO_FILE).to.equal(fileURLToPath(new URL('../../proto/rl/v1/rate_limit.proto', import.meta.url)));
  });
});
