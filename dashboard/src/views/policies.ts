import { api } from '../api.js';
import { onPolicyChange, type View } from '../app-context.js';
import { badge, h, replace } from '../dom.js';
import { budgetOf, leaseSummary, limitSummary } from '../format.js';
import type { StoredPolicy } from '@rl/client/admin-client';
import { scopeChips } from '../scope.js';

/** Every policy with what it does; reloaded whenever the policy set changes. */
export const policiesView: View = (root, app) => {
  const body = h('tbody');
  const status = h('div');
  replace(
    root,
    h('h2', {}, 'Policies'),
    status,
    h(
      'div',
      { class: 'panel' },
      h(
        'table',
        { 'data-testid': 'policy-list' },
        h(
          'thead',
          {},
          h('tr', {}, ['policy', 'layer', 'scope', 'priority', 'algorithm', 'limit / window', 'lease · budget', 'action', 'mode', 'rollout', 'enabled', 'version'].map((t) => h('th', {}, t))),
        ),
        body,
      ),
    ),
  );

  const load = async () => {
    try {
      const policies = await api<StoredPolicy[]>('GET', '/rl/v1/policies');
      replace(status);
      replace(
        body,
        policies.length === 0 ? h('tr', {}, h('td', { colspan: 12, class: 'muted' }, 'No policies.')) : null,
        policies.map((p) =>
          h(
            'tr',
            { class: 'clickable', 'data-testid': `policy-row-${p.policy_id}`, onclick: () => app.navigate(`#/policies/${encodeURIComponent(p.policy_id)}`) },
            h('td', {}, h('strong', {}, p.policy_id), h('div', { class: 'muted' }, p.name)),
            h('td', { 'data-testid': `policy-layer-${p.policy_id}` }, layerOf(p)),
            h('td', { 'data-testid': `policy-scope-${p.policy_id}` }, scopeChips(p.scope)),
            h('td', { class: 'num', 'data-testid': `policy-priority-${p.policy_id}` }, p.priority),
            h('td', {}, p.algorithm.type),
            h('td', {}, limitSummary(p)),
            h('td', { 'data-testid': `policy-lease-${p.policy_id}` }, leaseBudget(p)),
            h('td', {}, p.action),
            h('td', {}, badge(p.enforcement_mode, p.enforcement_mode === 'shadow' ? 'shadow' : 'ok')),
            h('td', { class: 'num' }, `${p.rollout_percent}%`),
            h('td', {}, p.enabled ? badge('yes', 'ok') : badge('no', 'bad')),
            h('td', { class: 'num' }, `v${p.version}`),
          ),
        ),
      );
    } catch (error) {
      replace(status, h('div', { class: 'error' }, String((error as Error).message)));
    }
  };
  return onPolicyChange(app, () => void load());
};

/** The layer a policy competes in (absent: `default`). */
function layerOf(p: StoredPolicy): string {
  return typeof p.layer === 'string' ? p.layer : 'default';
}

/** A leased policy and a global budget are marked; a policy with neither (the usual case) shows a dash. */
function leaseBudget(p: StoredPolicy): (HTMLElement | string)[] {
  const lease = leaseSummary(p);
  const budget = budgetOf(p);
  const marks = [lease === undefined ? null : badge(`lease ${lease}`, 'ok'), budget === 'regional' ? null : badge(`${budget} budget`, 'warn')].filter((m) => m !== null);
  return marks.length === 0 ? ['–'] : marks;
}
