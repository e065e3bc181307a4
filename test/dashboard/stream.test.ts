import { expect } from 'chai';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PassThrough } from 'node:stream';
import { buildDashboard } from '../../dashboard/build.js';
import { Authenticator } from '../../src/auth/authenticator.js';
import { loadServerConfig } from '../../src/config.js';
import type { CounterStore } from '../../src/counters/counter-store.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { connectRedisCounterStore } from '../../src/redis/redis-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { RlError } from '../../src/errors.js';
import { createApp, createHttpListener } from '../../src/http/app.js';
import { HttpAuth } from '../../src/http/auth-guard.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { DASHBOARD_CSP, dashboardAssetRoutes, dashboardStreamRoutes } from '../../src/http/routes/dashboard.js';
import { DashboardHub } from '../../src/analytics/dashboard-hub.js';
import type { SeriesHistory } from '../../src/schema/dashboard-stream.js';
import { Analytics } from '../../src/analytics/analytics.js';
import { DeniedIdentities, bothRecorders } from '../../src/analytics/denied-identities.js';
import { Metrics } from '../../src/observability/metrics.js';
import { ObservabilityRecorder } from '../../src/analytics/recorder.js';
import { FilePolicyStore } from '../../src/policy-store/file-policy-store.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { PolicyService } from '../../src/policy-service/policy-service.js';
import { setLogLevel } from '../../src/util/log.js';
import { serve, type TestServer } from '../support/http.js';
import { startPrivateRedis, type RedisHandle } from '../support/redis.js';

/** A service with two policies (one fails open, one fails closed), decisions recorded into fresh analytics. */
async function world(dir: string, counters: CounterStore) {
  const store = await FilePolicyStore.open(dir);
  const matcher = new LiveMatcher();
  const policies = new PolicyService({ store, matcher });
  await policies.create({ policy_id: 'per-user', scope: { user_id: '*' }, algorithm: { type: 'fixed_window', limit: 2, window: '1h' }, failure_mode: 'fail_open' }, 't');
  await policies.create({ policy_id: 'login', scope: { endpoint: '/login' }, algorithm: { type: 'fixed_window', limit: 9, window: '1h' }, failure_mode: 'fail_closed' }, 't');
  const metrics = new Metrics({ defaultMetrics: false });
  const analytics = new Analytics();
  const deniedIdentities = new DeniedIdentities(matcher);
  const recorder = bothRecorders(new ObservabilityRecorder(metrics, analytics), deniedIdentities);
  const decisions = new DecisionService({ policies: matcher, counters, keyPrefix: 'dash', recorder });
  const readiness = new Readiness();
  readiness.markReady();
  return { store, policies, metrics, analytics, decisions, readiness, counters, deniedIdentities };
}

/** Who subscribes, as the stream route says it. */
const viewer = (role: string | null = null) => ({ subject: 'tester', role, can_edit: role === 'admin' });

/** The frames written to a subscriber so far, parsed. */
function frames(stream: PassThrough): { event: string; data: any }[] {
  const text = (stream.read() as Buffer | null)?.toString('utf8') ?? '';
  return text
    .split('\n\n')
    .filter(Boolean)
    .map((frame) => {
      const [event, data] = frame.split('\n');
      return { event: event.slice('event: '.length), data: JSON.parse(data.slice('data: '.length)) };
    });
}

