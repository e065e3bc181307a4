import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { createApp } from '../../src/http/app.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { analyticsRoutes } from '../../src/http/routes/analytics.js';
import { metricsRoutes } from '../../src/http/routes/metrics.js';
import { Analytics } from '../../src/analytics/analytics.js';
import { Metrics } from '../../src/observability/metrics.js';
import { ObservabilityRecorder } from '../../src/analytics/recorder.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { parsePolicyDocument } from '../../src/policy/policy-file.js';

/** An enforcing per-tenant limit of 2 per minute, and a shadow per-tenant limit of 1 beside it. */
const POLICIES = parsePolicyDocument('test', {
  policies: [
    {
      policy_id: 'tenant-limit',
      name: 'tenant limit',
      scope: { tenant_id: '*' },
      algorithm: { type: 'fixed_window', limit: 2, window: '1h' },
    },
    {
      policy_id: 'tenant-shadow',
      name: 'tenant shadow',
      scope: { tenant_id: '*' },
      algorithm: { type: 'fixed_window', limit: 1, window: '1h' },
      enforcement_mode: 'shadow',
    },
  ],
});

describe('http: /metrics and /rl/v1/analytics/summary', () => {
  let server: http.Server;
  let base: string;
  let counters: MemoryCounterStore;

  before(async () => {
    const metrics = new Metrics();
    const analytics = new Analytics();
    counters = new MemoryCounterStore({ sweepIntervalMs: 0 });
    const decisions = new DecisionService({
      policies: new LiveMatcher(POLICIES),
      counters,
      keyPrefix: `test:${Math.random().toString(36).slice(2)}:`,
      recorder: new ObservabilityRecorder(metrics, analytics),
    });
    const readiness = new Readiness();
    readiness.markReady();
    const app = createApp({
      decisions,
      readiness,
      maxBodyBytes: 1024 * 1024,
      routers: [metricsRoutes(metrics), analyticsRoutes(analytics)],
    });
    server = http.createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const check = (body: unknown) =>
      fetch(`${base}/rl/v1/check`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await (await check({ tenant_id: 'acme', tags: { env: 'prod', i: String(i) } })).json());
    // within both; within enforce but over the shadow; over the enforcing limit.
    expect(answers.map((d) => [d.allowed, d.metadata.shadow_action])).to.deep.equal([[true, 'allow'], [true, 'deny'], [false, 'deny']]);
    const unmatched = await check({ org_id: 'nobody', tags: { env: 'dev' } });
    expect((await unmatched.json()).reason).to.equal('no_matching_policy');
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await counters.close();
  });

  it('GET /metrics serves the Prometheus text exposition with its content type', async () => {
    const res = await fetch(`${base}/metrics`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.equal('text/plain; version=0.0.4; charset=utf-8');
    expect(res.headers.get('x-request-id')).to.be.a('string').and.not.empty;
    expect(res.headers.get('x-content-type-options')).to.equal('nosniff');
    const text = await res.text();
    for (const name of [
      'rl_decisions_total', 'rl_decision_duration_seconds', 'rl_policy_cache_hits_total', 'rl_policy_cache_misses_total',
      'rl_counter_store_errors_total', 'rl_failure_mode_decisions_total', 'rl_tenant_decisions_total', 'rl_policy_decisions_total',
    ]) {
      expect(text, name).to.include(`# TYPE ${name} `);
    }
    const lines = text.split('\n');
    // allowed and denied by the answer (3 + 1 = every decision); shadow beside them: the two the shadow policy would have limited.
    expect(lines).to.include('rl_decisions_total{operation="check",outcome="allowed"} 3');
    expect(lines).to.include('rl_decisions_total{operation="check",outcome="shadow"} 2');
    expect(lines).to.include('rl_decisions_total{operation="check",outcome="denied"} 1');
    expect(lines).to.include('rl_tenant_decisions_total{tenant="acme",outcome="denied"} 1');
    expect(lines).to.include('rl_policy_decisions_total{policy_id="tenant-limit",outcome="allowed"} 2');
    expect(lines).to.include('rl_policy_decisions_total{policy_id="tenant-limit",outcome="denied"} 1');
    expect(lines).to.include('rl_policy_decisions_total{policy_id="tenant-shadow",outcome="shadow"} 2');
    expect(lines).to.include('rl_decision_duration_seconds_count 4');
    expect(text).to.include('process_resident_memory_bytes');
  });

  it('GET /metrics answers other methods with a JSON 405', async () => {
    const res = await fetch(`${base}/metrics`, { method: 'POST' });
    expect(res.status).to.equal(405);
    expect(await res.json()).to.include({ status: 405 });
  });

  it('GET /rl/v1/analytics/summary returns the summary README "Observability" describes', async () => {
    const res = await fetch(`${base}/rl/v1/analytics/summary`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^application\/json/);
    const s = await res.json();
    expect(s).to.have.all.keys('since', 'total', 'allowed', 'denied', 'shadow', 'by_action', 'by_policy', 'top_tags');
    expect(Date.parse(s.since)).to.be.a('number').and.not.NaN;
    expect(s.since).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    expect({ total: s.total, allowed: s.allowed, denied: s.denied, shadow: s.shadow }).to.deep.equal({ total: 4, allowed: 3, denied: 1, shadow: 2 });
    expect(s.by_action).to.deep.equal({ allow: 3, deny: 1 });
    expect(s.by_policy).to.deep.equal([
      { policy_id: 'tenant-limit', total: 3, allowed: 2, denied: 1, shadow: 0 },
      // Evaluated beside tenant-limit three times, it would have limited two.
      { policy_id: 'tenant-shadow', total: 3, allowed: 0, denied: 0, shadow: 2 },
    ]);
    expect(s.top_tags[0]).to.deep.equal({ key: 'env', value: 'prod', count: 3 });
    expect(s.top_tags).to.have.length(5);
  });

  it('honours top', async () => {
    const s = await (await fetch(`${base}/rl/v1/analytics/summary?top=1`)).json();
    expect(s.by_policy).to.have.length(1);
    expect(s.top_tags).to.deep.equal([{ key: 'env', value: 'prod', count: 3 }]);
    expect(s.total).to.equal(4);
    const max = await fetch(`${base}/rl/v1/analytics/summary?top=10000`);
    expect(max.status).to.equal(200);
  });

  for (const bad of ['0', '-1', 'abc', '1.5', '', '10001', '1e3', '99999999999999999999', 'top=1&top=2']) {
    it(`rejects top=${JSON.stringify(bad)} with a 400 naming top`, async () => {
      const query = bad.startsWith('top=') ? bad : `top=${encodeURIComponent(bad)}`;
      const res = await fetch(`${base}/rl/v1/analytics/summary?${query}`);
      expect(res.status).to.equal(400);
      expect(res.headers.get('content-type')).to.match(/^application\/json/);
      const body = await res.json();
      expect(body.status).to.equal(400);
      expect(body.error).to.match(/^top: /);
    });
  }
});
