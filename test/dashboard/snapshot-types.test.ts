/**
 * The dashboard's stream types (dashboard/src/types.ts, written by hand: the page's bundle must not
 * import the server) against the server's (src/observability/dashboard-hub.ts). The type-level checks
 * make a drift fail `npm run typecheck`; the test holds the field lists of a real snapshot to the page's.
 */
import { expect } from 'chai';
import type { Hello as PageHello, OutcomeRates as PageOutcomeRates, Snapshot as PageSnapshot } from '../../dashboard/src/types.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { Readiness } from '../../src/http/readiness.js';
import { Analytics } from '../../src/observability/analytics.js';
import { DashboardHub, type DashboardHello, type DashboardSnapshot, type OutcomeRates } from '../../src/observability/dashboard-hub.js';
import { Metrics } from '../../src/observability/metrics.js';

/** `true` when A and B are each assignable to the other (the brackets stop unions distributing). */
type Mutual<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** Compiles only when every check is `true`. */
const holds = <T extends true[]>(...checks: T): T => checks;

// Mutual assignability alone misses an optional field on one side, so the key sets are compared too.
holds<
  [
    Mutual<PageSnapshot, DashboardSnapshot>,
    Mutual<keyof PageSnapshot, keyof DashboardSnapshot>,
    Mutual<PageOutcomeRates, OutcomeRates>,
    Mutual<PageHello, DashboardHello>,
    Mutual<keyof PageHello, keyof DashboardHello>,
  ]
>(true, true, true, true, true);

// The checks do catch a drift: a snapshot without `readiness` does not pass.
// @ts-expect-error a field missing on one side
holds<[Mutual<Omit<PageSnapshot, 'readiness'>, DashboardSnapshot>]>(true);

/** Field names of a runtime list typed by the page's type: `satisfies` makes it name every field, and no other. */
const pageSnapshotFields = Object.keys({
  at: 0, totals: 0, rates: 0, policies: 0, store: 0, fail_open_rate: 0, failing_open: 0, denied_identities: 0,
  policies_revision: 0, readiness: 0, leases: 0,
} satisfies Record<keyof PageSnapshot, 0>);
const pageRateFields = Object.keys({ allowed: 0, denied: 0, shadow: 0 } satisfies Record<keyof PageOutcomeRates, 0>);
const pageStoreFields = Object.keys({ kind: 0, state: 0 } satisfies Record<keyof PageSnapshot['store'], 0>);
const pageLeaseFields = Object.keys({ refills: 0, units_returned: 0, units_lapsed: 0 } satisfies Record<keyof PageSnapshot['leases'], 0>);

describe('dashboard stream types against the server\'s', () => {
  it('a snapshot the hub builds has exactly the fields the page reads', () => {
    const policies = { list: () => [], revision: () => 0 };
    const hub = new DashboardHub({ analytics: new Analytics(), metrics: new Metrics({ defaultMetrics: false }), policies, counters: new MemoryCounterStore({ sweepIntervalMs: 0 }), readiness: new Readiness() });
    const snapshot = JSON.parse(JSON.stringify(hub.tick())) as Record<string, Record<string, unknown>>;
    expect(Object.keys(snapshot).sort()).to.deep.equal([...pageSnapshotFields].sort());
    expect(Object.keys(snapshot.rates).sort()).to.deep.equal([...pageRateFields].sort());
    expect(Object.keys(snapshot.totals).sort()).to.deep.equal([...pageRateFields, 'total', 'since'].sort());
    expect(Object.keys(snapshot.store).sort()).to.deep.equal([...pageStoreFields].sort());
    expect(Object.keys(snapshot.leases).sort()).to.deep.equal([...pageLeaseFields].sort());
  });
});
