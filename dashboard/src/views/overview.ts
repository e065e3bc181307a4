import type { View } from '../app-context.js';
import { RateChart, Sparkline } from '../charts.js';
import { badge, h, replace } from '../dom.js';
import { rate } from '../format.js';
import type { Snapshot } from '../types.js';

const STORE_LABEL = { up: 'up', down: 'down', circuit_open: 'circuit open' } as const;

/** Decisions per second (total and per policy, with sparklines), counter store state, policies failing open, lease totals. */
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
  const chartBox = h('div', { class: 'chart' });
  const rows = h('tbody');
  const since = h('span', { class: 'muted' });

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
    h('div', { class: 'panel' }, h('h3', {}, 'Decisions per second'), chartBox, since),
    h('div', { class: 'panel' }, h('h3', {}, 'Failing open right now'), failingOpen),
    h(
      'div',
      { class: 'panel' },
      h('h3', {}, 'Capacity leases (this server, since it started)'),
      h('div', { class: 'cards' }, card('refills', leaseRefills), card('units returned', leaseReturned), card('units lapsed', leaseLapsed)),
      h('p', { class: 'muted' }, 'Returned: unspent units given back (drain, policy change, idle). Lapsed: units that ended with their window unspent, or were lost with an unreachable parent.'),
    ),
    h(
      'div',
      { class: 'panel' },
      h('h3', {}, 'Per policy (busiest first)'),
      h(
        'table',
        { 'data-testid': 'policy-rates' },
        h('thead', {}, h('tr', {}, h('th', {}, 'policy'), h('th', {}, 'allowed/s'), h('th', {}, 'denied/s'), h('th', {}, 'shadow/s'), h('th', {}, 'last minutes'))),
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
    chart.update(app.stream.snapshots);
    since.textContent = `Totals since ${new Date(snapshot.totals.since).toLocaleString()}: ${snapshot.totals.total} decisions (${snapshot.totals.denied} denied).`;
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
      const points = app.stream.snapshots.map((snap) => ({
        at: snap.at,
        rates: snap.policies.find((x) => x.policy_id === p.policy_id) ?? { allowed: 0, denied: 0, shadow: 0 },
      }));
      entry.spark.update(points);
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

  if (app.stream.latest) render(app.stream.latest);
  const unsubscribe = app.stream.subscribe(render);
  return () => {
    unsubscribe();
    chart.destroy();
    for (const entry of sparks.values()) entry.spark.destroy();
  };
};
