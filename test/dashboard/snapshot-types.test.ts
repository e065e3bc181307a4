/**
 * The stream's messages are defined once (src/schema/dashboard-stream.ts): the page types them from there
 * (dashboard/src/types.ts, type-only) and the hub builds them by those types. This holds what the hub
 * really sends (JSON, as a page reads it) to the schema, so a field the types do not describe, or a value
 * of the wrong kind, fails here.
 */
import { Value } from '@sinclair/typebox/value';
import { expect } from 'chai';
import type { Hello as PageHello, Snapshot as PageSnapshot } from '../../dashboard/src/types.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { Analytics } from '../../src/analytics/analytics.js';
import { DashboardHub, type DashboardHello, type DashboardSnapshot } from '../../src/analytics/dashboard-hub.js';
import { Metrics } from '../../src/observability/metrics.js';
import { HelloSchema, SnapshotSchema } from '../../src/schema/dashboard-stream.js';
import '../../src/schema/index.js'; // registers the date-time format the schemas use

/** `true` when A and B are each assignable to the other (the brackets stop unions distributing). */
type Mutual<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const holds = <T extends true[]>(...checks: T): T => checks;
holds<[Mutual<PageSnapshot, DashboardSnapshot>, Mutual<PageHello, DashboardHello>]>(true, true);

/** Every key of a JSON value, recursively, as paths: what a schema with extra keys allowed would not catch. */
function unknownKeys(value: unknown, schema: { properties?: Record<string, unknown>; allOf?: unknown[]; items?: unknown; anyOf?: unknown[] }, path = ''): string[] {
  if (Array.isArray(value)) return value.flatMap((item, i) => unknownKeys(item, (schema.items ?? {}) as never, `${path}[${i}]`));
  if (value === null || typeof value !== 'object') return [];
  const parts = [schema, ...((schema.allOf ?? []) as (typeof schema)[]), ...((schema.anyOf ?? []) as (typeof schema)[])];
  const known = Object.assign({}, ...parts.map((p) => p.properties ?? {})) as Record<string, typeof schema>;
  if (Object.keys(known).length === 0) return []; // a free map (by_reason)
  return Object.entries(value).flatMap(([key, v]) => (key in known ? unknownKeys(v, known[key], `${path}.${key}`) : [`${path}.${key}`]));
}

describe('dashboard stream messages against their one schema', () => {
  it('a hello and a snapshot the hub sends match src/schema/dashboard-stream.ts, with no field it does not define', () => {
    const policies = { list: () => [], revision: () => 0 };
    const hub = new DashboardHub({
      analytics: new Analytics(),
      metrics: new Metrics({ defaultMetrics: false }),
      policies,
      counters: new MemoryCounterStore({ sweepIntervalMs: 0 }),
      readiness: new Readiness(),
      region: () => ({ name: 'eu-west', global_store: { state: 'up', masters: [{ master: 'master', breaker: 'closed', consecutive_failures: 0, pending_calls: 0 }] } }),
      rlqs: () => ({ streams: 1, buckets: 2, units_held: 3 }),
    });
    hub.tick();
    const stream = hub.subscribe({ subject: 'a', role: 'admin', can_edit: true });
    const snapshot = JSON.parse(JSON.stringify(hub.tick())) as unknown;
    // What the stream carried: the hello (with the first tick's history), then the snapshot.
    const [hello, sent] = String(stream.read()).split('\n\n').filter(Boolean).map((frame) => JSON.parse(frame.split('data: ')[1]) as unknown);
    stream.destroy();
    expect(sent).to.deep.equal(snapshot);
    expect((hello as { history: { at: unknown[] } }).history.at).to.have.length(1);
    expect([...Value.Errors(SnapshotSchema, snapshot)].map((e) => `${e.path}: ${e.message}`)).to.deep.equal([]);
    expect([...Value.Errors(HelloSchema, hello)].map((e) => `${e.path}: ${e.message}`)).to.deep.equal([]);
    expect(unknownKeys(snapshot, SnapshotSchema as never)).to.deep.equal([]);
    expect(unknownKeys(hello, HelloSchema as never)).to.deep.equal([]);
    // The key check does catch a field the schema does not define, at any depth.
    const drifted = { ...(snapshot as object), extra: 1, store: { kind: 'memory', state: 'up', since: 0 } };
    expect(unknownKeys(drifted, SnapshotSchema as never)).to.deep.equal(['.store.since', '.extra']);
  });
});
