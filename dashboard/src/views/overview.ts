import type { View } from '../app-context.js';
import { RateChart, Sparkline } from '../charts.js';
import { badge, h, replace } from '../dom.js';
import { rate } from '../format.js';
import { RANGES, type RangeSeconds } from '../series.js';
import type { RegionStatus, RlqsPanel, Snapshot } from '../types.js';

const STORE_LABEL = { up: 'up', down: 'down', circuit_open: 'circuit open' } as const;

/** The chart range chosen last in this tab: it stays when the view is left and entered again. */
let chosenRange: RangeSeconds = 300;

/** Decisions per second (total and per policy, with sparklines), counter store state, policies failing open, lease totals, Envoy RLQS. */
export const overviewView: View = (root, app) => {
  const value = (testid: string) => h('div', { class: 'value', 'data-testid': testid }, '–');
  const card = (label: string, content: HTMLElement, kind = '') => h('div', { class: `card ${kind}` }, h('div', { class: 'label' }, label), content);
  const allowed = value('rate-allowed');
  const denied = value('rate-denied');
  const shadow = value('rate-shadow');
  const store = h('div', { class: 'value', 'data-testid': 'store-state' });
  const failingOpen = h('div', { 'data-testid': 'failing-open' });
  const leaseRefills = value('lease-refills');
  const leaseReturned = value('lease-returned');
  const leaseLapsed = value('lease-lapsed');
  const leaseWaits = value('lease-waits');
  const lapsedByReason = h('div', { class: 'muted', 'data-testid': 'lease-lapsed-by-reason' });
  const regionPanel = h('div', { class: 'panel', 'data-testid': 'region', hidden: true });
  const rlqsPanel = h('div', { class: 'panel', 'data-testid': 'rlqs', hidden: true });
  const chartBox = h('div', { class: 'chart', 'data-testid': 'rate-chart' });
  const rows = h('tbody');
  const since = h('span', { class: 'muted', 'data-testid': 'totals' });
  const rangeLabel = () => RANGES.find((r) => r.seconds === chosenRange)!.label;
  const sparkHeading = h('th', { 'data-testid': 'spark-heading' }, `last ${rangeLabel()}`);
  const rangeSelect = h(
    'select',
    {
      'data-testid': 'chart-range',
      'aria-label': 'chart range',
      onchange: () => {
        chosenRange = Number(rangeSelect.value) as RangeSeconds;
        sparkHeading.textContent = `last ${rangeLabel()}`;
        if (app.stream.latest) render(app.stream.latest);
      },
    },
    RANGES.map((r) => h('option', { value: String(r.seconds), selected: r.seconds === chosenRange }, r.label)),
  );

  replace(
    root,
    h('h2', {}, 'Overview'),
    h(
      'div',
      { class: 'cards' },
      card('allowed / s', allowed, 'allowed'),
      card('denied / s', denied, 'denied'),
      card('shadow / s', shadow, 'shadow'),
      card('counter store', store),
    ),
    h('div', { class: 'panel' }, h('div', { class: 'row spread' }, h('h3', {}, 'Decisions per second'), h('label', {}, 'range ', rangeSelect)), chartBox, since),
    h(
      'p',
      { class: 'muted' },
      'Allowed: decisions answered allowed. Denied: every other. Shadow: decisions a shadow policy would have limited, whatever was answered (they are also in allowed or denied).',
    ),
    regionPanel,
    h('div', { class: 'panel' }, h('h3', {}, 'Failing open right now'), failingOpen),
    h(
      'div',
      { class: 'panel' },
      h('h3', {}, 'Capacity leases (this server, since it started)'),
      h('div', { class: 'cards' }, card('refills', leaseRefills), card('units returned', leaseReturned), card('units lapsed', leaseLapsed), card('decisions that waited', leaseWaits)),
      lapsedByReason,
      h('p', { class: 'muted' }, 'Returned: unspent units given back (drain, policy change, idle). Lapsed: units neither spent nor given back, by reason. Waited: decisions that waited for a refill.'),
    ),
    rlqsPanel,
    h(
      'div',
      { class: 'panel' },
      h('h3', {}, 'Per policy (busiest first)'),
      h(
        'table',
        { 'data-testid': 'policy-rates' },
        h('thead', {}, h('tr', {}, h('th', {}, 'policy'), h('th', {}, 'allowed/s'), h('th', {}, 'denied/s'), h('th', {}, 'shadow/s'), sparkHeading)),
        rows,
      ),
    ),
  );

  const chart = new RateChart(chartBox, Math.max(320, chartBox.clientWidth || 900));
  const sparks = new Map<string, { row: HTMLTableRowElement; cells: HTMLElement[]; spark: Sparkline }>();

  const render = (snapshot: Snapshot) => {
    allowed.textContent = rate(snapshot.rates.allowed);
    denied.textContent = rate(snapshot.rates.denied);
    shadow.textContent = rate(snapshot.rates.shadow);
    leaseRefills.textContent = String(snapshot.leases.refills);
    leaseReturned.textContent = String(snapshot.leases.units_returned);
    leaseLapsed.textContent = String(snapshot.leases.units_lapsed);
    leaseWaits.textContent = String(snapshot.leases.waits);
    const reasons = Object.entries(snapshot.leases.units_lapsed_by_reason).filter(([, n]) => n > 0);
    lapsedByReason.textContent = reasons.length === 0 ? '' : `Lapsed by reason: ${reasons.map(([reason, n]) => `${reason.replace(/_/g, ' ')} ${n}`).join(', ')}`;
    renderRegion(snapshot.region);
    renderRlqs(snapshot.rlqs);
    const s = snapshot.store;
    replace(store, badge(`${s.kind} · ${STORE_LABEL[s.state]}`, s.state === 'up' ? 'ok' : 'bad'));
    replace(
      failingOpen,
      snapshot.failing_open.length === 0
        ? h('span', { class: 'muted' }, 'None: the counter store is answering.')
        : h(
            'div',
            {},
            h('p', {}, `The counter store is ${STORE_LABEL[s.state]}: these policies admit requests unchecked (${rate(snapshot.fail_open_rate)} fail-open decisions/s).`),
            h('div', { class: 'row' }, snapshot.failing_open.map((id) => badge(id, 'warn'))),
          ),
    );
    const to = app.stream.series.newest ?? snapshot.at;
    chart.update(app.stream.series.totalsIn(to - chosenRange * 1000, to), chosenRange, to);
    const t = snapshot.totals;
    const total = (testid: string, n: number) => h('span', { 'data-testid': testid }, String(n));
    replace(
      since,
      `Since ${new Date(t.since).toLocaleString()}: `,
      total('total-decisions', t.total),
      ' decisions, ',
      total('total-allowed', t.allowed),
      ' allowed, ',
      total('total-denied', t.denied),
      ' denied; ',
      total('total-shadow', t.shadow),
      ' of them limited in shadow.',
    );
    renderPolicies(snapshot);
  };

  const renderPolicies = (snapshot: Snapshot) => {
    const seen = new Set<string>();
    for (const p of snapshot.policies) {
      seen.add(p.policy_id);
      let entry = sparks.get(p.policy_id);
      if (!entry) {
        const cells = [h('td', { class: 'num' }), h('td', { class: 'num' }), h('td', { class: 'num' })];
        const sparkCell = h('td', {}, h('div', { class: 'spark' }));
        const row = h(
          'tr',
          { class: 'clickable', 'data-testid': `policy-rate-${p.policy_id}`, onclick: () => app.navigate(`#/policies/${encodeURIComponent(p.policy_id)}`) },
          h('td', {}, p.policy_id),
          ...cells,
          sparkCell,
        );
        entry = { row, cells, spark: new Sparkline(sparkCell.firstElementChild as HTMLElement) };
        sparks.set(p.policy_id, entry);
      }
      rows.append(entry.row); // in snapshot order: busiest first
      entry.cells[0].textContent = rate(p.allowed);
      entry.cells[1].textContent = rate(p.denied);
      entry.cells[2].textContent = rate(p.shadow);
      const to = app.stream.series.newest ?? snapshot.at;
      entry.spark.update(app.stream.series.policyIn(p.policy_id, to - chosenRange * 1000, to), chosenRange, to);
    }
    for (const [id, entry] of sparks) {
      if (seen.has(id)) continue;
      entry.spark.destroy();
      entry.row.remove();
      sparks.delete(id);
    }
    if (snapshot.policies.length === 0 && rows.childElementCount === 0) {
      rows.append(h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No decisions yet.')));
    } else {
      for (const row of [...rows.children]) if (!row.hasAttribute('data-testid')) row.remove();
    }
  };

  /** Region mode (RL_REGION): the region, the global store's state and its masters' breakers; hidden otherwise. */
  const renderRegion = (region: RegionStatus | null) => {
    regionPanel.hidden = region === null;
    if (region === null) return;
    const g = region.global_store;
    replace(
      regionPanel,
      h('h3', {}, 'Region'),
      h(
        'div',
        { class: 'cards' },
        card('region', h('div', { class: 'value', 'data-testid': 'region-name' }, region.name)),
        card('global store', h('div', { class: 'value', 'data-testid': 'global-store-state' }, badge(STORE_LABEL[g.state], g.state === 'up' ? 'ok' : 'bad'))),
      ),
      h(
        'p',
        { class: 'muted', 'data-testid': 'global-store-masters' },
        g.masters.length === 0 ? 'No global store call made yet.' : g.masters.map((m) => `${m.master}: breaker ${m.breaker.replace('_', ' ')}, ${m.pending_calls} calls pending`).join('; '),
      ),
      ...(region.shares ?? []).map(shareTable),
    );
  };

  /** Envoy's rate limit quota service (docs/envoy.md, RLQS): open streams, their buckets, units in Envoys' hands, assignments sent; hidden where it is not served. */
  const renderRlqs = (rlqs: RlqsPanel | null) => {
    rlqsPanel.hidden = rlqs === null;
    if (rlqs === null) return;
    const figure = (testid: string, n: number) => h('div', { class: 'value', 'data-testid': testid }, String(n));
    const a = rlqs.assignments;
    replace(
      rlqsPanel,
      h('h3', {}, 'Envoy RLQS (this server)'),
      h(
        'div',
        { class: 'cards' },
        card('streams', figure('rlqs-streams', rlqs.streams)),
        card('buckets', figure('rlqs-buckets', rlqs.buckets)),
        card('units held', figure('rlqs-units-held', rlqs.units_held)),
      ),
      h(
        'div',
        { class: 'cards' },
        card('token buckets sent', figure('rlqs-token-bucket', a.token_bucket)),
        card('DENY_ALL sent', figure('rlqs-deny-all', a.deny_all)),
        card('ALLOW_ALL sent', figure('rlqs-allow-all', a.allow_all)),
      ),
      h('p', { class: 'muted' }, 'Streams: Envoys connected now, one each. Units held: taken from the counters for Envoys and not yet reported spent. Assignments: sent since start-up, by strategy.'),
    );
  };

  /** A global budget with budget_shares: each region's units of the window (taken / guaranteed) and the common share. */
  const shareTable = (use: NonNullable<RegionStatus['shares']>[number]) =>
    h(
      'table',
      { 'data-testid': `region-shares-${use.policy_id}` },
      h('caption', {}, `${use.policy_id}: shares of the window (${Math.ceil(use.window_left_ms / 1000)} s left)`),
      h('tr', {}, h('th', {}, 'region'), h('th', {}, 'taken'), h('th', {}, 'guaranteed')),
      ...use.regions.map((r) => h('tr', {}, h('td', {}, r.region), h('td', {}, String(r.taken)), h('td', {}, String(r.guaranteed)))),
      h('tr', {}, h('td', {}, 'common (*)'), h('td', {}, String(use.common.taken)), h('td', {}, String(use.common.size))),
    );

  if (app.stream.latest) render(app.stream.latest);
  const unsubscribe = app.stream.subscribe(render);
  return () => {
    unsubscribe();
    chart.destroy();
    for (const entry of sparks.values()) entry.spark.destroy();
  };
};
