/**
 * Process leases on a real Redis (docs/distribution.md "Process leases below a region, and sidecars"): every transport marks the answers of a
 * leased counter `metadata.lease: "local"`; two server processes (and two RL_WORKERS workers) on one
 * hot key never admit more than the limit, make far fewer than one Redis script call per decision, and
 * give their unspent units back on SIGTERM (the counter then holds exactly what was admitted).
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import type { RateSpec } from '../../src/counters/counter-spec.js';
import type { LeaseCounterResult, NamedTake } from '../../src/counters/counter-store.js';
import { counterKeys, takesKey } from '../../src/counters/keys.js';
import { connectRedisCounterStore, type RedisCounterStore } from '../../src/redis/redis-store.js';
import { CounterStoreUnavailableError } from '../../src/errors.js';
import { ProcessLeases } from '../../src/lease/process-leases.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { createEmbeddedClient } from '../../src/embedded/index.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { envoyClient, rateLimitClient, startGrpc, unary } from '../grpc/helpers.js';
import { HTTP_PATHS } from '../support/http-listeners.js';
import { startLinkProxy, type LinkProxy } from '../support/link-proxy.js';
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

  /**
   * One process's leases on a store reached through a link that holds bytes up (a black-hole): a take
   * whose answer is held past the store's timeout has run on Redis, and is reclaimed once Redis answers
   * again; a take whose request is held past its deadline takes nothing when it arrives. Counted, not timed.
   */
  describe('named takes over a link that holds bytes up', () => {
    const TIMEOUT_MS = 300;
    const policy = makePolicy({
      policy_id: 'named',
      scope: { service: 'named' },
      algorithm: { type: 'quota', limit: 1000, quota_period: '1h' },
      lease: { max_units: 20, max_hold: '1m' },
    });
    const compiled = new LiveMatcher([policy]).current().get('named')!;
    const spec = compiled.spec as RateSpec;
    let proxy: LinkProxy;
    let store: RedisCounterStore;
    let direct: RedisCounterStore;
    let leases: ProcessLeases;
    let keys: string[];
    let counts: { failed: number; returned: number; lapsed: number };
    /** The names the takes carried, and the reclaims' answers, in order. */
    let names: (NamedTake | undefined)[];
    let reclaims: LeaseCounterResult[];

    beforeEach(async () => {
      proxy = await startLinkProxy(redis);
      store = connectRedisCounterStore(proxy.url, { commandTimeoutMs: TIMEOUT_MS });
      direct = connectRedisCounterStore(redis.url, { commandTimeoutMs: 2_000 });
      await Promise.all([store.waitUntilReady(), direct.waitUntilReady()]);
      keys = counterKeys(randomPrefix(), 'named', spec, []);
      counts = { failed: 0, returned: 0, lapsed: 0 };
      names = [];
      reclaims = [];
      const observed = new Proxy(store, {
        get(target, name) {
          if (name === 'take') {
            return (...args: Parameters<RedisCounterStore['take']>) => {
              names.push(args[4]);
              return target.take(...args);
            };
          }
          if (name === 'reclaim') {
            return async (...args: Parameters<RedisCounterStore['reclaim']>) => {
              const answer = await target.reclaim(...args);
              reclaims.push(answer);
              return answer;
            };
          }
          const value = Reflect.get(target, name, target) as unknown;
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      leases = new ProcessLeases({
        store: observed,
        maxWaitMs: 10_000,
        takeTimeoutMs: TIMEOUT_MS,
        events: () => ({ failed: () => counts.failed++, returned: (units) => (counts.returned += units), lapsed: (units) => (counts.lapsed += units) }),
      });
    });
    afterEach(async () => {
      await leases.letGoAll();
      await Promise.all([store.close(), direct.close()]);
      await proxy.close();
    });

    const used = async (): Promise<number> => 1000 - (await direct.peek(keys, spec)).remaining;
    const ops = () => leases.operationsFor(keys, compiled)!;
    /** One decision of one unit: 1 if admitted; the failure mode (store unreachable) admits nothing here. */
    const decide = async (): Promise<number> => {
      try {
        return (await ops().consume(keys, spec, 1)).allowed ? 1 : 0;
      } catch (error) {
        if (!(error instanceof CounterStoreUnavailableError)) throw error;
        return 0;
      }
    };
    /** Decides until one take has failed (the link holds its bytes); answers the decisions admitted. */
    const decideUntilATakeFails = async (): Promise<number> => {
      let admitted = 0;
      for (let i = 0; i < 1000 && counts.failed === 0; i++) admitted += await decide();
      expect(counts.failed).to.equal(1);
      return admitted;
    };
    /** Decides until `done` (a hang guard only: each try waits a moment for the take it sent). */
    const decideUntil = async (done: () => boolean): Promise<number> => {
      let admitted = 0;
      for (let i = 0; i < 200 && !done(); i++) {
        admitted += await decide();
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(done()).to.equal(true);
      return admitted;
    };

    it("a take whose answer is held past the store's timeout ran on Redis: reclaimed once Redis answers again, its units counted returned", async () => {
      let admitted = 0;
      for (let i = 0; i < 10; i++) admitted += await decide();
      await ops().peek(keys, spec); // behind any take in flight on the connection
      const before = await used();
      proxy.blackHole('to-client');
      admitted += await decideUntilATakeFails();
      const lost = (await used()) - before;
      expect(lost, 'the take whose answer was held took units on Redis').to.be.above(0);
      proxy.heal();
      // The next take that succeeds brings the reclaim.
      admitted += await decideUntil(() => reclaims.length > 0);
      expect(reclaims[0]).to.include({ outcome: 'done', units: lost, lapsed: 0 });
      expect(counts.returned).to.equal(lost);
      await leases.letGoAll();
      expect(await used()).to.equal(admitted);
      expect(counts.lapsed).to.equal(0);
    });

    it('a take whose request is held past its deadline (by the Redis clock) takes nothing when it arrives, and its reclaim counts nothing', async () => {
      let admitted = 0;
      for (let i = 0; i < 10; i++) admitted += await decide();
      await ops().peek(keys, spec);
      const before = await used();
      proxy.blackHole('to-target');
      admitted += await decideUntilATakeFails();
      const held = names[names.length - 1]!;
      expect(held.takeId).to.be.a('string');
      expect(held.deadline, 'a deadline once the Redis clock was sampled').to.be.a('number');
      // Same machine: Date.now reads the Redis clock. (The store gave up no earlier than the deadline.)
      while (Date.now() <= held.deadline! + 5) await new Promise((resolve) => setTimeout(resolve, 10));
      proxy.heal();
      await (store.client as Redis).ping(); // behind the held take on the connection: it has run
      expect(await used()).to.equal(before);
      // The next take that succeeds brings the reclaim: nothing to give back.
      admitted += await decideUntil(() => reclaims.length > 0);
      expect(reclaims[0]).to.include({ units: 0, lapsed: 0 });
      expect(counts).to.include({ returned: 0, lapsed: 0 });
      await leases.letGoAll();
      expect(await used()).to.equal(admitted);
      expect(counts.lapsed).to.equal(0);
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
          const found = (await admin.keys(`${keyPrefix}*hot*`)).filter((k) => !k.includes('polic'));
          // The counter, not its take ledger (process leases name their takes).
          const keys = found.filter((k) => !found.some((counter) => takesKey(counter) === k));
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
