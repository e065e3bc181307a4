import { isObject } from '../util/json-shape.js';

/**
 * What changed between two versions of a policy, field by field, and how it reads: one implementation
 * for `rl policies audit`, `rl diff` / `rl apply` and the dashboard's audit trail (which bundles this
 * module), so the page and the CLI print the same line for the same change. Pure: no Node API.
 */

export interface FieldChange {
  /** Dotted path: `algorithm.limit`, `scope.tags.env`. */
  field: string;
  from?: unknown;
  to?: unknown;
}

/** Fields the server sets on every change: they differ between any two versions and say nothing. */
export const SERVER_SET_FIELDS: readonly string[] = ['version', 'created_at', 'updated_at'];

/** Every leaf that differs between two JSON values, as dotted paths (objects recursed, the rest compared whole). */
export function diffFields(from: Record<string, unknown>, to: Record<string, unknown>, prefix = ''): FieldChange[] {
  const changes: FieldChange[] = [];
  const keys = [...new Set([...Object.keys(from), ...Object.keys(to)])].sort();
  for (const key of keys) {
    const a = from[key];
    const b = to[key];
    const field = prefix + key;
    if (isObject(a) && isObject(b)) {
      changes.push(...diffFields(a, b, `${field}.`));
      continue;
    }
    if (sameJson(a, b)) continue;
    const change: FieldChange = { field };
    if (a !== undefined) change.from = a;
    if (b !== undefined) change.to = b;
    changes.push(change);
  }
  return changes;
}

/** A policy without the fields the server sets (SERVER_SET_FIELDS). */
export function withoutServerFields(policy: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(policy)) if (!SERVER_SET_FIELDS.includes(k)) out[k] = v;
  return out;
}

/** The fields one audited change changed (none for a create or a delete: the whole policy came or went). */
export function policyChanges(oldValue: object | null, newValue: object | null): FieldChange[] {
  if (oldValue === null || newValue === null) return [];
  return diffFields(withoutServerFields(oldValue), withoutServerFields(newValue));
}

/** A value in a change line: JSON (strings quoted), absent as `(none)`. */
export function showValue(value: unknown): string {
  return value === undefined ? '(none)' : JSON.stringify(value);
}

/** `algorithm.limit: 5 -> 6`. */
export function changeLine(change: FieldChange): string {
  return `${change.field}: ${showValue(change.from)} -> ${showValue(change.to)}`;
}

/** One audited change in a line: `algorithm.limit: 10 -> 20, enabled: true -> false` (creates and deletes say so). */
export function changeSummary(oldValue: object | null, newValue: object | null): string {
  if (oldValue === null) return 'created';
  if (newValue === null) return 'deleted';
  const changes = policyChanges(oldValue, newValue);
  return changes.length === 0 ? 'no field changed' : changes.map(changeLine).join(', ');
}

/** An audit entry's action as people read it: `rollback to v2` when the entry names the version it restored. */
export function auditAction(entry: { action_type: string; restored_version?: number }): string {
  return entry.action_type === 'rollback' && entry.restored_version !== undefined ? `rollback to v${entry.restored_version}` : entry.action_type;
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

/** Key order does not matter in a comparison. */
function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (isObject(v)) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) out[k] = canonical(v[k]);
    return out;
  }
  return v;
}
