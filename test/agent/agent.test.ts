import http from 'node:http';
import type { AddressInfo } from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { expect } from 'chai';
import Router from '@koa/router';
import type Koa from 'koa';
import { startAgent, type RunningAgent } from '../../src/agent/agent.js';
import { loadAgentConfig } from '../../src/agent/config.js';
import { PolicySync } from '../../src/agent/policy-sync.js';
import { ConfigError } from '../../src/config.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { connectRedisCounterStore, type RedisCounterStore } from '../../src/redis/redis-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { connectCounterStores } from '../../src/composition/counter-stores.js';
import { createApp } from '../../src/http/app.js';
import { conditionalGet } from '../../src/http/conditional-get.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import type { Policy } from '../../src/policy/types.js';
import { setLogLevel } from '../../src/util/log.js';
import { makePolicy } from '../support/policies.js';
import { postJson, serve, type TestServer } from '../support/http.js';
import { command, randomPrefix, startRedis, type RedisHandle } from '../support/redis.js';

const API_KEY = 'agent-key-1';

/**
 * A stand-in for the server, built from the server's own parts: createApp with the decision routes,
 * a GET /rl/v1/policies route, the conditional-get middleware, and an API-key check. It counts calls.
 */
class FakeUpstream {
  policies: Policy[] = [];
  readonly matcher = new LiveMatcher();
  readonly counters = new MemoryCounterStore({ sweepIntervalMs: 0 });
  calls = { check: 0, list: 0, notModified: 0 };
  seenHeaders: Record<string, string | undefined>[] = [];
  /** 'ok' | 'hang' (check never answers) | 'error' (check answers 503) | 'org' (403 naming org_id) | 'forbidden' (403, no field) */
  mode: 'ok' | 'hang' | 'error' | 'org' | 'forbidden' = 'ok';
  server!: TestServer;

  async start(): Promise<this> {
    const router = new Router({ prefix: '/rl/v1' });
    router.get('/policies', (ctx) => {
      ctx.body = this.policies;
    });
    const decisions = new DecisionService({ policies: this.matcher, counters: this.counters, keyPrefix: 'up:' });
    const readiness = new Readiness();
    readiness.markReady();
    const observe: Koa.Middleware = async (ctx, next) => {
      if (ctx.get('X-Api-Key') !== API_KEY) {
        ctx.status = 401;
        ctx.body = { error: 'unauthenticated', status: 401 };
        return;
      }
      if (ctx.path === '/rl/v1/check') {
        this.calls.check++;
        this.seenHeaders.push({ 'x-request-id': ctx.get('X-Request-Id'), 'x-api-key': ctx.get('X-Api-Key') });
        if (this.mode === 'hang') return new Promise<void>(() => {});
        if (this.mode === 'error') {
          ctx.status = 503;
          ctx.body = { error: 'boom', status: 503 };
          return;
        }
        if (this.mode === 'org' || this.mode === 'forbidden') {
          ctx.status = 403;
          ctx.body = this.mode === 'org' ? { error: 'org_id is "other": this credential acts only for organisation "mine"', status: 403, field: 'org_id' } : { error: 'forbidden', status: 403 };
          return;
        }
      }
      if (ctx.path === '/rl/v1/policies') this.calls.list++;
      await next();
      if (ctx.status === 304) this.calls.notModified++;
    };
    const app = createApp({ decisions, readiness, maxBodyBytes: 65536, guards: [observe, conditionalGet()], routers: [router] });
    this.server = await serve(app);
    return this;
  }

  set(policies: Policy[]): void {
    this.policies = policies;
    this.matcher.replace(policies);
  }

  async close(): Promise<void> {
    await this.server.close();
    await this.counters.close();
  }
}

