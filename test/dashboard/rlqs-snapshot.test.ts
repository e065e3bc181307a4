/**
 * The dashboard snapshot's `rlqs`: the RLQS hub's status each tick and the assignments the metrics
 * counted, by strategy; null where the server serves no RLQS, and for a viewer limited to organisations
 * (the streams are every organisation's).
 */
import { expect } from 'chai';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { Analytics } from '../../src/analytics/analytics.js';
import { DashboardHub, type DashboardStreamDeps } from '../../src/analytics/dashboard-hub.js';
import { Metrics } from '../../src/observability/metrics.js';

function hubWith(extra: Partial<DashboardStreamDeps>, metrics = new Metrics({ defaultMetrics: false })): DashboardHub {
  return new DashboardHub({
    analytics: new Analytics({ byOrg: true }),
    metrics,
    policies: { list: () => [], revision: () => 0 },
    counters: new MemoryCounterStore({ sweepIntervalMs: 0 }),
    readiness: new Readiness(),
    viewOf: () => ({ seesOrg: (org) => org === 'team-a', seesPolicy: () => false }),
    ...extra,
  });
}

/** The first snapshot a subscriber gets (the hubs tick every few ms here). */
function snapshotOf(hub: DashboardHub, orgs?: string[]): Promise<Record<string, unknown>> {
  const stream = hub.subscribe({ subject: 'viewer', role: 'admin', can_edit: false }, orgs);
  let text = '';
  return new Promise((resolve) => {
    stream.on('data', (chunk: Buffer) => {
      text += String(chunk);
      const frame = text.split('\n\n').find((f) => f.startsWith('event: snapshot'));
      if (frame === undefined) return;
      stream.destroy();
      resolve(JSON.parse(frame.split('data: ')[1]!) as Record<string, unknown>);
    });
  });
}

describe('dashboard snapshot: rlqs', () => {
  it('carries the streams, buckets and units held read each tick, and the assignments by strategy', () => {
    const metrics = new Metrics({ defaultMetrics: false });
    let status = { streams: 2, buckets: 3, units_held: 40 };
    const events = metrics.rlqsEvents(() => status);
    events.assigned!('token_bucket');
    events.assigned!('token_bucket');
    events.assigned!('deny_all');
    const hub = hubWith({ rlqs: () => status }, metrics);
    expect(hub.tick().rlqs).to.deep.equal({ streams: 2, buckets: 3, units_held: 40, assignments: { allow_all: 0, deny_all: 1, token_bucket: 2 } });
    status = { streams: 0, buckets: 0, units_held: 0 };
    events.assigned!('allow_all');
    expect(hub.tick().rlqs).to.deep.equal({ streams: 0, buckets: 0, units_held: 0, assignments: { allow_all: 1, deny_all: 1, token_bucket: 2 } });
  });

  it('is null without RLQS, and for a viewer limited to organisations', async () => {
    expect(hubWith({}).tick().rlqs).to.equal(null);
    const hub = hubWith({ rlqs: () => ({ streams: 1, buckets: 1, units_held: 5 }), intervalMs: 5 });
    hub.start();
    try {
      expect((await snapshotOf(hub)).rlqs).to.include({ streams: 1, units_held: 5 });
      expect((await snapshotOf(hub, ['team-a'])).rlqs).to.equal(null);
    } finally {
      hub.stop();
    }
  });
});
