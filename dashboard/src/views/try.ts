import { ApiError, api, policyPath } from '../api.js';
import type { View } from '../app-context.js';
import { badge, h, replace } from '../dom.js';
import { ms } from '../format.js';
import type { StoredPolicy } from '@rl/client/admin-client';
import type { Decision } from '@rl/client/types';
import { showError } from './edit-result.js';

const FIELDS = ['org_id', 'tenant_id', 'application', 'service', 'environment', 'signal_type', 'operation', 'endpoint', 'method', 'user_id', 'client_id', 'source_ip', 'region', 'resource'];

const REASONS: Record<string, string> = {
  within_limit: 'The matched policy has room: a request now would be admitted.',
  limit_exceeded: "The matched policy's limit is used up: a request now would be refused (or handled by its action).",
  no_matching_policy: 'No enabled policy in this rollout covers this context: it is not limited at all.',
  counter_store_unavailable: "The counter store did not answer: the policy's failure mode decided.",
};

/** Sends a peek (`quantity: 0`: nothing consumed) and explains which policy matched and why. */
export const tryView: View = (root) => {
  const inputs = FIELDS.map((f) => h('input', { name: f, 'data-field': f, placeholder: '(absent)' }));
  const tags = h('textarea', { rows: 3, name: 'tags', 'data-field': 'tags', placeholder: 'key=value, one per line' });
  const result = h('div', { 'data-testid': 'try-result' });
  const form = h(
    'form',
    { class: 'grid', 'data-testid': 'try-form' },
    ...FIELDS.flatMap((f, i) => [h('label', {}, f), inputs[i]]),
    h('label', {}, 'tags'),
    tags,
    h('span'),
    h('div', {}, h('button', { type: 'submit', class: 'primary', 'data-testid': 'try-submit' }, 'Peek (consumes nothing)')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const body: Record<string, unknown> = { quantity: 0 };
    for (const input of inputs) if (input.value.trim() !== '') body[input.name] = input.value.trim();
    const tagMap: Record<string, string> = {};
    for (const line of tags.value.split('\n')) {
      const at = line.indexOf('=');
      if (at > 0) tagMap[line.slice(0, at).trim()] = line.slice(at + 1).trim();
    }
    body.tags = tagMap;
    void decide(body, result, form);
  });
  replace(root, h('h2', {}, 'Try a decision'), h('div', { class: 'split' }, h('div', { class: 'panel' }, form), h('div', {}, result)));
};

async function decide(body: Record<string, unknown>, box: HTMLElement, form: HTMLElement): Promise<void> {
  let decision: Decision;
  try {
    decision = await api<Decision>('POST', '/rl/v1/check', { body });
  } catch (error) {
    return showError(box, form, error, () => undefined);
  }
  let policy: StoredPolicy | undefined;
  if (decision.matched_policy_id !== '') {
    try {
      policy = await api<StoredPolicy>('GET', policyPath(decision.matched_policy_id));
    } catch (error) {
      // A caller without read access may peek but not read policies: explain with the decision alone.
      if (!(error instanceof ApiError)) throw error;
    }
  }
  const scope = Object.entries(policy?.scope ?? {});
  replace(
    box,
    h(
      'div',
      { class: 'panel' },
      h('h3', {}, 'Decision ', decision.allowed ? badge('would be allowed', 'ok') : badge('would be limited', 'bad'), decision.shadow_mode ? badge('shadow', 'shadow') : null),
      h('p', { 'data-testid': 'try-why' }, REASONS[decision.reason] ?? decision.reason),
      h(
        'div',
        { class: 'kv' },
        h('div', {}, 'matched policy'),
        h('div', { 'data-testid': 'try-policy' }, decision.matched_policy_id === '' ? '(none)' : h('a', { href: `#/policies/${encodeURIComponent(decision.matched_policy_id)}` }, decision.matched_policy_id)),
        h('div', {}, 'reason'),
        h('div', { 'data-testid': 'try-reason' }, decision.reason),
        h('div', {}, 'remaining / limit'),
        h('div', {}, `${decision.remaining} / ${decision.limit}`),
        h('div', {}, 'window'),
        h('div', {}, decision.window ? ms(decision.window) : '—'),
        h('div', {}, 'resets in'),
        h('div', {}, ms(decision.reset_after)),
        h('div', {}, 'retry after'),
        h('div', {}, decision.allowed ? '—' : ms(decision.retry_after)),
        h('div', {}, 'action'),
        h('div', {}, decision.action),
      ),
      policy
        ? h(
            'div',
            {},
            h('h3', {}, `Why ${policy.policy_id} matched`),
            h('p', { class: 'muted' }, `Priority ${policy.priority}; the highest-priority enabled policy whose scope covers the context decides. When its limit is reached: ${policy.action}.`),
            h(
              'table',
              {},
              h('thead', {}, h('tr', {}, h('th', {}, 'scope field'), h('th', {}, 'policy wants'), h('th', {}, 'context has'))),
              h(
                'tbody',
                {},
                scope.length === 0 ? h('tr', {}, h('td', { colspan: 3, class: 'muted' }, 'Empty scope: the policy covers every context.')) : null,
                scope.map(([field, wanted]) =>
                  h(
                    'tr',
                    {},
                    h('td', {}, field),
                    h('td', {}, typeof wanted === 'string' ? (wanted === '*' ? '* (any value; one counter each)' : wanted) : JSON.stringify(wanted)),
                    h('td', {}, field === 'tags' ? JSON.stringify(body.tags) : String(body[field] ?? '(absent)')),
                  ),
                ),
              ),
            ),
          )
        : null,
    ),
  );
}
