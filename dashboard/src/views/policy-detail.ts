import { api, policyPath } from '../api.js';
import { onPolicyChange, type AppContext, type View } from '../app-context.js';
import { diffRows } from '../diff.js';
import { badge, h, replace } from '../dom.js';
import { budgetOf, leaseSummary, limitSummary, time } from '../format.js';
import { scopeChips } from '../scope.js';
import { SERVER_SET_FIELDS, auditAction, changeLine, policyChanges } from '../../../src/policy/policy-changes.js';
import type { PolicyAuditEntry, PolicyVersionEntry, StoredPolicy } from '@rl/client/admin-client';
import { confirmChange, showError, showNotice } from './edit-result.js';

const ACTIONS = ['deny', 'delay', 'drop', 'sample', 'downgrade', 'drop_low_priority'];
const FAILURE_MODES = ['fail_open', 'fail_closed'];

interface Loaded {
  policy: StoredPolicy;
  versions: PolicyVersionEntry[];
  audit: PolicyAuditEntry[];
}

/** One policy: what it is, its actions (admins only), version history, a diff of any two versions, the audit trail. */
export const policyDetailView: View = (root, app, [rawId]) => {
  const id = decodeURIComponent(rawId ?? '');
  const header = h('div');
  const result = h('div', { 'data-testid': 'edit-result' });
  const actions = h('div');
  const versions = h('div', { class: 'panel' });
  const diff = h('div', { class: 'panel' });
  const audit = h('div', { class: 'panel' });
  replace(root, h('p', {}, h('a', { href: '#/policies' }, '← all policies')), header, result, actions, versions, diff, audit);

  let current: Loaded | undefined;
  let formDirty = false;
  let diffPick: [number, number] | undefined;
  /** The last load started: an earlier one answering after it must not render an older version over it. */
  let latestLoad = 0;
  let latestOutcome: Promise<boolean> = Promise.resolve(true);
  const saved = async () => {
    formDirty = false;
    return load();
  };

  /**
   * Renders the policy as the server has it now; false when that failed (the error is shown instead). A load
   * overtaken by a later one answers with the later one's outcome: that is what the page ends up showing.
   */
  const load = (): Promise<boolean> => (latestOutcome = loadAs(++latestLoad));
  const loadAs = async (seq: number): Promise<boolean> => {
    try {
      const [policy, versionList, auditList] = await Promise.all([
        api<StoredPolicy>('GET', policyPath(id)),
        api<PolicyVersionEntry[]>('GET', policyPath(id, '/versions')),
        api<PolicyAuditEntry[]>('GET', policyPath(id, '/audit')),
      ]);
      if (seq !== latestLoad) return latestOutcome;
      const changed = current?.policy.version !== policy.version;
      current = { policy, versions: versionList, audit: auditList };
      renderHeader(header, policy);
      if (app.canEdit && !formDirty) {
        replace(actions, editPanel(policy, result, () => (formDirty = true), saved));
      } else if (app.canEdit && changed) {
        // Unsaved edits are kept; saving them will be refused with a 409 that says so.
        showNotice(result, `This policy was changed meanwhile (now version ${policy.version}); your unsaved edits are based on an older version.`);
      }
      renderVersions(versions, current, app, result, saved);
      if (changed) diffPick = undefined;
      renderDiff(diff, current, diffPick, (pick) => {
        diffPick = pick;
        renderDiff(diff, current!, diffPick, () => undefined);
      });
      renderAudit(audit, auditList, versionList);
      return true;
    } catch (error) {
      if (seq !== latestLoad) return latestOutcome;
      showError(result, undefined, error, () => void load());
      return false;
    }
  };
  return onPolicyChange(app, () => void load());
};

