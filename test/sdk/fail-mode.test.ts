/**
 * The client when the service is hung (SIGSTOP) or gone (SIGKILL): answers follow failMode, a hung
 * service's calls ended by the client's own timeoutMs deadline and a gone service's by the refused
 * connection (shown by the reason a `failMode: 'throw'` client gives, never by a stopwatch), the
 * circuit opens, and the service is used again once it is back.
 */
import { expect } from 'chai';
import { performance } from 'node:perf_hooks';
import { createClient, RateLimitUnavailableError, type Client, type Decision } from '@rl/client';
import { startApp } from './apps.js';
import { freshUser, startService, type Service } from './service.js';

const TIMEOUT_MS = 50;
/** Clock granularity: a deadline cannot fire before its time, give or take this. */
const CLOCK_SLACK_MS = 5;

async function timed(call: () => Promise<Decision>): Promise<{ decision: Decision; elapsed: number }> {
  const start = performance.now();
  const decision = await call();
  return { decision, elapsed: performance.now() - start };
}

/** Why a `failMode: 'throw'` client found the service unavailable. */
async function unavailableReason(client: Client, ctx: object): Promise<string> {
  const error = await client.check(ctx).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).to.be.instanceOf(RateLimitUnavailableError);
  return (error as Error).message;
}

/** What each transport says when no answer came within the deadline. */
const DEADLINE_PASSED = { http: new RegExp(`no answer within ${TIMEOUT_MS} ms`), grpc: /deadline exceeded/i };

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
      const clientFor = (s: Service, failMode: 'open' | 'closed' | 'throw', timeoutMs = TIMEOUT_MS) =>
        createClient({
          ...(transport === 'http' ? { url: s.url } : { grpcTarget: s.grpcTarget }),
          timeoutMs,
          failMode,
          breaker: { failureThreshold: 3, coolDownMs: 100 },
        });

      it('a hung service: open and closed answer service_unavailable at their timeoutMs deadline, the circuit opens, and it recovers', async () => {
        service = await startService('memory');
        const open = clientFor(service, 'open');
        const closed = clientFor(service, 'closed');
        const throwing = clientFor(service, 'throw');
        const ctx = { resource: 'plain', user_id: freshUser() };
        try {
          // Warm: connections made, so the hang below is a timeout, not a refused connect.
          expect((await untilRecovered(open, ctx)).reason).to.equal('within_limit');
          expect((await untilRecovered(closed, ctx)).reason).to.equal('within_limit');
          expect((await untilRecovered(throwing, ctx)).reason).to.equal('within_limit');
          process.kill(service.process.pid, 'SIGSTOP');

          // The client's own deadline ends a call to a hung service (an upper bound on how long that
          // takes is mocha's timeout: a call that waited for the service would hang the test).
          expect(await unavailableReason(throwing, ctx)).to.match(DEADLINE_PASSED[transport]);
          for (let i = 0; i < 3; i++) {
            // The first three calls of each client time out (the fourth would meet the open circuit):
            // none can end before its deadline.
            const a = await timed(() => open.check(ctx));
            expect(a.decision).to.include({ allowed: true, action: 'allow', reason: 'service_unavailable', matched_policy_id: '' });
            expect(a.elapsed).to.be.at.least(TIMEOUT_MS - CLOCK_SLACK_MS);
            const b = await timed(() => closed.check(ctx));
            expect(b.decision).to.include({ allowed: false, action: 'deny', reason: 'service_unavailable' });
            expect(b.elapsed).to.be.at.least(TIMEOUT_MS - CLOCK_SLACK_MS);
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
          await Promise.all([open.close(), closed.close(), throwing.close()]);
        }
      });

      it('a killed service: failMode answers at once (the connection is refused, no deadline waited for), `throw` throws, and a restarted service is used again', async () => {
        service = await startService('memory');
        const open = clientFor(service, 'open');
        // A deadline far off: whatever ends its call to the killed service, it is not the deadline.
        const throwing = clientFor(service, 'throw', 30_000);
        const ctx = { resource: 'plain', user_id: freshUser() };
        const ports = { http: service.url.split(':').pop()!, grpc: service.grpcTarget.split(':').pop()! };
        try {
          expect((await untilRecovered(open, ctx)).reason).to.equal('within_limit');
          await service.process.kill();

          expect(await open.check(ctx)).to.include({ allowed: true, reason: 'service_unavailable' });
          // Why it is at once: the refused connection ends the call, long before any deadline.
          const why = await unavailableReason(throwing, ctx);
          expect(why).to.not.match(DEADLINE_PASSED[transport]);
          expect(why).to.match(transport === 'http' ? /connect ECONNREFUSED/ : /^.*: 14: No connection established/);

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
