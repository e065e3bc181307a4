/**
 * The Koa and Express middleware in real apps against a real server process, in memory mode and in
 * Redis mode: limits, every action, the rate-limit headers and problem body, concurrency slots after
 * errors and aborts, and the token budget.
 */
import { expect } from 'chai';
import { createClient, type Client } from '@rl/client';
import { startApp, CountingClient, type AppHandle, type Framework } from './apps.js';
import { freshUser, startService, type Service, type StoreMode } from './service.js';

const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded';

for (const mode of ['memory', 'redis'] as StoreMode[]) {
  describe(`SDK middleware against the server (${mode} mode)`, function () {
    this.timeout(60_000);
    let service: Service;

    before(async () => {
      service = await startService(mode);
    });
    after(async () => {
      await service?.stop();
    });

    for (const framework of ['koa', 'express'] as Framework[]) {
      describe(`${framework} app`, () => {
        let client: Client;
        let counting: CountingClient;
        let app: AppHandle;

        beforeEach(async () => {
          // A generous timeout: two test processes share two cores, and these tests are about limits.
          client = createClient({ url: service.url, timeoutMs: 2000, failMode: 'closed' });
          counting = new CountingClient(client);
          app = await startApp(framework, counting);
        });
        afterEach(async () => {
          await app.close();
          await client.close();
        });

        const get = (path: string, user: string, headers: Record<string, string> = {}, signal?: AbortSignal) =>
          fetch(`${app.url}${path}`, { headers: { 'x-user': user, ...headers }, signal });

        it('lets exactly `limit` requests through, then answers 429 with the rate-limit headers and problem body', async () => {
          const user = freshUser();
          for (let i = 1; i <= 3; i++) {
            const res = await get('/deny', user);
            expect(res.status).to.equal(200);
            expect(res.headers.get('ratelimit-policy')).to.equal('"sdk-deny";q=3;w=3600');
            expect(res.headers.get('ratelimit')).to.match(new RegExp(`^"sdk-deny";r=${3 - i};t=\\d+$`));
            expect(res.headers.get('retry-after')).to.equal(null);
            const body = await res.json();
            expect(body.rateLimit).to.include({ allowed: true, action: 'allow', matched_policy_id: 'sdk-deny', remaining: 3 - i, downgraded: false });
          }
          const refused = await get('/deny', user);
          expect(refused.status).to.equal(429);
          expect(refused.headers.get('content-type')).to.match(/^application\/problem\+json/);
          expect(refused.headers.get('ratelimit-policy')).to.equal('"sdk-deny";q=3;w=3600');
          expect(refused.headers.get('ratelimit')).to.match(/^"sdk-deny";r=0;t=\d+$/);
          expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 3600);
          const problem = await refused.json();
          expect(problem).to.include({ type: QUOTA_EXCEEDED, title: 'Quota exceeded', status: 429 });
          expect(problem['violated-policies']).to.deep.equal(['sdk-deny']);
          expect(problem.detail).to.be.a('string').and.include('sdk-deny');
        });

        it('skip: a skipped request gets no decision and consumes nothing', async () => {
          const user = freshUser();
          for (let i = 0; i < 5; i++) {
            const skipped = await get('/skip', user, { 'x-skip': '1' });
            expect(skipped.status).to.equal(200);
            expect(skipped.headers.get('ratelimit')).to.equal(null);
            expect((await skipped.json()).rateLimit).to.equal(null);
          }
          // The same user's quota (3) is still whole: the skipped requests were never counted.
          for (let i = 1; i <= 3; i++) {
            const res = await get('/skip', user);
            expect(res.status).to.equal(200);
            expect((await res.json()).rateLimit).to.include({ allowed: true, remaining: 3 - i });
          }
          expect((await get('/skip', user)).status).to.equal(429);
        });

        it('renders legacy headers, or none, as asked', async () => {
          const user = freshUser();
          const legacy = await get('/legacy', user);
          expect(legacy.status).to.equal(200);
          expect(legacy.headers.get('x-ratelimit-limit')).to.equal('3');
          expect(legacy.headers.get('x-ratelimit-remaining')).to.equal('2');
          expect(Number(legacy.headers.get('x-ratelimit-reset'))).to.be.within(1, 3600);
          expect(legacy.headers.get('ratelimit')).to.equal(null);
          const quiet = await get('/quiet', user);
          expect(quiet.status).to.equal(200);
          expect(quiet.headers.get('ratelimit')).to.equal(null);
          expect(quiet.headers.get('x-ratelimit-limit')).to.equal(null);
          expect((await quiet.json()).rateLimit.remaining).to.equal(1);
        });

        it('drop, drop_low_priority and a refused sample answer 429; a high-severity request passes drop_low_priority', async () => {
          const user = freshUser();
          expect((await get('/drop', user)).status).to.equal(200);
          const dropped = await get('/drop', user);
          expect(dropped.status).to.equal(429);
          expect((await dropped.json())['violated-policies']).to.deep.equal(['sdk-drop']);

          expect((await get('/low-priority', user, { 'x-severity': 'debug' })).status).to.equal(200);
          const low = await get('/low-priority', user, { 'x-severity': 'debug' });
          expect(low.status).to.equal(429);
          expect((await low.json())['violated-policies']).to.deep.equal(['sdk-low-priority']);
          const high = await get('/low-priority', user, { 'x-severity': 'error' });
          expect(high.status).to.equal(200);
          expect((await high.json()).rateLimit).to.include({ allowed: true, action: 'drop_low_priority' });

          expect((await get('/sample', user)).status).to.equal(200);
          const sampled = await get('/sample', user);
          expect(sampled.status).to.equal(429);
          expect((await sampled.json())['violated-policies']).to.deep.equal(['sdk-sample']);
        });

        it('onLimited answers a refused request instead of the default 429', async () => {
          const user = freshUser();
          expect((await get('/custom', user)).status).to.equal(200);
          const res = await get('/custom', user);
          expect(res.status).to.equal(503);
          expect(await res.json()).to.deep.equal({ custom: 'drop' });
        });

        it('downgrade proceeds with downgraded = true; shadow proceeds without headers', async () => {
          const user = freshUser();
          expect((await (await get('/downgrade', user)).json()).rateLimit.downgraded).to.equal(false);
          const downgraded = await get('/downgrade', user);
          expect(downgraded.status).to.equal(200);
          expect((await downgraded.json()).rateLimit).to.include({ allowed: true, action: 'downgrade', downgraded: true });

          await get('/shadow', user);
          const shadow = await get('/shadow', user);
          expect(shadow.status).to.equal(200);
          expect(shadow.headers.get('ratelimit')).to.equal(null);
          expect((await shadow.json()).rateLimit).to.include({ allowed: true, shadow_mode: true, action: 'shadow_only' });
        });

        it('delay waits retry_after (within maxDelayMs) and re-checks once; a longer delay is refused at once', async () => {
          const user = freshUser();
          const before = await service.decisionCalls();
          expect((await get('/delay', user)).status).to.equal(200);
          const delayed = await get('/delay', user);
          expect(delayed.status).to.equal(200);
          expect((await delayed.json()).rateLimit).to.include({ allowed: true, action: 'allow' });
          // First request: one check; second: a delay answer, then the re-check.
          expect((await service.decisionCalls()) - before).to.equal(3);

          expect((await get('/delay-long', user)).status).to.equal(200);
          const refused = await get('/delay-long', user);
          expect(refused.status).to.equal(429);
          expect(Number(refused.headers.get('retry-after'))).to.be.within(2, 100);
          expect((await refused.json())['violated-policies']).to.deep.equal(['sdk-delay-long']);
        });

        it('concurrency: slots are held while handlers run and freed after client aborts', async () => {
          const user = freshUser();
          const aborts = [new AbortController(), new AbortController()];
          const held = aborts.map((a) => get('/slow', user, {}, a.signal).catch((e: Error) => e));
          await app.gate.untilEntered(2);
          const full = await get('/slow', user);
          expect(full.status).to.equal(429);
          expect(full.headers.get('ratelimit-policy')).to.equal('"sdk-slots";q=2;qu="concurrent-requests"');
          expect((await full.json())['violated-policies']).to.deep.equal(['sdk-slots']);
          for (const a of aborts) a.abort();
          for (const h of held) expect(await h).to.be.instanceOf(Error);
          await counting.until('releases', 2);
          app.gate.release();
          const [a, b] = await Promise.all([get('/slow', user), get('/slow', user)]);
          expect([a.status, b.status]).to.deep.equal([200, 200]);
          expect((await a.json()).concurrency).to.include({ allowed: true, reason: 'lease_acquired', matched_policy_id: 'sdk-slots' });
        });

        it('concurrency: a handler that throws still releases its slot', async () => {
          const user = freshUser();
          for (let i = 1; i <= 5; i++) {
            const res = await get('/fails', user);
            expect(res.status).to.equal(500);
            await counting.until('releases', i);
          }
        });

        /** A fresh user's /llm calls (the estimate and what was used as headers) and a peek at its token counter. */
        const llmOfFreshUser = () => {
          const user = freshUser();
          return {
            llm: (estimate: number, used: number) => get('/llm', user, { 'x-estimate': String(estimate), 'x-used': String(used) }),
            peek: () => client.peek({ endpoint: '/llm', user_id: user }),
          };
        };

        it('token budget: reserves the estimate, refunds what was not used, refuses what no longer fits', async () => {
          const { llm, peek } = llmOfFreshUser();
          const first = await llm(40, 10);
          expect(first.status).to.equal(200);
          expect((await first.json()).rateLimit).to.include({ remaining: 60 });
          // The refund happened before the response left: its headers show the counter after it (90), not the reservation (60).
          expect(counting.refunds).to.equal(1);
          expect(first.headers.get('ratelimit')).to.match(/^"sdk-tokens";r=90;t=\d+$/);
          expect((await peek()).remaining).to.equal(90);
          const second = await llm(80, 80); // all used: nothing to refund
          expect(second.status).to.equal(200);
          expect((await peek()).remaining).to.equal(10);
          const third = await llm(20, 0);
          expect(third.status).to.equal(429);
          expect((await third.json())['violated-policies']).to.deep.equal(['sdk-tokens']);
          expect((await peek()).remaining).to.equal(10);
          expect(counting.refunds).to.equal(1);
        });

        it('a request larger than the limit: 429 without Retry-After, a detail that says so, nothing consumed', async () => {
          const { llm, peek } = llmOfFreshUser();
          // An untouched quota of 100: a reservation of 101 can never be admitted.
          const untouched = await llm(101, 0);
          expect(untouched.status).to.equal(429);
          expect(untouched.headers.get('retry-after')).to.equal(null);
          // Whole: nothing to wait for until it resets.
          expect(untouched.headers.get('ratelimit')).to.equal('"sdk-tokens";r=100;t=0');
          const problem = await untouched.json();
          expect(problem['violated-policies']).to.deep.equal(['sdk-tokens']);
          expect(problem.detail).to.include('sdk-tokens').and.include('exceeds the limit').and.not.include('retry');
          expect((await peek()).remaining).to.equal(100);
          expect((await llm(30, 30)).status).to.equal(200);
          const used = await llm(250, 0);
          expect(used.status).to.equal(429);
          expect(used.headers.get('retry-after')).to.equal(null);
          expect(used.headers.get('ratelimit')).to.match(/^"sdk-tokens";r=70;t=[1-9]\d*$/);
          expect((await peek()).remaining).to.equal(70);
          expect(counting.refunds).to.equal(0);
        });
      });
    }
  });
}
