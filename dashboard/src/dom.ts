/**
 * A tiny element builder. Text always goes in as text (never parsed as HTML), so nothing the server
 * returns — policy names, tag values — can inject markup.
 */
type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | undefined | ((event: Event) => void)>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: (Child | Child[])[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(name.replace(/^on/, ''), value);
    else if (name === 'class') el.className = String(value);
    else if (name === 'value' && 'value' in el) (el as HTMLInputElement).value = String(value);
    else if (name === 'checked' && el instanceof HTMLInputElement) el.checked = Boolean(value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el: HTMLElement, children: (Child | Child[])[]): void {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

/** Replaces every child of `el`. */
export function replace(el: HTMLElement, ...children: (Child | Child[])[]): void {
  el.replaceChildren();
  append(el, children);
}

export function badge(text: string, kind = ''): HTMLSpanElement {
  return h('span', { class: `badge ${kind}` }, text);
}
