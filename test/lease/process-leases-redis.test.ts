/**
 * Process leases on a real Redis (CONTRACT "Process leases"): every transport marks the answers of a
 * leased counter `metadata.lease: "local"`; two server processes (and two RL_WORKERS workers) on one
 * hot key never admit more than the limit, make far fewer than one Redis script call per decision, and
 * give their unspent units back on SIGTERM (the counter then holds exactly what was admitted).
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { connectRedisCounterStore, type RedisCounterStore } from '../../src/counters/redis-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { createEmbeddedClient } from '../../src/embedded/index.js';
import { Readiness } from '../../src/http/readiness.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { envoyClient, rateLimitClient, startGrpc, unary } from '../grpc/helpers.js';
import { HTTP_PATHS } from '../support/http-listeners.js';
import { postJson, serve } from '../support/http.js';
import { makePolicy } from '../support/policies.js';
import { randomPrefix, startPrivateRedis, type RedisHandle } from '../support/redis.js';
import { startServerProcess, type ServerProcessHandle } from '../support/server-process.js';
import { startGroup } from '../workers/group.js';

/** Script calls Redis has run so far (EVALSHA and EVAL, whatever the caller). */
async function scriptCalls(admin: Redis): Promise<number> {
  const stats = await admin.info('commandstats');
  let calls = 0;
  for (const match of stats.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) calls += Number(match[2]);
  return calls;
}

