import { h } from './dom.js';
import { REQUEST_CONTEXT_SCHEMA, type FieldSchema } from './request-context-schema.js';

/**
 * The inputs of a RequestContext, one per property of its schema, typed by the property's schema: a
 * select for a set of values (signal_type), a number for an integer (quantity), key/value rows for a
 * map (tags), text for the rest. `read()` gives the request body: blank inputs are left out.
 */
export interface ContextForm {
  /** Label and input pairs, for a two-column grid. */
  rows: HTMLElement[];
  read(): Record<string, unknown>;
  /** Called whenever an input changes. */
  onInput(listener: () => void): void;
}

interface FieldInput {
  name: string;
  elements: HTMLElement[];
  read(): unknown;
}

export function contextForm(): ContextForm {
  const listeners: (() => void)[] = [];
  const changed = () => listeners.forEach((l) => l());
  const fields = Object.entries(REQUEST_CONTEXT_SCHEMA.properties).map(([name, schema]) => fieldInput(name, schema, changed));
  return {
    rows: fields.flatMap((f) => f.elements),
    read: () => {
      const body: Record<string, unknown> = {};
      for (const f of fields) {
        const value = f.read();
        if (value !== undefined) body[f.name] = value;
      }
      return body;
    },
    onInput: (listener) => listeners.push(listener),
  };
}

function fieldInput(name: string, schema: FieldSchema, changed: () => void): FieldInput {
  const label = h('label', { for: `ctx-${name}`, title: schema.description }, name);
  const choices = literals(schema);
  if (choices !== undefined) {
    const select = h(
      'select',
      { id: `ctx-${name}`, name, 'data-field': name, onchange: changed },
      h('option', { value: '' }, '(absent)'),
      choices.map((c) => h('option', { value: c }, c)),
    );
    return { name, elements: [label, select], read: () => (select.value === '' ? undefined : select.value) };
  }
  const integer = variants(schema).find((s) => s.type === 'integer' || s.type === 'number');
  if (integer !== undefined) {
    const input = h('input', { id: `ctx-${name}`, name, 'data-field': name, type: 'number', step: 1, min: integer.minimum, max: integer.maximum, title: schema.description, oninput: changed });
    return { name, elements: [label, input], read: () => (input.value.trim() === '' ? undefined : Number(input.value)) };
  }
  if (schema.type === 'object') return mapInput(name, schema, label, changed);
  const input = h('input', { id: `ctx-${name}`, name, 'data-field': name, maxlength: schema.maxLength, placeholder: '(absent)', oninput: changed });
  return { name, elements: [label, input], read: () => (input.value.trim() === '' ? undefined : input.value.trim()) };
}

/** A map of strings (tags): key/value rows, one more added on demand. */
function mapInput(name: string, schema: FieldSchema, label: HTMLElement, changed: () => void): FieldInput {
  const rows = h('div', { 'data-testid': `${name}-rows` });
  const addRow = () => {
    if (schema.maxProperties !== undefined && rows.children.length >= schema.maxProperties) return;
    rows.append(
      h(
        'div',
        { class: 'row map-row' },
        h('input', { name: `${name}.key`, placeholder: 'key', 'aria-label': `${name} key`, oninput: changed }),
        h('input', { name: `${name}.value`, placeholder: 'value', 'aria-label': `${name} value`, oninput: changed }),
      ),
    );
  };
  addRow();
  const add = h('button', { type: 'button', 'data-testid': `${name}-add`, onclick: addRow }, `+ ${name} row`);
  return {
    name,
    elements: [label, h('div', { 'data-field': name }, rows, add)],
    read: () => {
      const map: Record<string, string> = {};
      for (const row of rows.querySelectorAll('.map-row')) {
        const [key, value] = [...row.querySelectorAll('input')].map((i) => i.value.trim());
        if (key !== '') map[key] = value;
      }
      return Object.keys(map).length === 0 ? undefined : map;
    },
  };
}

function variants(schema: FieldSchema): FieldSchema[] {
  return schema.anyOf ?? [schema];
}

/** The values of a union of constants (`signal_type`), else undefined. */
function literals(schema: FieldSchema): string[] | undefined {
  const all = variants(schema);
  return all.every((s) => s.const !== undefined) ? all.map((s) => s.const!) : undefined;
}