function renderHeader(box: HTMLElement, p: StoredPolicy): void {
  replace(
    box,
    h('h2', {}, p.policy_id, ' ', badge(`v${p.version}`, ''), ' ', badge(p.enforcement_mode, p.enforcement_mode === 'shadow' ? 'shadow' : 'ok'), ' ', p.enabled ? null : badge('disabled', 'bad')),
    h(
      'div',
      { class: 'panel kv', 'data-testid': 'policy-summary' },
      ...kv('name', p.name),
      ...kv('description', p.description),
      ...kv('algorithm', p.algorithm.type),
      ...kv('limit', limitSummary(p)),
      ...kv('lease', leaseSummary(p) ?? 'none: every decision asks the counter store', 'policy-lease'),
      ...kv('budget', budgetOf(p), 'policy-budget'),
      ...kv('action', p.action),
      ...kv('failure mode', p.failure_mode),
      ...kv('rollout', `${p.rollout_percent}%`),
      ...kv('priority', String(p.priority)),
      ...kv('scope', scopeChips(p.scope), 'policy-scope'),
      ...kv('updated', time(p.updated_at)),
    ),
  );
}

function kv(label: string, value: string | HTMLElement, testid?: string): HTMLElement[] {
  return [h('div', {}, label), h('div', { 'data-testid': testid }, value)];
}

/** Rollout slider, shadow/enforce toggle, the edit form and the JSON editor; every change sends If-Match. */
function editPanel(p: StoredPolicy, result: HTMLElement, markDirty: () => void, reload: () => Promise<boolean>): HTMLElement {
  const send = async (method: string, path: string, body: unknown, form: HTMLElement | undefined, done: string, contentType?: string) => {
    try {
      const saved = await api<StoredPolicy>(method, path, { body, ifMatch: p.version, contentType });
      await confirmChange(result, reload, `${done}: now version ${saved.version}.`);
    } catch (error) {
      showError(result, form, error, () => void reload());
    }
  };
  const rolloutValue = h('span', { 'data-testid': 'rollout-value' }, `${p.rollout_percent}%`);
  const slider = h('input', {
    type: 'range',
    min: 0,
    max: 100,
    step: 1,
    value: p.rollout_percent,
    'data-testid': 'rollout-slider',
    oninput: () => {
      rolloutValue.textContent = `${slider.value}%`;
      markDirty(); // a live reload must not move the slider back before Apply
    },
  });
  const rollout = h(
    'div',
    { class: 'row' },
    h('strong', {}, 'Rollout'),
    slider,
    rolloutValue,
    h('button', { type: 'button', 'data-testid': 'rollout-apply', onclick: () => void send('POST', policyPath(p.policy_id, '/rollout'), { rollout_percent: Number(slider.value) }, undefined, 'Rollout changed') }, 'Apply'),
  );
  const next = p.enforcement_mode === 'shadow' ? 'enforce' : 'shadow';
  const mode = h(
    'div',
    { class: 'row' },
    h('strong', {}, 'Mode'),
    badge(p.enforcement_mode, p.enforcement_mode === 'shadow' ? 'shadow' : 'ok'),
    h(
      'button',
      {
        type: 'button',
        'data-testid': 'mode-toggle',
        onclick: () => void send('PATCH', policyPath(p.policy_id), { enforcement_mode: next }, undefined, `Switched to ${next}`, 'application/merge-patch+json'),
      },
      next === 'shadow' ? 'Switch to shadow (observe only)' : 'Switch to enforce',
    ),
  );

  const input = (field: string, value: unknown, attrs: Record<string, string> = {}) =>
    h('input', { 'data-field': field, name: field, value: value === undefined ? '' : String(value), oninput: markDirty, ...attrs });
  const select = (field: string, options: string[], value: string) =>
    h('select', { 'data-field': field, name: field, onchange: markDirty }, options.map((o) => h('option', { value: o, selected: o === value }, o)));
  const a = p.algorithm;
  const algorithmFields = (['limit', 'window', 'burst', 'refill_rate', 'leak_rate', 'max_concurrency', 'quota_period', 'calendar', 'timezone'] as const).filter((f) => a[f] !== undefined);
  const form = h(
    'form',
    { class: 'grid', 'data-testid': 'edit-form' },
    h('label', {}, 'name'),
    input('name', p.name),
    h('label', {}, 'description'),
    input('description', p.description),
    h('label', {}, 'priority'),
    input('priority', p.priority, { type: 'number' }),
    ...algorithmFields.flatMap((f) => [h('label', {}, `algorithm.${f}`), input(`algorithm.${f}`, a[f])]),
    h('label', {}, 'action'),
    select('action', ACTIONS, p.action),
    h('label', {}, 'failure_mode'),
    select('failure_mode', FAILURE_MODES, p.failure_mode),
    h('span'),
    h('div', {}, h('button', { type: 'submit', class: 'primary', 'data-testid': 'save' }, 'Save (server validates)')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void send('PATCH', policyPath(p.policy_id), formPatch(form, p), form, 'Saved', 'application/merge-patch+json');
  });

  const json = h('textarea', { rows: 18, 'data-field': 'body', 'data-testid': 'json-editor', oninput: markDirty });
  json.value = JSON.stringify(Object.fromEntries(Object.entries(p).filter(([k]) => !SERVER_SET_FIELDS.includes(k))), null, 2);
  const jsonEditor = h(
    'details',
    {},
    h('summary', {}, 'Edit the whole policy as JSON'),
    json,
    h(
      'div',
      { class: 'row' },
      h(
        'button',
        {
          type: 'button',
          'data-testid': 'json-save',
          onclick: () => {
            let body: unknown;
            try {
              body = JSON.parse(json.value);
            } catch (error) {
              return showError(result, undefined, new Error(`not JSON: ${(error as Error).message}`), () => void reload());
            }
            void send('PUT', policyPath(p.policy_id), body, jsonEditor, 'Saved');
          },
        },
        'Save JSON',
      ),
    ),
  );
  return h('div', { class: 'panel', 'data-testid': 'policy-actions' }, h('h3', {}, 'Change this policy'), rollout, mode, h('h3', {}, 'Edit'), form, jsonEditor);
}