const limited = (id: string, over: Record<string, unknown> = {}) =>
  makePolicy({ policy_id: id, scope: { service: id }, algorithm: { type: 'fixed_window', limit: 2, window: '1m' }, ...over });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('sidecar agent (in process)', function () {
  this.timeout(15_000);
  let upstream: FakeUpstream;
  let agent: RunningAgent | undefined;
  let agentUrl: string;

  before(() => setLogLevel('silent'));
  after(() => setLogLevel('info'));
  beforeEach(async () => {
    upstream = await new FakeUpstream().start();
    upstream.set([limited('svc-open'), limited('svc-closed', { failure_mode: 'fail_closed' })]);
  });
  afterEach(async () => {
    await agent?.close();
    agent = undefined;
    await upstream.close();
  });

  async function startWith(env: Record<string, string> = {}): Promise<RunningAgent> {
    agent = await startAgent(
      loadAgentConfig({
        RL_AGENT_LISTEN: '127.0.0.1:0',
        RL_UPSTREAM_HTTP: upstream.server.url,
        RL_AGENT_API_KEY: API_KEY,
        RL_AGENT_UPSTREAM_TIMEOUT_MS: '300',
        RL_DRAIN_SECS: '0',
        ...env,
      }),
    );
    agentUrl = `http://127.0.0.1:${agent.port}`;
    return agent;
  }
  const check = (body: unknown, headers: Record<string, string> = {}) => postJson(`${agentUrl}/rl/v1/check`, body, headers);

  it('answers locally, without a hop, when no policy can match', async () => {
    await startWith();
    const { status, body } = await check({ service: 'nothing-matches-this' });
    expect(status).to.equal(200);
    expect(body).to.include({ allowed: true, action: 'allow', reason: 'no_matching_policy', matched_policy_id: '' });
    expect(upstream.calls.check).to.equal(0);
  });

  it('rejects a bad RequestContext with a 400 naming the field', async () => {
    await startWith();
    const { status, body, headers } = await check({ signal_type: 'carrier-pigeon' });
    expect(status).to.equal(400);
    expect(body.error).to.match(/signal_type/);
    expect(body.status).to.equal(400);
    expect(headers.get('x-request-id')).to.be.a('string');
    expect((await check({ quantity: -1 })).body.error).to.match(/quantity/);
    expect(upstream.calls.check).to.equal(0);
  });

  it('forwards a matching request with its credential and request id, and returns the server decision', async () => {
    await startWith();
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push((await check({ service: 'svc-open' }, { 'X-Request-Id': `req-${i}` })).body);
    expect(answers.map((a) => a.allowed)).to.deep.equal([true, true, false]);
    expect(answers[2]).to.include({ reason: 'limit_exceeded', matched_policy_id: 'svc-open', action: 'deny' });
    expect(upstream.calls.check).to.equal(3);
    expect(upstream.seenHeaders[0]).to.deep.equal({ 'x-request-id': 'req-0', 'x-api-key': API_KEY });
  });

  it('passes window, peek (quantity 0) and refund through to the server, and refuses what the server would', async () => {
    upstream.set([limited('svc-open'), makePolicy({ policy_id: 'leases', scope: { service: 'leases' }, algorithm: { type: 'concurrency', max_concurrency: 2 } })]);
    await startWith();
    const post = (operation: string, body: unknown) => postJson(`${agentUrl}/rl/v1/${operation}`, body);
    for (let i = 0; i < 2; i++) expect((await check({ service: 'svc-open' })).body).to.include({ allowed: true, window: 60_000 });
    const exhausted = await check({ service: 'svc-open', quantity: 0 });
    expect(exhausted.body).to.deep.include({ allowed: false, action: 'deny', remaining: 0, metadata: { peek: 'true' } });
    const refund = await post('refund', { service: 'svc-open', quantity: 1 });
    expect(refund.status).to.equal(200);
    expect(refund.body).to.include({ allowed: true, reason: 'refunded', remaining: 1, window: 60_000, matched_policy_id: 'svc-open' });
    expect((await check({ service: 'svc-open', quantity: 0 })).body).to.include({ allowed: true, remaining: 1 });
    expect((await check({ service: 'svc-open' })).body).to.include({ allowed: true, remaining: 0 });
    const forwarded = (await (await fetch(`${agentUrl}/rl/v1/agent/status`)).json()).decisions.forwarded;
    expect(forwarded, 'two checks, two peeks, a refund, a check').to.equal(6);

    // Answered locally, as the server would answer them.
    expect((await post('refund', { service: 'nothing-matches', quantity: 1 })).body).to.include({ allowed: true, reason: 'no_matching_policy' });
    for (const [operation, body] of [
      ['refund', { service: 'svc-open' }],
      ['refund', { service: 'svc-open', quantity: 0 }],
      ['refund', { service: 'leases', quantity: 1 }],
      ['acquire', { service: 'leases', quantity: 0 }],
    ] as const) {
      const answer = await post(operation, body);
      expect(answer.status, `${operation} ${JSON.stringify(body)}`).to.equal(400);
      expect(answer.body.error).to.match(/quantity/);
    }
  });

  it('answers by failure_mode, quickly, when the upstream is down, and recovers when it returns', async () => {
    await startWith();
    const port = new URL(upstream.server.url).port;
    await upstream.server.close();
    const started = performance.now();
    const open = await check({ service: 'svc-open' });
    const closed = await check({ service: 'svc-closed' });
    expect(performance.now() - started).to.be.below(500);
    expect(open.body).to.include({ allowed: true, action: 'allow', reason: 'counter_store_unavailable', matched_policy_id: 'svc-open' });
    expect(closed.body).to.include({ allowed: false, action: 'deny', reason: 'counter_store_unavailable', matched_policy_id: 'svc-closed' });
    // No policy matches: still answered locally, not by failure_mode.
    expect((await check({ service: 'other' })).body.reason).to.equal('no_matching_policy');
    // Enough failures to open the breaker: later calls do not even try the upstream.
    for (let i = 0; i < 5; i++) expect((await check({ service: 'svc-closed' })).body.allowed).to.equal(false);
    expect((await (await fetch(`${agentUrl}/rl/v1/agent/status`)).json()).upstream_breaker).to.equal('open');

    // The server comes back on the same port: decisions come from it again (breaker cool-down 1 s).
    const http = await import('node:http');
    const again = http.createServer(rebuild(upstream).callback());
    await new Promise<void>((resolve) => again.listen(Number(port), '127.0.0.1', resolve));
    try {
      const deadline = Date.now() + 3000;
      let body;
      do {
        await sleep(100);
        body = (await check({ service: 'svc-closed' })).body;
      } while (body.reason === 'counter_store_unavailable' && Date.now() < deadline);
      expect(body).to.include({ allowed: true, reason: 'within_limit' });
    } finally {
      again.closeAllConnections();
      await new Promise((resolve) => again.close(resolve));
    }
  });

  it("passes on the server's 403 naming org_id (its credential is limited to organisations); any other 403 is a refused credential", async () => {
    await startWith();
    upstream.mode = 'org';
    const refused = await check({ service: 'svc-open', org_id: 'other' });
    expect(refused.status).to.equal(403);
    expect(refused.body).to.include({ status: 403, field: 'org_id' });
    upstream.mode = 'forbidden';
    // The agent's own credential refused: the server gave no answer, failure_mode decides (fail_open here).
    expect((await check({ service: 'svc-open' })).body).to.include({ allowed: true, reason: 'counter_store_unavailable' });
    const status = (await (await fetch(`${agentUrl}/rl/v1/agent/status`)).json()).decisions;
    expect(status).to.include({ forwarded: 2, failure_mode: 1 });
  });

  it('bounds a hung or failing upstream by the upstream timeout', async () => {
    await startWith({ RL_AGENT_UPSTREAM_TIMEOUT_MS: '200' });
    upstream.mode = 'hang';
    let started = performance.now();
    const hung = await check({ service: 'svc-closed' });
    expect(performance.now() - started).to.be.within(150, 600);
    expect(hung.body).to.include({ allowed: false, reason: 'counter_store_unavailable' });
    upstream.mode = 'error';
    started = performance.now();
    const failed = await check({ service: 'svc-open' });
    expect(performance.now() - started).to.be.below(300);
    expect(failed.body).to.include({ allowed: true, reason: 'counter_store_unavailable' });
  });

  it('reports its status', async () => {
    await startWith({ RL_AGENT_SYNC_SECS: '7' });
    const response = await fetch(`${agentUrl}/rl/v1/agent/status`);
    const body = await response.json();
    expect(response.status).to.equal(200);
    expect(body).to.include({ upstream: upstream.server.url, policies: 2, last_sync_ok: true, sync_interval_secs: 7, invalidations: 0, mode: 'forward' });
    expect(Date.parse(body.last_sync_at)).to.be.closeTo(Date.now(), 5000);
    expect((await fetch(`${agentUrl}/healthz`)).status).to.equal(200);
    expect(await (await fetch(`${agentUrl}/healthz`)).text()).to.equal('ok');
    const unknown = await fetch(`${agentUrl}/nope`);
    expect(unknown.status).to.equal(404);
    expect((await unknown.json()).status).to.equal(404);
  });

  it('takes an invalidation with 202 and refreshes at once; an unchanged set costs a 304', async () => {
    await startWith();
    expect((await check({ service: 'svc-new' })).body.reason).to.equal('no_matching_policy');
    upstream.set([...upstream.policies, limited('svc-new')]);
    const response = await postJson(`${agentUrl}/rl/v1/agent/invalidate`, { policy_id: 'svc-new', change: 'created', version: 1 });
    expect(response.status).to.equal(202);
    expect(response.body).to.deep.equal({ accepted: true });
    await waitFor(async () => (await check({ service: 'svc-new' })).body.matched_policy_id === 'svc-new');
    const status = await (await fetch(`${agentUrl}/rl/v1/agent/status`)).json();
    expect(status).to.include({ invalidations: 1, policies: 3 });

    const before = upstream.calls.notModified;
    await postJson(`${agentUrl}/rl/v1/agent/invalidate`, {});
    await waitFor(async () => upstream.calls.notModified > before);
  });

  it('requires the shared bearer token on invalidate when one is configured', async () => {
    await startWith({ RL_AGENT_INVALIDATE_TOKEN: 'inv-token' });
    const none = await postJson(`${agentUrl}/rl/v1/agent/invalidate`, {});
    expect(none.status).to.equal(401);
    expect(none.headers.get('www-authenticate')).to.match(/^Bearer/);
    expect(none.body.status).to.equal(401);
    const wrong = await postJson(`${agentUrl}/rl/v1/agent/invalidate`, {}, { authorization: 'Bearer nope' });
    expect(wrong.status).to.equal(401);
    const right = await postJson(`${agentUrl}/rl/v1/agent/invalidate`, {}, { authorization: 'Bearer inv-token' });
    expect(right.status).to.equal(202);
    const status = await (await fetch(`${agentUrl}/rl/v1/agent/status`)).json();
    expect(status.invalidations).to.equal(1);
    // The other endpoints stay open: the token guards only invalidation.
    expect((await check({ service: 'x' })).status).to.equal(200);
  });

  it('picks up changes within one sync interval without any invalidation', async () => {
    await startWith({ RL_AGENT_SYNC_SECS: '1' });
    upstream.set([limited('svc-late')]);
    const started = Date.now();
    await waitFor(async () => (await check({ service: 'svc-late' })).body.matched_policy_id === 'svc-late', 2500);
    expect(Date.now() - started).to.be.below(1600);
  });

  it('forwards everything until it has synced once (never guesses "no policy")', async () => {
    const port = new URL(upstream.server.url).port;
    await upstream.server.close();
    await startWith({ RL_UPSTREAM_HTTP: `http://127.0.0.1:${port}` });
    const { body } = await check({ service: 'anything' });
    expect(body).to.include({ allowed: true, reason: 'counter_store_unavailable', matched_policy_id: '' });
    const status = await (await fetch(`${agentUrl}/rl/v1/agent/status`)).json();
    expect(status).to.include({ last_sync_ok: false, policies: 0 });
    upstream.server = await serve(rebuild(upstream).callback()); // for afterEach
  });
});

