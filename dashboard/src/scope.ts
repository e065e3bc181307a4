import { h } from './dom.js';

/** A policy scope as `field = value` chips (each tag its own `tags.key = value`); an empty scope says it covers everything. */
export function scopeChips(scope: Record<string, unknown>): HTMLElement {
  const pairs: [string, string][] = [];
  for (const [field, value] of Object.entries(scope)) {
    if (field === 'tags' && value !== null && typeof value === 'object') {
      for (const [key, tag] of Object.entries(value as Record<string, unknown>)) pairs.push([`tags.${key}`, String(tag)]);
    } else {
      pairs.push([field, String(value)]);
    }
  }
  if (pairs.length === 0) return h('span', { class: 'muted', 'data-testid': 'scope-chips' }, 'every context (empty scope)');
  return h(
    'span',
    { class: 'chips', 'data-testid': 'scope-chips' },
    pairs.map(([field, value]) => h('span', { class: 'chip', 'data-testid': 'scope-chip', title: value === '*' ? 'any value; one counter each' : undefined }, `${field} = ${value}`)),
  );
}