/** A JSON merge patch of the fields the form changed; numbers typed as numbers, text left to the server to judge. */
function formPatch(form: HTMLFormElement, p: StoredPolicy): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  const algorithm: Record<string, unknown> = {};
  for (const el of form.querySelectorAll<HTMLInputElement | HTMLSelectElement>('[data-field]')) {
    const field = el.dataset.field!;
    const [head, sub] = field.split('.');
    const before = sub ? p.algorithm[sub] : p[head];
    if (String(before ?? '') === el.value) continue;
    const value = typeof before === 'number' && el.value.trim() !== '' && !Number.isNaN(Number(el.value)) ? Number(el.value) : el.value;
    if (sub) algorithm[sub] = value;
    else patch[head] = value;
  }
  if (Object.keys(algorithm).length > 0) patch.algorithm = algorithm;
  return patch;
}

function renderVersions(box: HTMLElement, loaded: Loaded, app: AppContext, result: HTMLElement, reload: () => Promise<boolean>): void {
  const current = loaded.policy.version;
  const rollback = async (version: number) => {
    try {
      const saved = await api<StoredPolicy>('POST', policyPath(loaded.policy.policy_id, '/rollback'), { body: { version }, ifMatch: current });
      await confirmChange(result, reload, `Rolled back to the content of version ${version}: now version ${saved.version}.`);
    } catch (error) {
      showError(result, undefined, error, () => void reload());
    }
  };
  replace(
    box,
    h('h3', {}, 'Version history'),
    h(
      'table',
      { 'data-testid': 'versions' },
      h('thead', {}, h('tr', {}, h('th', {}, 'version'), h('th', {}, 'created'), h('th', {}, 'limit'), h('th', {}, 'mode'), h('th', {}, ''))),
      h(
        'tbody',
        {},
        [...loaded.versions].reverse().map((v) =>
          h(
            'tr',
            { 'data-testid': `version-${v.version}` },
            h('td', {}, `v${v.version}`, v.version === current ? ' (current)' : ''),
            h('td', {}, time(v.created_at)),
            h('td', {}, limitSummary(v.snapshot)),
            h('td', {}, v.snapshot.enforcement_mode),
            h(
              'td',
              {},
              app.canEdit && v.version !== current
                ? h('button', { type: 'button', 'data-testid': `rollback-${v.version}`, onclick: () => void rollback(v.version) }, `Roll back to v${v.version}`)
                : null,
            ),
          ),
        ),
      ),
    ),
  );
}

