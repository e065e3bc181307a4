/**
 * The client when the service is hung (SIGSTOP) or gone (SIGKILL): answers follow failMode within
 * timeoutMs (a latency bound the SDK promises; asserted with generous slack for a loaded machine),
 * the circuit opens, and the service is used again once it is back.
 */
import { expect } from 'chai';
import { performance } from 'node:perf_hooks';
import { createClient, RateLimitUnavailableError, type Client, type Decision } from '@rl/client';
import { startApp } from './apps.js';
import { freshUser, startService, type Service } from './service.js';

const TIMEOUT_MS = 50;
/** Scheduling slack on a shared two-core machine; the promise is "timeoutMs plus a few ms". */
const SLACK_MS = 200;

async function timed(call: () => Promise<Decision>): Promise<{ decision: Decision; elapsed: number }> {
  const start = performance.now();
  const decision = await call();
  return { decision, elapsed: performance.now() - start };
}

/** Calls until the service decides again (bounded by a count of attempts, ~10 s at most). */
async function untilRecovered(client: Client, ctx: object): Promise<Decision> {
  let last: Decision | undefined;
  for (let attempt = 0; attempt < 100; attempt++) {
    last = await client.check(ctx);
    if (last.reason !== 'service_unavailable') return last;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return last!;
}

describe('SDK fail mode', function () {
  this.timeout(60_000);
  let service: Service | undefined;

  afterEach(async () => {
    // A test that stopped the process may have failed before continuing it.
    try {
      if (service) process.kill(service.process.pid, 'SIGCONT');
    } catch {
      // already gone (a test killed it)
    }
    await service?.stop();
    service = undefined;
  });

  for (const transport of ['http', 'grpc'] as const) {
    describe(`over ${transport}`, () => {
      const clientFor = (s: Service, failMode: 'open' | 'closed' | 'throw') =>
        createClient({
          ...(transport === 'http' ? { url: s.url } : { grpcTarget: s.grpcTarget }),
          timeoutMs: TIMEOUT_MS,
          failMode,
          breaker: { failureThreshold: 3, coolDownMs: 100 },
        });

      it('a hung service: open and closed answer service_unavailable within timeoutMs, the circuit opens, and it recovers', async () => {
        service = await startService('memory');
        const open = clientFor(service, 'open');
        const closed = clientFor(service, 'closed');
        const ctx = { resource: 'plain', user_id: freshUser() };
        try {
          // Warm: connections made, so the hang below is a timeout, not a refused connect.
          expect((await untilRecovered(open, ctx)).reason).to.equal('within_limit');
          expect((await untilRecovered(closed, ctx)).reason).to.equal('within_limit');
          process.kill(service.process.pid, 'SIGSTOP');

          for (let i = 0; i < 3; i++) {
            const a = await timed(() => open.check(ctx));
            expect(a.decision).to.include({ allowed: true, action: 'allow', reason: 'service_unavailable', matched_policy_id: '' });
            expect(a.elapsed).to.be.at.most(TIMEOUT_MS + SLACK_MS);
            const b = await timed(() => closed.check(ctx));
            expect(b.decision).to.include({ allowed: false, action: 'deny', reason: 'service_unavailable' });
            expect(b.elapsed).to.be.at.most(TIMEOUT_MS + SLACK_MS);
          }
          expect(open.circuitOpen).to.equal(true);
          expect(closed.circuitOpen).to.equal(true);
          // Releases and refunds give something back: never refused, even failing closed.
          expect(await closed.release({ endpoint: '/slow', user_id: 'x' })).to.include({ allowed: true, reason: 'service_unavailable' });

          process.kill(service.process.pid, 'SIGCONT');
          // The calls that timed out still reached the server and counted them: a fresh user has room.
          const after = { resource: 'plain', user_id: freshUser() };
          expect(await untilRecovered(open, after)).to.include({ reason: 'within_limit', matched_policy_id: 'sdk-plain' });
          expect(await untilRecovered(closed, after)).to.include({ reason: 'within_limit', matched_policy_id: 'sdk-plain' });
          expect(open.circuitOpen).to.equal(false);
        } finally {
          await Promise.all([open.close(), closed.close()]);
        }
      });

      it('a killed service: failMode answers at once, `throw` throws, and a restarted service is used again', async () => {
        service = await startService('memory');
        const open = clientFor(service, 'open');
        const throwing = clientFor(service, 'throw');
        const ctx = { resource: 'plain', user_id: freshUser() };
        const ports = { http: service.url.split(':').pop()!, grpc: service.grpcTarget.split(':').pop()! };
        try {
          expect((await untilRecovered(open, ctx)).reason).to.equal('within_limit');
          await service.process.kill();

          const a = await timed(() => open.check(ctx));
          expect(a.decision).to.include({ allowed: true, reason: 'service_unavailable' });
          expect(a.elapsed).to.be.at.most(TIMEOUT_MS + SLACK_MS);
          const error = await throwing.check(ctx).catch((e: unknown) => e);
          expect(error).to.be.instanceOf(RateLimitUnavailableError);

          await service.stop();
          service = await startService('memory', { env: { RL_HTTP_ADDR: `127.0.0.1:${ports.http}`, RL_GRPC_ADDR: `127.0.0.1:${ports.grpc}` } });
          expect((await untilRecovered(open, ctx)).reason).to.equal('within_limit');
        } finally {
          await Promise.all([open.close(), throwing.close()]);
        }
      });
    });
  }

  it('middleware: failing open serves the request without rate-limit headers; failing closed answers 503', async () => {
    service = await startService('memory');
    const open = createClient({ url: service.url, timeoutMs: TIMEOUT_MS, failMode: 'open' });
    const closed = createClient({ url: service.url, timeoutMs: TIMEOUT_MS, failMode: 'closed' });
    const [openApp, closedApp] = await Promise.all([startApp('koa', open), startApp('express', closed)]);
    try {
      await service.process.kill();
      const served = await fetch(`${openApp.url}/deny`, { headers: { 'x-user': freshUser() } });
      expect(served.status).to.equal(200);
      expect(served.headers.get('ratelimit')).to.equal(null);
      expect((await served.json()).rateLimit).to.include({ allowed: true, reason: 'service_unavailable' });
      const refused = await fetch(`${closedApp.url}/deny`, { headers: { 'x-user': freshUser() } });
      expect(refused.status).to.equal(503);
      expect(refused.headers.get('content-type')).to.match(/^application\/problem\+json/);
      expect(await refused.json()).to.include({ status: 503, title: 'Service Unavailable' });
    } finally {
      await Promise.all([openApp.close(), closedApp.close(), open.close(), closed.close()]);
    }
  });
});
