/**
 * GET /rl/v1/info in each mode: the build and modes always; the counter store masters and lease totals in
 * Redis mode; the region and the global store's state in region mode; each answer valid against
 * ServerInfoSchema (the OpenAPI document's).
 */
import { Value } from '@sinclair/typebox/value';
import { expect } from 'chai';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { createApp } from '../../src/http/app.js';
import { infoRoutes, type LiveInfo } from '../../src/http/routes/info.js';
import { Metrics } from '../../src/observability/metrics.js';
import { regionStatus } from '../../src/analytics/region-status.js';
import { ServerInfoSchema } from '../../src/schema/index.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { serve } from '../support/http.js';

const BUILD = { version: '1.2.3', counters: 'redis', policy_store: 'redis', auth: 'off', tls: false } as const;

async function infoOf(live: LiveInfo, principal?: { subject: string; orgs?: string[] }): Promise<Record<string, unknown>> {
  const counters = new MemoryCounterStore({ sweepIntervalMs: 0 });
  const readiness = new Readiness();
  readiness.markReady();
  const decisions = new DecisionService({ policies: new LiveMatcher([]), counters, keyPrefix: 't:' });
  const server = await serve(createApp({ decisions, readiness, maxBodyBytes: 1024, routers: [infoRoutes(BUILD, live)], guards: principal ? [async (ctx, next) => { ctx.state.principal = principal; await next(); }] : [] }).callback());
  try {
    const response = await fetch(`${server.url}/rl/v1/info`);
    expect(response.status).to.equal(200);
    const body = (await response.json()) as Record<string, unknown>;
    expect([...Value.Errors(ServerInfoSchema, body)].map((e) => `${e.path}: ${e.message}`)).to.deep.equal([]);
    return body;
  } finally {
    await server.close();
    await counters.close();
  }
}

describe('http: GET /rl/v1/info', () => {
  it('without live parts: the build and modes only', async () => {
    const body = await infoOf({});
    expect(body).to.include({ service: 'rl-decision-service', version: '1.2.3', counters: 'redis' });
    expect(body).to.not.have.any.keys('region', 'leases', 'counter_store_masters');
  });

  it('in region mode: the region, the global store as reachable or not (by its breakers), and the lease totals by reason', async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const events = metrics.leaseEvents('region', 'p');
    events.refilled!(10);
    events.returned!(4);
    events.lapsed!(2, 'window_ended');
    events.waited!(0.02);
    let global = { reachable: true, masters: [{ master: 'master', breaker: 'closed' as const, consecutive_failures: 0, pending_calls: 1 }] };
    const live: LiveInfo = { region: () => regionStatus('eu-west', global), leases: () => metrics.leaseTotals() };
    let body = await infoOf(live);
    expect(body.region).to.deep.equal({ name: 'eu-west', global_store: { state: 'up', masters: global.masters } });
    expect(body.leases).to.deep.equal({ refills: 1, units_returned: 4, units_lapsed: 2, units_lapsed_by_reason: { window_ended: 2 }, waits: 1 });
    // Read on each request: unreachable with an open breaker is `circuit_open`, without one `down`.
    // The lease totals are every organisation's: a credential limited to organisations does not get them.
    expect(await infoOf(live, { subject: 'team-a', orgs: ['team-a'] })).to.not.have.any.keys('leases');
    global = { reachable: false, masters: [{ ...global.masters[0], breaker: 'open' as never }] };
    body = await infoOf(live);
    expect((body.region as { global_store: { state: string } }).global_store.state).to.equal('circuit_open');
    global = { reachable: false, masters: [{ ...global.masters[0], breaker: 'closed' }] };
    body = await infoOf(live);
    expect((body.region as { global_store: { state: string } }).global_store.state).to.equal('down');
  });
});