describe('PolicySync', () => {
  before(() => setLogLevel('silent'));
  after(() => setLogLevel('info'));

  it('a fetch from a hung upstream still times out after a garbage collection (its timeout signal is held)', async () => {
    // AbortSignal.any() holds its sources weakly (nodejs/node#57736): collected, the timeout would never fire.
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    let asked = 0;
    const hung = http.createServer(() => void asked++);
    await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = hung.address() as AddressInfo;
      const sync = new PolicySync({ upstream: `http://127.0.0.1:${port}`, headers: {}, intervalSecs: 3600, timeoutMs: 200 });
      const result = sync.sync();
      while (asked === 0) await sleep(10);
      gc();
      expect(await result).to.deep.include({ ok: false, changed: false });
      expect((await result).error).to.match(/timeout|aborted/i);
      sync.stop();
    } finally {
      hung.closeAllConnections();
      await new Promise((resolve) => hung.close(resolve));
    }
  });

  it('coalesces concurrent sync requests into at most one follow-up fetch', async () => {
    const upstream = await new FakeUpstream().start();
    try {
      upstream.set([limited('a')]);
      const sync = new PolicySync({ upstream: upstream.server.url, headers: { 'x-api-key': API_KEY }, intervalSecs: 60 });
      const results = await Promise.all(Array.from({ length: 20 }, () => sync.sync()));
      expect(results.every((r) => r.ok)).to.equal(true);
      expect(upstream.calls.list).to.equal(2);
      expect(sync.status()).to.include({ policies: 1, last_sync_ok: true });
      sync.stop();
    } finally {
      await upstream.close();
    }
  });

  it('re-fetches after an invalidation until the upstream shows the named change (a lagging node)', async () => {
    const upstream = await new FakeUpstream().start();
    try {
      upstream.set([limited('a')]);
      const sync = new PolicySync({ upstream: upstream.server.url, headers: { 'x-api-key': API_KEY }, intervalSecs: 60 });
      await sync.sync();
      // The change reaches this upstream 250 ms after the invalidation (as with pub/sub between nodes).
      setTimeout(() => upstream.set([limited('a'), limited('b')]), 250);
      const started = Date.now();
      await sync.invalidate({ policy_id: 'b', change: 'created', version: 1 });
      expect(Date.now() - started).to.be.within(200, 1500);
      expect(sync.reflects({ policy_id: 'b', change: 'created', version: 1 })).to.equal(true);
      expect(sync.status().policies).to.equal(2);
      // Deletions: reflected once the policy is gone.
      expect(sync.reflects({ policy_id: 'a', change: 'deleted', version: 1 })).to.equal(false);
      expect(sync.reflects({ policy_id: 'zzz', change: 'deleted', version: 4 })).to.equal(true);
      sync.stop();
    } finally {
      await upstream.close();
    }
  });

  it('applies only the changed policies of a new set to its matcher (no rebuild, one compile)', async () => {
    const upstream = await new FakeUpstream().start();
    try {
      const many = Array.from({ length: 40 }, (_, i) => limited(`p${i}`));
      upstream.set(many);
      const sync = new PolicySync({ upstream: upstream.server.url, headers: { 'x-api-key': API_KEY }, intervalSecs: 60 });
      expect((await sync.sync()).ok).to.equal(true);
      const matcher = sync.matcher.current();
      const compiled = matcher.stats.compiled;
      const changed = { ...limited('p7', { algorithm: { type: 'fixed_window', limit: 5, window: '1m' } }), version: 2 };
      upstream.set(many.map((p) => (p.policy_id === 'p7' ? changed : p)));
      expect(await sync.sync()).to.include({ ok: true, changed: true });
      expect(sync.matcher.current()).to.equal(matcher);
      expect(matcher.stats.compiled).to.equal(compiled + 1);
      expect(matcher.get('p7')?.policy.version).to.equal(2);
      sync.stop();
    } finally {
      await upstream.close();
    }
  });

  it('keeps the previous set when the upstream answers with an error', async () => {
    const upstream = await new FakeUpstream().start();
    try {
      upstream.set([limited('a'), limited('b')]);
      const sync = new PolicySync({ upstream: upstream.server.url, headers: { 'x-api-key': API_KEY }, intervalSecs: 60 });
      expect((await sync.sync()).ok).to.equal(true);
      const bad = new PolicySync({ upstream: upstream.server.url, headers: { 'x-api-key': 'wrong' }, intervalSecs: 60 });
      const result = await bad.sync();
      expect(result).to.include({ ok: false });
      expect(result.error).to.match(/401/);
      expect(sync.status().policies).to.equal(2);
    } finally {
      await upstream.close();
    }
  });
});