function renderDiff(box: HTMLElement, loaded: Loaded, pick: [number, number] | undefined, onPick: (pick: [number, number]) => void): void {
  const numbers = loaded.versions.map((v) => v.version);
  const [left, right] = pick ?? [numbers[Math.max(0, numbers.length - 2)], numbers[numbers.length - 1]];
  const chooser = (testid: string, value: number) =>
    h('select', { 'data-testid': testid }, numbers.map((n) => h('option', { value: n, selected: n === value }, `v${n}`)));
  const a = chooser('diff-left', left);
  const b = chooser('diff-right', right);
  const change = () => onPick([Number(a.value), Number(b.value)]);
  a.addEventListener('change', change);
  b.addEventListener('change', change);
  const snapshot = (n: number) => loaded.versions.find((v) => v.version === n)?.snapshot;
  const rows = diffRows(snapshot(left), snapshot(right), SERVER_SET_FIELDS);
  const changed = rows.filter((r) => r.changed).length;
  replace(
    box,
    h('h3', {}, 'Compare versions'),
    h('div', { class: 'row' }, a, h('span', {}, 'against'), b, h('span', { class: 'muted', 'data-testid': 'diff-count' }, `${changed} field(s) differ`)),
    h(
      'table',
      { class: 'diff', 'data-testid': 'diff-table' },
      h('thead', {}, h('tr', {}, h('th', {}, 'field'), h('th', {}, `v${left}`), h('th', {}, `v${right}`))),
      h(
        'tbody',
        {},
        rows.map((r) => h('tr', { class: r.changed ? 'changed' : '', 'data-path': r.path }, h('td', { class: 'path' }, r.path), h('td', {}, r.left), h('td', {}, r.right))),
      ),
    ),
  );
}

/**
 * The audit trail, newest first: each change with the fields it changed as `rl policies audit` prints
 * them (src/policy/policy-changes.ts), and for a rollback the version it restored.
 */
function renderAudit(box: HTMLElement, entries: PolicyAuditEntry[], versions: PolicyVersionEntry[]): void {
  replace(
    box,
    h('h3', {}, 'Audit trail'),
    h(
      'table',
      { 'data-testid': 'audit' },
      h('thead', {}, h('tr', {}, h('th', {}, 'when'), h('th', {}, 'what'), h('th', {}, 'by'), h('th', {}, 'version'), h('th', {}, 'changed'))),
      h(
        'tbody',
        {},
        [...entries].reverse().map((e) =>
          h(
            'tr',
            { 'data-testid': 'audit-entry', 'data-action': e.action_type, 'data-version': e.version },
            h('td', {}, time(e.changed_at)),
            h('td', { 'data-testid': 'audit-what' }, whatChanged(e, versions)),
            h('td', {}, e.changed_by),
            h('td', {}, `v${e.version}`),
            h('td', {}, changesCell(e)),
          ),
        ),
      ),
    ),
  );
}

/** `rollback to v2`; an entry written before the server recorded the target names the earlier version with the same content. */
function whatChanged(e: PolicyAuditEntry, versions: PolicyVersionEntry[]): string {
  if (e.action_type !== 'rollback') return e.action_type;
  const restored =
    e.restored_version ??
    versions.find((v) => v.version < e.version && e.new_value !== null && policyChanges(v.snapshot, e.new_value).length === 0)?.version;
  return auditAction({ action_type: e.action_type, restored_version: restored });
}

function changesCell(e: PolicyAuditEntry): HTMLElement {
  if (e.old_value === null) return h('span', { class: 'muted' }, 'created');
  if (e.new_value === null) return h('span', { class: 'muted' }, 'deleted');
  const changes = policyChanges(e.old_value, e.new_value);
  if (changes.length === 0) return h('span', { class: 'muted' }, 'no field changed');
  return h('ul', { class: 'changes', 'data-testid': 'audit-changes' }, changes.map((c) => h('li', {}, changeLine(c))));
}