describe('dashboard routes', function () {
  this.timeout(30_000);
  let dir: string;
  let assets: string;

  before(async () => {
    setLogLevel('error');
    assets = await buildDashboard(mkdtempSync(join(tmpdir(), 'rl-dashboard-assets-')));
  });
  after(() => rmSync(assets, { recursive: true, force: true }));
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'rl-dashboard-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  describe('over HTTP with API-key auth', () => {
    let server: TestServer;
    let hub: DashboardHub;
    let readiness: Readiness;
    let closeStore: () => Promise<void>;

    beforeEach(async () => {
      const w = await world(join(dir, 'policies'), new MemoryCounterStore({ sweepIntervalMs: 0 }));
      closeStore = () => w.store.close();
      readiness = w.readiness;
      hub = new DashboardHub({ ...w, intervalMs: 3_600_000, maxSubscribers: 2 });
      const auth = loadServerConfig({ RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'apikey', RL_AUTH_API_KEYS: 'admin-key,ro-key:read-only' }).auth;
      server = await serve(
        createHttpListener({
          decisions: w.decisions,
          readiness: w.readiness,
          maxBodyBytes: 65536,
          auth: new HttpAuth(new Authenticator(auth), auth),
          publicRouters: [dashboardAssetRoutes({ assetDirs: [join(dir, 'missing') + '/', assets + '/'] })],
          routers: [dashboardStreamRoutes(hub)],
        }),
      );
    });
    afterEach(async () => {
      await server.close();
      await closeStore();
    });

    it('serves the built page and its assets without credentials, under a CSP that allows only this origin', async () => {
      const page = await fetch(`${server.url}/dashboard/`);
      expect(page.status).to.equal(200);
      expect(page.headers.get('content-type')).to.equal('text/html; charset=utf-8');
      expect(page.headers.get('content-security-policy')).to.equal(DASHBOARD_CSP);
      expect(DASHBOARD_CSP).to.not.contain('unsafe-inline');
      const html = await page.text();
      expect(html).to.contain('<script type="module" src="app.js">');
      expect(html).to.not.match(/<script>|<style|style=|https?:\/\//);
      for (const [file, type] of [
        ['app.js', 'text/javascript; charset=utf-8'],
        ['dashboard.css', 'text/css; charset=utf-8'],
        ['uPlot.min.css', 'text/css; charset=utf-8'],
      ]) {
        const response = await fetch(`${server.url}/dashboard/${file}`);
        expect([file, response.status, response.headers.get('content-type')]).to.deep.equal([file, 200, type]);
        expect((await response.arrayBuffer()).byteLength).to.be.greaterThan(100);
      }
      const redirect = await fetch(`${server.url}/dashboard`, { redirect: 'manual' });
      expect([redirect.status, redirect.headers.get('location')]).to.deep.equal([302, '/dashboard/']);
    });

    it('answers 503 naming the build command while the assets are not built', async () => {
      const w = await world(join(dir, 'unbuilt'), new MemoryCounterStore({ sweepIntervalMs: 0 }));
      const unbuilt = await serve(
        createApp({ decisions: w.decisions, readiness: w.readiness, maxBodyBytes: 65536, publicRouters: [dashboardAssetRoutes({ assetDirs: [join(dir, 'missing') + '/'] })] }),
      );
      try {
        const response = await fetch(`${unbuilt.url}/dashboard/`);
        expect(response.status).to.equal(503);
        expect((await response.json()).error).to.contain('npm run build:dashboard');
      } finally {
        await unbuilt.close();
        await w.store.close();
      }
    });

    it('serves nothing but the built files', async () => {
      for (const path of ['/dashboard/build.ts', '/dashboard/..%2Fpackage.json', '/dashboard/constructor']) {
        const response = await fetch(server.url + path);
        expect([path, response.status]).to.deep.equal([path, 404]);
        expect((await response.json()).error).to.match(/no dashboard asset/);
      }
    });

    it('answers 401 to a stream request without credentials and says hello with the caller role', async () => {
      expect((await fetch(`${server.url}/rl/v1/stream`)).status).to.equal(401);
      for (const [key, role, canEdit] of [
        ['ro-key', 'read-only', false],
        ['admin-key', 'admin', true],
      ] as const) {
        const abort = new AbortController();
        const response = await fetch(`${server.url}/rl/v1/stream`, { headers: { 'X-Api-Key': key }, signal: abort.signal });
        expect(response.headers.get('content-type')).to.equal('text/event-stream; charset=utf-8');
        const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
        let text = '';
        while (!text.includes('\n\n')) text += (await reader.read()).value;
        const [event, data] = text.split('\n');
        expect(event).to.equal('event: hello');
        expect(JSON.parse(data.slice(6))).to.include({ role, can_edit: canEdit, interval_ms: 3_600_000 });
        abort.abort();
      }
    });

    it('caps concurrent streams with a 503 and ends every stream when the node drains', async () => {
      const open = async () => {
        const response = await fetch(`${server.url}/rl/v1/stream`, { headers: { 'X-Api-Key': 'ro-key' } });
        return response;
      };
      const first = await open();
      const second = await open();
      expect([first.status, second.status, hub.size]).to.deep.equal([200, 200, 2]);
      const third = await open();
      expect(third.status).to.equal(503);
      expect((await third.json()).error).to.contain('too many dashboard streams');
      readiness.markDraining();
      expect(hub.size).to.equal(0);
      // Both bodies come to an end (the streams were ended, not left hanging).
      await Promise.all([first.text(), second.text()]);
    });
  });

  describe('snapshots', () => {
    it('builds one snapshot per tick for every subscriber, with per-second rates by outcome and policy', async () => {
      const w = await world(dir, new MemoryCounterStore({ sweepIntervalMs: 0 }));
      let clock = 1_000_000;
      const hub = new DashboardHub({ ...w, intervalMs: 3_600_000, now: () => clock });
      const a = hub.subscribe(viewer('admin'));
      const b = hub.subscribe(viewer('read-only'));
      expect(frames(a).map((f) => f.event)).to.deep.equal(['hello']);
      frames(b);
      // 3 calls for one user against a limit of 2 (2 allowed, 1 denied), 1 on /login, 1 with no policy; 2 s pass.
      for (let i = 0; i < 3; i++) await w.decisions.check({ user_id: 'u1', quantity: 1, tags: {} });
      await w.decisions.check({ endpoint: '/login', quantity: 1, tags: {} });
      await w.decisions.check({ service: 'x', quantity: 1, tags: {} });
      clock += 2000;
      const snapshot = hub.tick();
      const [fa, fb] = [frames(a), frames(b)];
      expect(fa).to.deep.equal(fb);
      expect(fa.map((f) => f.event)).to.deep.equal(['snapshot']);
      expect(fa[0].data).to.deep.equal(JSON.parse(JSON.stringify(snapshot)));
      expect(snapshot.rates).to.deep.equal({ allowed: 2, denied: 0.5, shadow: 0 });
      expect(snapshot.totals).to.include({ total: 5, allowed: 4, denied: 1, shadow: 0 });
      expect(snapshot.policies).to.deep.equal([
        { policy_id: 'per-user', allowed: 1, denied: 0.5, shadow: 0 },
        { policy_id: 'login', allowed: 0.5, denied: 0, shadow: 0 },
      ]);
      expect(snapshot).to.deep.include({ store: { kind: 'memory', state: 'up' }, failing_open: [], fail_open_rate: 0, readiness: 'ready' });
      expect(snapshot.denied_identities).to.deep.equal([{ policy_id: 'per-user', identity: 'user_id=u1', count: 1, error: 0 }]);
      // Nothing happened in the next tick: every rate is back to 0, the totals stay.
      clock += 1000;
      const quiet = hub.tick();
      expect([quiet.rates, quiet.policies.map((p) => p.allowed + p.denied + p.shadow), quiet.totals.total]).to.deep.equal([{ allowed: 0, denied: 0, shadow: 0 }, [0, 0], 5]);
      // The policy set's revision moves with every change, so pages know to reload their lists.
      await w.policies.rollout('login', { rollout_percent: 50 }, 't');
      expect(hub.tick().policies_revision).to.be.greaterThan(quiet.policies_revision);
      // A new subscriber gets the history kept since the hub started, in columns.
      const c = hub.subscribe(viewer());
      const history = frames(c)[0].data.history as SeriesHistory;
      expect(history.at).to.deep.equal([1_002_000, 1_003_000, 1_003_000]);
      expect([history.allowed, history.denied, history.shadow]).to.deep.equal([[2, 0, 0], [0.5, 0, 0], [0, 0, 0]]);
      expect(history.policies).to.deep.equal([
        { policy_id: 'per-user', allowed: [1, 0, 0], denied: [0.5, 0, 0], shadow: [0, 0, 0] },
        { policy_id: 'login', allowed: [0.5, 0, 0], denied: [0, 0, 0], shadow: [0, 0, 0] },
      ]);
      for (const s of [a, b, c]) s.destroy();
      await once(c, 'close');
      expect(hub.size).to.equal(0);
      await w.store.close();
    });

    it("keeps in its history the busiest policies of each tick, not those busiest since start-up", async () => {
      const w = await world(dir, new MemoryCounterStore({ sweepIntervalMs: 0 }));
      let clock = 1_000_000;
      const hub = new DashboardHub({ ...w, intervalMs: 3_600_000, historyPolicies: 1, now: () => clock });
      // per-user is busy first (2 decisions), then only /login is (1 decision): its tick's busiest.
      for (let i = 0; i < 2; i++) await w.decisions.check({ user_id: 'u1', quantity: 1, tags: {} });
      clock += 1000;
      hub.tick();
      await w.decisions.check({ endpoint: '/login', quantity: 1, tags: {} });
      clock += 1000;
      hub.tick();
      const history = frames(hub.subscribe(viewer()))[0].data.history as SeriesHistory;
      expect(history.policies).to.deep.equal([{ policy_id: 'login', allowed: [null, 1], denied: [null, 0], shadow: [null, 0] }]);
      hub.endAll();
      await w.store.close();
    });

    it("carries the process's lease totals: refills, units returned and units lapsed, every level and policy together", async () => {
      const w = await world(dir, new MemoryCounterStore({ sweepIntervalMs: 0 }));
      const hub = new DashboardHub({ ...w, intervalMs: 3_600_000 });
      expect(hub.tick().leases).to.deep.equal({ refills: 0, units_returned: 0, units_lapsed: 0, units_lapsed_by_reason: {}, waits: 0 });
      // The hooks the lease holders call (src/lease): two levels, two policies.
      const process = w.metrics.leaseEvents('process', 'per-user');
      const region = w.metrics.leaseEvents('region', 'login');
      process.refilled!(40);
      process.refilled!(0);
      region.refilled!(100);
      process.returned!(7);
      region.returned!(30);
      process.lapsed!(2, 'window_ended');
      region.lapsed!(5, 'parent_unreachable');
      process.waited!(0.01);
      expect(hub.tick().leases).to.deep.include({ refills: 3, units_returned: 37, units_lapsed: 7, waits: 1 });
      await w.store.close();
    });

    it('drops a subscriber that stops reading once it holds too many unread bytes', async () => {
      const w = await world(dir, new MemoryCounterStore({ sweepIntervalMs: 0 }));
      const hub = new DashboardHub({ ...w, intervalMs: 3_600_000, maxBufferedBytes: 4096 });
      const stalled = hub.subscribe(viewer());
      const reading = hub.subscribe(viewer());
      reading.resume();
      let ticks = 0;
      while (hub.size === 2 && ticks < 100) {
        hub.tick();
        ticks++;
        await new Promise((resolve) => setImmediate(resolve)); // the reading one drains meanwhile
      }
      expect(hub.size).to.equal(1);
      expect(stalled.destroyed).to.equal(true);
      // About 4 KiB of ~400-byte snapshots: a handful of ticks, not the 100 allowed.
      expect(ticks).to.be.within(2, 20);
      reading.destroy();
      await w.store.close();
    });

    it('starts a policy new to a cut top list at rate 0, not at its lifetime count', async () => {
      const w = await world(dir, new MemoryCounterStore({ sweepIntervalMs: 0 }));
      let clock = 1_000_000;
      const hub = new DashboardHub({ ...w, intervalMs: 3_600_000, topPolicies: 1, now: () => clock });
      // login is the busiest (3), per-user has 2; the top-1 list of this tick is cut.
      for (let i = 0; i < 3; i++) await w.decisions.check({ endpoint: '/login', quantity: 1, tags: {} });
      for (let i = 0; i < 2; i++) await w.decisions.check({ user_id: 'u1', quantity: 1, tags: {} });
      clock += 1000;
      hub.tick();
      const s = hub.subscribe(viewer());
      // per-user overtakes login within the tick with 2 more decisions (both over its limit of 2).
      for (let i = 0; i < 2; i++) await w.decisions.check({ user_id: 'u1', quantity: 1, tags: {} });
      clock += 1000;
      const first = hub.tick();
      // Its count before the tick is unknown (it was cut), so it is not charged its 4 lifetime decisions.
      expect(first.policies).to.deep.equal([{ policy_id: 'per-user', allowed: 0, denied: 0, shadow: 0 }]);
      await w.decisions.check({ user_id: 'u1', quantity: 1, tags: {} });
      clock += 1000;
      expect(hub.tick().policies).to.deep.equal([{ policy_id: 'per-user', allowed: 0, denied: 1, shadow: 0 }]);
      s.destroy();
      await w.store.close();
    });

    it('refuses a subscriber past the cap', () => {
      const hub = new DashboardHub({
        analytics: new Analytics(),
        metrics: new Metrics({ defaultMetrics: false }),
        policies: { list: () => [], revision: () => 0 } as unknown as PolicyService,
        counters: new MemoryCounterStore({ sweepIntervalMs: 0 }),
        readiness: new Readiness(),
        maxSubscribers: 1,
      });
      const only = hub.subscribe(viewer());
      expect(() => hub.subscribe(viewer()))
        .to.throw(RlError)
        .with.property('kind', 'unavailable');
      only.destroy();
    });

    describe('with a Redis counter store', () => {
      let redis: RedisHandle | undefined;
      afterEach(async () => {
        await redis?.stop();
        redis = undefined;
      });

      it('reports Redis up, then the open circuit and the fail_open policies that admit unchecked', async () => {
        redis = await startPrivateRedis();
        const counters = connectRedisCounterStore(redis.url, { commandTimeoutMs: 200 });
        const w = await world(dir, counters);
        const hub = new DashboardHub({ ...w, intervalMs: 3_600_000 });
        const stream = hub.subscribe(viewer());
        await w.decisions.check({ user_id: 'u1', quantity: 1, tags: {} });
        expect(hub.tick()).to.deep.include({ store: { kind: 'redis', state: 'up' }, failing_open: [] });

        await redis.stop();
        redis = undefined;
        // Each failed decision counts towards the breaker; once open, operations are refused without Redis.
        let snapshot = hub.tick();
        let failOpenRates = 0;
        for (let i = 0; i < 50 && snapshot.store.state !== 'circuit_open'; i++) {
          const decision = await w.decisions.check({ user_id: 'u1', quantity: 1, tags: {} });
          expect(decision).to.include({ allowed: true, reason: 'counter_store_unavailable' });
          snapshot = hub.tick();
          failOpenRates += snapshot.fail_open_rate;
        }
        expect(failOpenRates).to.be.greaterThan(0);
        expect(snapshot.store).to.deep.equal({ kind: 'redis', state: 'circuit_open' });
        // Only the enabled policy with failure_mode fail_open; `login` fails closed.
        expect(snapshot.failing_open).to.deep.equal(['per-user']);
        stream.destroy();
        await counters.close();
        await w.store.close();
      });
    });
  });
});