describe('agent config', () => {
  it('has the spec defaults', () => {
    const config = loadAgentConfig({});
    expect(config.listen).to.deep.equal({ host: undefined, port: 18080 });
    expect(config.upstream).to.equal('http://127.0.0.1:8080');
    expect(config.syncIntervalSecs).to.equal(30);
    expect(config.upstreamTimeoutMs).to.equal(500);
    expect(config.upstreamHeaders).to.deep.equal({});
    expect(config.counterStoreAddr).to.equal(undefined);
    expect(config.keyPrefix).to.equal('rl:');
  });

  it('sends RL_AGENT_API_KEY as X-Api-Key and RL_AGENT_TOKEN as a bearer token, not both', () => {
    expect(loadAgentConfig({ RL_AGENT_API_KEY: 'k' }).upstreamHeaders).to.deep.equal({ 'x-api-key': 'k' });
    expect(loadAgentConfig({ RL_AGENT_TOKEN: 't' }).upstreamHeaders).to.deep.equal({ authorization: 'Bearer t' });
    expect(() => loadAgentConfig({ RL_AGENT_API_KEY: 'k', RL_AGENT_TOKEN: 't' })).to.throw(ConfigError, /RL_AGENT_TOKEN/);
  });

  it('names the variable of a bad value', () => {
    expect(() => loadAgentConfig({ RL_AGENT_LISTEN: '18080' })).to.throw(ConfigError, /RL_AGENT_LISTEN/);
    expect(() => loadAgentConfig({ RL_UPSTREAM_HTTP: 'ftp://x' })).to.throw(ConfigError, /RL_UPSTREAM_HTTP/);
    expect(() => loadAgentConfig({ RL_AGENT_SYNC_SECS: '0' })).to.throw(ConfigError, /RL_AGENT_SYNC_SECS/);
    expect(() => loadAgentConfig({ RL_COUNTERSTORE_ADDR: 'redis:/x' })).to.throw(ConfigError, /RL_COUNTERSTORE_ADDR/);
    expect(() => loadAgentConfig({ RL_AGENT_TOKEN: 'has space' })).to.throw(ConfigError, /RL_AGENT_TOKEN/);
  });
});

