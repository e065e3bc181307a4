import { ApiError, api } from '../api.js';
import { badge, h } from '../dom.js';
import type { ExplainCandidate, Explanation } from '@rl/client/admin-client';

/**
 * The Try view's "which policy decides" panel: the server's own explanation (POST /rl/v1/explain, the
 * matcher's report of the very match the decision made), one table per layer, candidates in winner order.
 */

/** How a request is decided, in one sentence per rule (docs/matching.md says it at length). */
export const MATCHING_RULE =
  'Each layer picks its own winner among the enabled policies that cover the context: the most specific scope first ' +
  '(an exact field or tag 2 points, a * 1 point, a match_expr 1 point), then the highest priority, then the smallest policy_id. ' +
  'The request is allowed only when every layer\'s winner admits it.';

const WHY_NOT: Record<string, string> = {
  match_expr: 'its match_expr is false',
  rollout: 'outside its rollout share',
  disabled: 'disabled',
  not_valid_now: 'outside valid_from / valid_to',
  algorithm: 'another kind of decision (concurrency or not)',
};

/** The explanation of `body`, or undefined for a caller that may not read policies. */
export async function explainContext(body: Record<string, unknown>): Promise<Explanation | undefined> {
  try {
    return await api<Explanation>('POST', '/rl/v1/explain', { body });
  } catch (error) {
    if (error instanceof ApiError) return undefined;
    throw error;
  }
}

export function explainPanel(explanation: Explanation): HTMLElement {
  return h(
    'div',
    { 'data-testid': 'try-explain' },
    h('h3', {}, 'Which policy decides, per layer'),
    h('p', { class: 'muted', 'data-testid': 'try-rule' }, MATCHING_RULE),
    explanation.layers.length === 0 ? h('p', { class: 'muted' }, 'No policy you may read.') : null,
    explanation.layers.map((layer) =>
      h(
        'div',
        { 'data-testid': `explain-layer-${layer.layer}` },
        h('h4', {}, `Layer ${layer.layer}: `, layer.winner === null ? h('span', { class: 'muted' }, 'no enforcing policy covers the context') : h('strong', { 'data-testid': 'explain-winner' }, layer.winner)),
        h(
          'table',
          {},
          h('thead', {}, h('tr', {}, ['policy', 'covers', 'specificity', 'priority', ''].map((t) => h('th', {}, t)))),
          h('tbody', {}, layer.candidates.map((c) => candidateRow(layer.layer, c))),
        ),
      ),
    ),
  );
}

function candidateRow(layer: string, c: ExplainCandidate): HTMLElement {
  return h(
    'tr',
    { 'data-testid': `explain-${layer}-${c.policy_id}`, 'data-covers': String(c.covers), 'data-wins': String(c.wins) },
    h('td', {}, h('a', { href: `#/policies/${encodeURIComponent(c.policy_id)}` }, c.policy_id)),
    h('td', {}, c.covers ? badge('covers', 'ok') : h('span', { class: 'muted' }, whyNot(c.why_not))),
    h('td', { class: 'num' }, c.specificity),
    h('td', { class: 'num' }, c.priority),
    h('td', {}, c.wins ? badge('wins', 'ok') : null),
  );
}

function whyNot(reason: string | undefined): string {
  if (reason === undefined) return 'does not cover';
  if (reason.startsWith('scope:')) return `scope: ${reason.slice('scope:'.length)} does not match`;
  return WHY_NOT[reason] ?? reason;
}
