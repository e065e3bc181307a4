import { api } from '../api.js';
import type { View } from '../app-context.js';
import { h, replace } from '../dom.js';
import type { AnalyticsSummaryBody } from '@rl/client/admin-client';

const REFRESH_TICKS = 5;

/**
 * Who is limited: the most denied identities (live, from the stream), the policies denying most, and the
 * heaviest tags (GET /rl/v1/analytics/summary, refreshed every few ticks); the first two filter by policy.
 */
export const limitedView: View = (root, app) => {
  const filter = h('select', { 'data-testid': 'limited-filter' }, h('option', { value: '' }, 'all policies'));
  const identities = h('tbody');
  const policies = h('tbody');
  const tags = h('tbody');
  const note = h('p', { class: 'muted' });
  replace(
    root,
    h('h2', {}, 'Who is limited'),
    h('div', { class: 'row' }, h('label', {}, 'Policy'), filter),
    note,
    h(
      'div',
      { class: 'panel' },
      h('h3', {}, 'Most denied identities'),
      h('p', { class: 'muted' }, "An identity is what a policy counts separately: the request's values of its * scope fields."),
      h('table', { 'data-testid': 'limited-identities' }, h('thead', {}, h('tr', {}, ['policy', 'identity', 'denied'].map((t) => h('th', {}, t)))), identities),
    ),
    h(
      'div',
      { class: 'split' },
      h(
        'div',
        { class: 'panel' },
        h('h3', {}, 'Denied decisions by policy'),
        h('table', { 'data-testid': 'limited-policies' }, h('thead', {}, h('tr', {}, ['policy', 'denied', 'shadow', 'total', 'denied %'].map((t) => h('th', {}, t)))), policies),
      ),
      h(
        'div',
        { class: 'panel' },
        h('h3', {}, 'Top tags'),
        h('p', { class: 'muted' }, 'Heavy hitters among the tags of all decisions (analytics counts tags across policies).'),
        h('table', { 'data-testid': 'limited-tags' }, h('thead', {}, h('tr', {}, ['tag', 'value', 'decisions'].map((t) => h('th', {}, t)))), tags),
      ),
    ),
  );

  let summary: AnalyticsSummaryBody | undefined;
  const render = () => {
    if (!summary) return;
    const chosen = filter.value;
    const known = new Set([...filter.options].map((o) => o.value));
    for (const p of summary.by_policy) if (!known.has(p.policy_id)) filter.append(h('option', { value: p.policy_id }, p.policy_id));
    const rows = summary.by_policy.filter((p) => chosen === '' || p.policy_id === chosen).sort((a, b) => b.denied - a.denied || b.total - a.total);
    note.textContent = `Since ${new Date(summary.since).toLocaleString()}: ${summary.denied} of ${summary.total} decisions denied.`;
    replace(
      policies,
      rows.length === 0 ? h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No decisions yet.')) : null,
      rows.map((p) =>
        h(
          'tr',
          { class: 'clickable', 'data-testid': `limited-${p.policy_id}`, onclick: () => app.navigate(`#/policies/${encodeURIComponent(p.policy_id)}`) },
          h('td', {}, p.policy_id),
          h('td', { class: 'num' }, p.denied),
          h('td', { class: 'num' }, p.shadow),
          h('td', { class: 'num' }, p.total),
          h('td', { class: 'num' }, p.total === 0 ? '0%' : `${((100 * p.denied) / p.total).toFixed(1)}%`),
        ),
      ),
    );
    replace(
      tags,
      summary.top_tags.length === 0 ? h('tr', {}, h('td', { colspan: 3, class: 'muted' }, 'No tagged decisions yet.')) : null,
      summary.top_tags.map((t) => h('tr', {}, h('td', {}, t.key), h('td', {}, t.value), h('td', { class: 'num' }, t.count))),
    );
  };
  const renderIdentities = () => {
    const rows = (app.stream.latest?.denied_identities ?? []).filter((d) => filter.value === '' || d.policy_id === filter.value).slice(0, 25);
    replace(
      identities,
      rows.length === 0 ? h('tr', {}, h('td', { colspan: 3, class: 'muted' }, 'Nobody has been denied.')) : null,
      rows.map((d) =>
        h(
          'tr',
          { 'data-testid': 'denied-identity' },
          h('td', {}, d.policy_id),
          h('td', {}, d.identity),
          h('td', { class: 'num', title: d.error > 0 ? `may overstate by up to ${d.error}` : '' }, d.error > 0 ? `≤ ${d.count}` : d.count),
        ),
      ),
    );
  };
  filter.addEventListener('change', () => {
    render();
    renderIdentities();
  });

  const load = async () => {
    try {
      summary = await api<AnalyticsSummaryBody>('GET', '/rl/v1/analytics/summary?top=25');
      render();
    } catch (error) {
      note.textContent = String((error as Error).message);
    }
  };
  void load();
  renderIdentities();
  let ticks = 0;
  return app.stream.subscribe(() => {
    renderIdentities();
    if (++ticks % REFRESH_TICKS === 0) void load();
  });
};