describe('sidecar agent with RL_COUNTERSTORE_ADDR (decides against Redis directly)', function () {
  this.timeout(20_000);
  let redis: RedisHandle;
  let upstream: FakeUpstream;
  let agent: RunningAgent;
  let serverStore: RedisCounterStore;

  before(async () => {
    setLogLevel('silent');
    redis = await startRedis();
  });
  after(async () => {
    setLogLevel('info');
    await redis.stop();
  });
  afterEach(async () => {
    await agent?.close();
    await serverStore?.close();
    await upstream?.close();
  });

  /** The agent deciding against the suite's Redis (as its servers), forwarding nothing. */
  const redisDirectEnv = (prefix: string) => ({
    RL_AGENT_LISTEN: '127.0.0.1:0',
    RL_UPSTREAM_HTTP: upstream.server.url,
    RL_AGENT_API_KEY: API_KEY,
    RL_COUNTERSTORE_ADDR: redis.url,
    RL_KEY_PREFIX: prefix,
    RL_COUNTERSTORE_TIMEOUT_MS: '500',
    RL_DRAIN_SECS: '0',
  });

  /**
   * An upstream serving `policies`, the agent deciding on Redis under a fresh prefix, and beside it a
   * "server" deciding on the same Redis with the same prefix and policies.
   */
  async function agentBesideServer(policies: Policy[], serverOptions: { denyCache?: false } = {}) {
    const prefix = randomPrefix();
    upstream = await new FakeUpstream().start();
    upstream.set(policies);
    agent = await startAgent(loadAgentConfig(redisDirectEnv(prefix)));
    await agent.counterStore!.waitUntilReady();
    serverStore = connectRedisCounterStore(redis.url, { commandTimeoutMs: 500 });
    const server = new DecisionService({ policies: new LiveMatcher(upstream.policies), counters: serverStore, keyPrefix: prefix, ...serverOptions });
    return { url: `http://127.0.0.1:${agent.port}`, server };
  }

  it('shares the limit with a server on the same Redis, without asking the upstream to decide', async () => {
    const { url, server } = await agentBesideServer([makePolicy({ policy_id: 'shared', scope: { service: 'shared' }, algorithm: { type: 'fixed_window', limit: 5, window: '1m' } })]);

    const outcomes: boolean[] = [];
    for (let i = 0; i < 4; i++) outcomes.push((await postJson(`${url}/rl/v1/check`, { service: 'shared' })).body.allowed);
    for (let i = 0; i < 3; i++) outcomes.push((await server.check({ service: 'shared', quantity: 1, tags: {} })).allowed);
    expect(outcomes).to.deep.equal([true, true, true, true, true, false, false]);
    const last = (await postJson(`${url}/rl/v1/check`, { service: 'shared' })).body;
    expect(last).to.include({ allowed: false, reason: 'limit_exceeded', matched_policy_id: 'shared', remaining: 0 });
    expect(upstream.calls.check).to.equal(0);
    const status = await (await fetch(`${url}/rl/v1/agent/status`)).json();
    expect(status.mode).to.equal('redis');
  });

  it('peeks and refunds on the shared Redis counter too', async () => {
    const { url, server } = await agentBesideServer([makePolicy({ policy_id: 'budget', scope: { service: 'llm' }, algorithm: { type: 'quota', limit: 100, quota_period: '1h' } })]);

    // Reserve 80 tokens through the server, give back the 50 unused through the agent.
    expect((await server.check({ service: 'llm', quantity: 80, tags: {} })).remaining).to.equal(20);
    const peek = (await postJson(`${url}/rl/v1/check`, { service: 'llm', quantity: 0 })).body;
    expect(peek).to.deep.include({ allowed: true, remaining: 20, window: 3_600_000, metadata: { peek: 'true' } });
    const refund = (await postJson(`${url}/rl/v1/refund`, { service: 'llm', quantity: 50 })).body;
    expect(refund).to.include({ allowed: true, reason: 'refunded', remaining: 70 });
    expect((await server.check({ service: 'llm', quantity: 0, tags: {} })).remaining).to.equal(70);
    expect(upstream.calls.check).to.equal(0);
  });

  it('a process lease: answers from units taken ahead (metadata.lease "local"), never over with a server beside it, unspent units back on close', async () => {
    const LIMIT = 60;
    // No deny cache: its refusals would hide the units the agent gives back for up to RL_DENY_CACHE_MAX_AGE_MS.
    const { url, server } = await agentBesideServer(
      [makePolicy({ policy_id: 'hot', scope: { service: 'hot' }, lease: { max_units: 10, max_hold: '1m' }, algorithm: { type: 'fixed_window', limit: LIMIT, window: '1h' } })],
      { denyCache: false },
    );
    const scriptCalls = async () => Number(/calls=(\d+)/.exec(String(await command(redis.host, redis.port, ['INFO', 'commandstats'])).split('\n').filter((l) => l.startsWith('cmdstat_evalsha')).join(''))?.[1] ?? 0);

    const before = await scriptCalls();
    let admitted = 0;
    for (let i = 0; i < 40; i++) {
      const answer = (await postJson(`${url}/rl/v1/check`, { service: 'hot' })).body;
      expect(answer.metadata.lease).to.equal('local');
      admitted += Number(answer.allowed);
    }
    expect(admitted).to.equal(40);
    expect(await scriptCalls(), 'refills, not one script call per decision').to.be.below(before + 20);
    // The server beside it counts what the agent holds as used: together never over the limit.
    let byServer = 0;
    for (let i = 0; i < LIMIT; i++) byServer += Number((await server.check({ service: 'hot', quantity: 1, tags: {} })).allowed);
    expect(admitted + byServer).to.be.at.most(LIMIT);
    // Closing the agent gives its unspent units back: the server can then spend them.
    const held = LIMIT - admitted - byServer;
    await agent.close();
    agent = undefined as unknown as RunningAgent;
    let afterClose = 0;
    for (let i = 0; i < LIMIT; i++) afterClose += Number((await server.check({ service: 'hot', quantity: 1, tags: {} })).allowed);
    expect(afterClose, 'units the agent held and returned').to.equal(held);
    expect(admitted + byServer + afterClose).to.equal(LIMIT);
    expect(upstream.calls.check).to.equal(0);
  });

  it('with RL_REGION: a global budget is shared with a server of another region, never over, decided from the region units', async () => {
    const prefix = randomPrefix();
    const [global, otherRegion] = await Promise.all([startRedis(), startRedis()]);
    upstream = await new FakeUpstream().start();
    upstream.set([makePolicy({ policy_id: 'one', scope: { service: 'one' }, budget: 'global', algorithm: { type: 'fixed_window', limit: 20, window: '1h' } })]);
    agent = await startAgent(
      loadAgentConfig({ ...redisDirectEnv(prefix), RL_REGION: 'region-a', RL_GLOBAL_COUNTERSTORE_ADDR: global.url }),
    );
    await agent.counterStore!.waitUntilReady();
    const url = `http://127.0.0.1:${agent.port}`;
    const regionB = connectCounterStores({
      counterStoreAddr: otherRegion.url,
      counterStoreTimeoutMs: 500,
      region: { name: 'region-b', globalStoreAddr: global.url, globalTimeoutMs: 1000 },
      leaseMaxWaitMs: 100,
    })!.region!;
    try {
      const server = new DecisionService({ policies: new LiveMatcher(upstream.policies), counters: regionB, keyPrefix: prefix, region: 'region-b' });
      let admitted = 0;
      for (let i = 0; i < 15; i++) {
        const fromAgent = (await postJson(`${url}/rl/v1/check`, { service: 'one' })).body;
        expect(fromAgent.metadata).to.include({ budget: 'global', region: 'region-a' });
        const fromServer = await server.check({ service: 'one', quantity: 1, tags: {} });
        expect(fromServer.metadata).to.include({ budget: 'global', region: 'region-b' });
        admitted += Number(fromAgent.allowed) + Number(fromServer.allowed);
      }
      expect(admitted).to.be.at.most(20).and.at.least(15);
      expect(upstream.calls.check).to.equal(0);
    } finally {
      await regionB.close();
      await Promise.all([global.stop(), otherRegion.stop()]);
    }
  });
});

/** A fresh server app over the same policies (a "restarted" upstream: counters start empty). */
function rebuild(upstream: FakeUpstream): Koa {
  const router = new Router({ prefix: '/rl/v1' });
  router.get('/policies', (ctx) => {
    ctx.body = upstream.policies;
  });
  const readiness = new Readiness();
  readiness.markReady();
  const decisions = new DecisionService({ policies: upstream.matcher, counters: new MemoryCounterStore({ sweepIntervalMs: 0 }), keyPrefix: 'up2:' });
  return createApp({ decisions, readiness, maxBodyBytes: 65536, guards: [conditionalGet()], routers: [router] });
}

async function waitFor(condition: () => Promise<boolean>, timeoutMs = 2000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(25);
  }
}
