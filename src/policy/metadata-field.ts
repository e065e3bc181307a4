import { describe } from '../model/request-context.js';
import { keyCountUpTo } from '../schema/limits.js';
import { SEVERITY_LEVELS } from '../schema/policy.js';
import { isObject } from '../util/json-shape.js';
import { oneOf, type ErrFn } from './field-reading.js';
import { compileMatchExpr } from './match-expr.js';
import { METADATA_FIELDS } from './policy-field-schemas.js';

const { maxEntries: MAX_METADATA_ENTRIES, keyMaxLength: MAX_METADATA_KEY_LENGTH, valueMaxLength: MAX_METADATA_VALUE_LENGTH } = METADATA_FIELDS;

export function validateMetadata(v: unknown, err: ErrFn): Record<string, string> | undefined {
  const metadata = Object.create(null) as Record<string, string>;
  if (v === undefined) return metadata;
  if (!isObject(v)) {
    err('metadata', `must be an object of string values, got ${describe(v)}`);
    return undefined;
  }
  if (keyCountUpTo(v, MAX_METADATA_ENTRIES) > MAX_METADATA_ENTRIES) {
    err('metadata', `must hold at most ${MAX_METADATA_ENTRIES} entries, got more`);
    return undefined;
  }
  let ok = true;
  for (const key of Object.keys(v)) {
    const value = v[key];
    if (key.length > MAX_METADATA_KEY_LENGTH) {
      err('metadata', `keys must be at most ${MAX_METADATA_KEY_LENGTH} characters, got ${key.length} (${describe(key)})`);
      ok = false;
      continue;
    }
    let text: string;
    if (typeof value === 'string') text = value;
    else if ((typeof value === 'number' && Number.isFinite(value)) || typeof value === 'boolean') text = String(value);
    else {
      err(`metadata.${key}`, `must be a string, got ${describe(value)}`);
      ok = false;
      continue;
    }
    if (key === 'match_expr') {
      const compiled = compileMatchExpr(text);
      if (!compiled.ok) {
        err('metadata.match_expr', compiled.message);
        ok = false;
        continue;
      }
    } else if (text.length > MAX_METADATA_VALUE_LENGTH) {
      // match_expr has its own bound (compileMatchExpr above).
      err(`metadata.${key}`, `must be at most ${MAX_METADATA_VALUE_LENGTH} characters, got ${text.length}`);
      ok = false;
      continue;
    } else if (key === 'min_severity' && !(SEVERITY_LEVELS as readonly string[]).includes(text)) {
      err('metadata.min_severity', `must be one of ${oneOf(SEVERITY_LEVELS)}, got ${describe(value)}`);
      ok = false;
      continue;
    }
    metadata[key] = text;
  }
  return ok ? metadata : undefined;
}