describe('process leases on a real Redis', function () {
  this.timeout(120_000);
  let redis: RedisHandle;
  let admin: Redis;

  before(async () => {
    redis = await startPrivateRedis();
    admin = new Redis(redis.url);
  });
  after(async () => {
    admin?.disconnect();
    await redis?.stop();
  });

  describe('metadata.lease "local" on every transport', () => {
    const leased = makePolicy({
      policy_id: 'leased',
      scope: { user_id: '*' },
      algorithm: { type: 'fixed_window', limit: 1_000_000, window: '1h' },
      lease: { max_units: 50, max_hold: '1s' },
    });
    const exact = makePolicy({ policy_id: 'exact', scope: { service: 'exact' }, algorithm: { type: 'fixed_window', limit: 1_000_000, window: '1h' } });
    let counters: RedisCounterStore;
    let decisions: DecisionService;

    before(() => {
      counters = connectRedisCounterStore(redis.url, { commandTimeoutMs: 2_000 });
      decisions = new DecisionService({ policies: new LiveMatcher([leased, exact]), counters, keyPrefix: randomPrefix() });
    });
    after(async () => {
      await decisions.letGoLeases();
      await counters.close();
    });

    for (const [name, build] of HTTP_PATHS) {
      it(`HTTP, ${name}`, async () => {
        const readiness = new Readiness();
        readiness.markReady();
        const server = await serve(build({ decisions, readiness, maxBodyBytes: 1 << 20 }));
        try {
          for (let i = 0; i < 3; i++) {
            const { body } = await postJson(`${server.url}/rl/v1/check`, { user_id: 'http' });
            expect(body).to.deep.include({ allowed: true, matched_policy_id: 'leased' });
            expect(body.metadata.lease).to.equal('local');
          }
          const plain = await postJson(`${server.url}/rl/v1/check`, { service: 'exact' });
          expect(plain.body.matched_policy_id).to.equal('exact');
          expect(plain.body.metadata.lease).to.equal(undefined);
          const peek = await postJson(`${server.url}/rl/v1/check`, { user_id: 'http', quantity: 0 });
          expect(peek.body.metadata).to.deep.include({ peek: 'true', lease: 'local' });
          const refund = await postJson(`${server.url}/rl/v1/refund`, { user_id: 'http', quantity: 1 });
          expect(refund.body).to.deep.include({ reason: 'refunded' });
          expect(refund.body.metadata.lease).to.equal('local');
        } finally {
          await server.close();
        }
      });
    }

    it('gRPC CheckLimit and Envoy ShouldRateLimit', async () => {
      const grpcServer = await startGrpc([leased, exact], { decisions });
      const client = rateLimitClient(grpcServer.target);
      const envoy = envoyClient(grpcServer.target);
      try {
        const decision = await unary(client, 'CheckLimit', { user_id: 'grpc' });
        expect(decision).to.deep.include({ allowed: true, matched_policy_id: 'leased' });
        expect(decision.metadata.lease).to.equal('local');
        const response = await unary(envoy, 'ShouldRateLimit', { domain: 'edge', descriptors: [{ entries: [{ key: 'user_id', value: 'envoy' }] }] });
        expect(response.overall_code).to.equal('OK');
        expect(response.dynamic_metadata.fields.lease).to.deep.include({ stringValue: 'local' });
      } finally {
        client.close();
        envoy.close();
        await grpcServer.close();
      }
    });

    it('the embedded client in Redis mode', async () => {
      const client = await createEmbeddedClient({ redisAddr: redis.url, keyPrefix: randomPrefix(), policies: [leased] });
      try {
        for (let i = 0; i < 3; i++) {
          const decision = await client.check({ user_id: 'embedded' });
          expect(decision).to.deep.include({ allowed: true, matched_policy_id: 'leased' });
          expect(decision.metadata.lease).to.equal('local');
        }
      } finally {
        await client.close();
      }
    });
  });

  /** Deciders on one Redis: two server processes, or one server whose RL_WORKERS=2 workers share its port. */
  const setups: [string, (env: Record<string, string>) => Promise<ServerProcessHandle[]>][] = [
    ['two server processes', (env) => Promise.all([startServerProcess(env), startServerProcess(env)])],
    ['one server with RL_WORKERS=2', async (env) => [await startGroup({ ...env, RL_WORKERS: '2' })]],
  ];
  for (const [name, start] of setups) {
    describe(`${name} on one hot key`, () => {
      let nodes: ServerProcessHandle[] = [];
      const keyPrefix = randomPrefix();
      const LIMIT = 2000;

      before(async () => {
        // A generous store deadline on this busy machine: a take that timed out may still have run, and
        // its units would be lost (under-admission, the safe side) and spoil the exact count below. So
        // the lease wait: a decision refused after RL_LEASE_MAX_WAIT_MS (lease_wait_timeout) is not the
        // limit's refusal this test counts.
        nodes = await start({ RL_COUNTERSTORE_ADDR: redis.url, RL_KEY_PREFIX: keyPrefix, RL_COUNTERSTORE_TIMEOUT_MS: '5000', RL_LEASE_MAX_WAIT_MS: '10000' });
      });
      after(async () => {
        await Promise.all(nodes.map((node) => node.kill()));
      });

      it('never admits more than the limit, makes far fewer script calls than decisions, and gives unspent units back on SIGTERM', async () => {
        // A quota: its period starts with the first consumption, so no window boundary falls inside the run.
        const policy = { policy_id: 'hot', scope: { service: 'hot' }, algorithm: { type: 'quota', limit: LIMIT, quota_period: '1h' }, lease: { max_units: 500, max_hold: '5s' } };
        expect((await postJson(`${nodes[0].url}/rl/v1/policies`, policy)).status).to.equal(201);
        // Every decider has the policy: 20 peeks in a row on each address match it (hang guard only).
        for (const node of nodes) {
          for (let tries = 0, inARow = 0; inARow < 20; tries++) {
            const matched = (await postJson(`${node.url}/rl/v1/check`, { service: 'hot', quantity: 0 })).body.matched_policy_id === 'hot';
            inARow = matched ? inARow + 1 : 0;
            if (tries > 2000) throw new Error('policy never reached the deciders');
            if (!matched) await new Promise((r) => setTimeout(r, 10));
          }
        }
        const callsBefore = await scriptCalls(admin);
        const DECISIONS = 2 * LIMIT;
        let allowed = 0;
        let leasedAnswers = 0;
        const reasons = new Map<string, number>();
        let next = 0;
        // 64 concurrent clients spread over the addresses, until DECISIONS checks are answered.
        await Promise.all(
          Array.from({ length: 64 }, async (_, client) => {
            const node = nodes[client % nodes.length];
            while (next < DECISIONS) {
              next++;
              const { status, body } = await postJson(`${node.url}/rl/v1/check`, { service: 'hot' });
              expect(status).to.equal(200);
              reasons.set(body.reason, (reasons.get(body.reason) ?? 0) + 1);
              if (body.allowed && body.reason === 'within_limit') allowed++;
              if (body.metadata.lease === 'local') leasedAnswers++;
            }
          }),
        );
        const calls = (await scriptCalls(admin)) - callsBefore;
        console.log(`      ${DECISIONS} decisions: ${allowed} admitted of ${LIMIT}, ${calls} script calls (${(calls / DECISIONS).toFixed(4)} per decision)`);
        // Every answer came from the counter (through a lease): none from a failure mode.
        expect([...reasons.keys()].sort()).to.deep.equal(['limit_exceeded', 'within_limit']);
        expect(allowed).to.be.at.most(LIMIT);
        expect(allowed).to.be.at.least(LIMIT * 0.9);
        expect(leasedAnswers).to.be.greaterThan(0);
        expect(calls / DECISIONS).to.be.below(0.1);

        // SIGTERM: every decider drains and gives its unspent units back; the counter holds what was admitted.
        const exits = await Promise.all(nodes.map((node) => node.stop('SIGTERM')));
        expect(exits.map((e) => e.code)).to.deep.equal(nodes.map(() => 0));
        const checker = connectRedisCounterStore(redis.url, { commandTimeoutMs: 2_000 });
        try {
          const keys = (await admin.keys(`${keyPrefix}*hot*`)).filter((k) => !k.includes('polic'));
          expect(keys).to.have.length(1);
          const used = LIMIT - (await checker.peek(keys, { type: 'quota', limit: LIMIT, periodMs: 3_600_000 })).remaining;
          expect(used).to.equal(allowed);
        } finally {
          await checker.close();
        }
      });
    });
  }
});
