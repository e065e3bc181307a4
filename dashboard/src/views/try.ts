import { ApiError, api, policyPath } from '../api.js';
import type { View } from '../app-context.js';
import { badge, h, replace } from '../dom.js';
import { ms } from '../format.js';
import type { StoredPolicy } from '@rl/client/admin-client';
import type { Decision } from '@rl/client/types';
import { contextForm } from '../context-form.js';
import { showError } from './edit-result.js';
import { explainContext, explainPanel } from './explain-panel.js';

const REASONS: Record<string, string> = {
  within_limit: 'The matched policy has room: a request now would be admitted.',
  limit_exceeded: "The matched policy's limit is used up: a request now would be refused (or handled by its action).",
  no_matching_policy: 'No enabled policy in this rollout covers this context: it is not limited at all.',
  counter_store_unavailable: "The counter store did not answer: the policy's failure mode decided.",
};

/**
 * Sends a decision for any RequestContext (every field of its schema, context-form.ts) and explains it:
 * the policy that decided and why it matched, the shadow policy's verdict, the metadata, and every
 * layer's candidates as the server's explain call reports them. A blank
 * quantity is a peek (`quantity: 0`: nothing consumed); any other quantity is counted.
 */
export const tryView: View = (root) => {
  const context = contextForm();
  const result = h('div', { 'data-testid': 'try-result' });
  const submit = h('button', { type: 'submit', class: 'primary', 'data-testid': 'try-submit' }, '');
  const form = h('form', { class: 'grid', 'data-testid': 'try-form' }, ...context.rows, h('span'), h('div', {}, submit));
  const quantity = form.querySelector<HTMLInputElement>('input[name="quantity"]');
  if (quantity) quantity.placeholder = '0: a peek, nothing consumed';
  const label = () => {
    const quantity = Number(context.read().quantity ?? 0);
    submit.textContent = quantity > 0 ? `Check (consumes ${quantity})` : 'Peek (consumes nothing)';
  };
  label();
  context.onInput(label);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void decide({ quantity: 0, ...context.read() }, result, form);
  });
  replace(root, h('h2', {}, 'Try a decision'), h('div', { class: 'split' }, h('div', { class: 'panel' }, form), h('div', {}, result)));
};

async function decide(body: Record<string, unknown>, box: HTMLElement, form: HTMLElement): Promise<void> {
  let decision: Decision;
  // Explained before the check counts anything (explaining counts nothing itself).
  const explanation = await explainContext(body);
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
  const counted = Number(body.quantity) > 0;
  const tags = (body.tags ?? {}) as Record<string, string>;
  replace(
    box,
    h(
      'div',
      { class: 'panel' },
      h(
        'h3',
        {},
        'Decision ',
        decision.allowed ? badge(counted ? 'allowed' : 'would be allowed', 'ok') : badge(counted ? 'limited' : 'would be limited', 'bad'),
        decision.shadow_mode ? badge('shadow', 'shadow') : null,
      ),
      h('p', { 'data-testid': 'try-why' }, REASONS[decision.reason] ?? decision.reason),
      h(
        'div',
        { class: 'kv' },
        h('div', {}, 'matched policy'),
        h('div', { 'data-testid': 'try-policy' }, decision.matched_policy_id === '' ? '(none)' : policyLink(decision.matched_policy_id)),
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
        h('div', {}, 'shadow policy'),
        h('div', { 'data-testid': 'try-shadow' }, shadowVerdict(decision)),
      ),
      h('h3', {}, 'Metadata'),
      metadataTable(decision.metadata),
      policy ? whyMatched(policy, body, tags) : null,
      explanation ? explainPanel(explanation) : null,
    ),
  );
}

function policyLink(id: string): HTMLElement {
  return h('a', { href: `#/policies/${encodeURIComponent(id)}` }, id);
}

/**
 * What the shadow policy (evaluated beside the deciding one, never changing its answer) would have
 * done: from `metadata.shadow_policy_id` / `shadow_action`, or, when a shadow policy answered alone
 * (`shadow_mode`), from the decision itself (`shadow_only`: it would have limited).
 */
function shadowVerdict(decision: Decision): (HTMLElement | string)[] {
  const { shadow_policy_id: id, shadow_action: action } = decision.metadata;
  if (id !== undefined) return [policyLink(id), ' would have ', action === 'allow' ? badge('allowed', 'ok') : badge(`limited (${action})`, 'bad')];
  if (decision.shadow_mode) {
    const limited = decision.action === 'shadow_only';
    return [policyLink(decision.matched_policy_id), ' (answered alone) would have ', limited ? badge('limited', 'bad') : badge('allowed', 'ok')];
  }
  return ['none matched'];
}

function metadataTable(metadata: Record<string, string>): HTMLElement {
  const entries = Object.entries(metadata).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (entries.length === 0) return h('p', { class: 'muted', 'data-testid': 'try-metadata' }, 'None.');
  return h(
    'table',
    { 'data-testid': 'try-metadata' },
    h('tbody', {}, entries.map(([key, value]) => h('tr', { 'data-key': key }, h('td', {}, h('code', {}, key)), h('td', {}, value)))),
  );
}

/** The deciding policy's scope beside the context's values, field by field (each tag on its own row). */
function whyMatched(policy: StoredPolicy, body: Record<string, unknown>, tags: Record<string, string>): HTMLElement {
  const rows: [string, string, string][] = [];
  for (const [field, wanted] of Object.entries(policy.scope)) {
    if (field === 'tags') {
      for (const [key, value] of Object.entries(wanted as Record<string, string>)) rows.push([`tags.${key}`, value, tags[key] ?? '(absent)']);
    } else {
      rows.push([field, String(wanted), String(body[field] ?? '(absent)')]);
    }
  }
  return h(
    'div',
    {},
    h('h3', {}, `Why ${policy.policy_id} matched`),
    h(
      'p',
      { class: 'muted', 'data-testid': 'try-why-matched' },
      `It covers the context, and no other policy of its layer that covers it ranks before it: the most specific scope first, then the highest priority (its own: ${policy.priority}), then the smallest policy_id. When its limit is reached: ${policy.action}.`,
    ),
    h(
      'table',
      {},
      h('thead', {}, h('tr', {}, h('th', {}, 'scope field'), h('th', {}, 'policy wants'), h('th', {}, 'context has'))),
      h(
        'tbody',
        {},
        rows.length === 0 ? h('tr', {}, h('td', { colspan: 3, class: 'muted' }, 'Empty scope: the policy covers every context.')) : null,
        rows.map(([field, wanted, has]) => h('tr', {}, h('td', {}, field), h('td', {}, wanted === '*' ? '* (any value; one counter each)' : wanted), h('td', {}, has))),
      ),
    ),
  );
}
