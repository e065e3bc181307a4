import { ApiError } from '../api.js';
import { h, replace } from '../dom.js';

/**
 * Shows the outcome of a change: the server's message and every field error of a 422 (the inputs whose
 * `data-field` is named get marked), a 409 with a way to load the current version, or a success note.
 */
export function showError(box: HTMLElement, form: HTMLElement | undefined, error: unknown, reload: () => void): void {
  for (const el of form?.querySelectorAll('.invalid') ?? []) el.classList.remove('invalid');
  if (!(error instanceof ApiError)) {
    replace(box, h('div', { class: 'error', 'data-testid': 'error' }, String((error as Error)?.message ?? error)));
    return;
  }
  const fields = error.fieldErrors;
  for (const f of fields) {
    const input = form?.querySelector(`[data-field="${CSS.escape(f.field)}"]`);
    input?.classList.add('invalid');
  }
  const conflict = error.status === 409 || error.status === 412;
  replace(
    box,
    h(
      'div',
      { class: 'error', 'data-testid': conflict ? 'conflict' : 'error' },
      h('strong', {}, conflict ? `Conflict (${error.status}): ` : `Refused (${error.status}): `),
      error.message,
      fields.length > 0 ? h('ul', {}, fields.map((f) => h('li', { 'data-testid': 'field-error' }, h('code', {}, f.field), `: ${f.message}`))) : null,
      conflict ? h('div', {}, h('button', { type: 'button', onclick: reload }, 'Load the current version')) : null,
    ),
  );
}

export function showNotice(box: HTMLElement, text: string): void {
  replace(box, h('div', { class: 'notice', 'data-testid': 'notice' }, text));
}

/**
 * After a change the server accepted: the page re-renders first (a control clicked after the notice must carry
 * the new version), then says what was done; if that reload failed, its error stays, under what was done, so
 * nobody takes the change for refused and sends it again.
 */
export async function confirmChange(box: HTMLElement, reload: () => Promise<boolean>, done: string): Promise<void> {
  if (await reload()) return showNotice(box, done);
  box.prepend(h('div', { class: 'notice', 'data-testid': 'saved-not-reloaded' }, `${done} Loading it again failed; the page still shows the version before:`));
}
