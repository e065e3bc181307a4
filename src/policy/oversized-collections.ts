import { keyCountUpTo } from '../schema/limits.js';
import { SCOPE_KEYS } from '../schema/policy.js';
import { isObject } from '../util/json-shape.js';
import { own } from './field-reading.js';
import { METADATA_FIELDS, SCOPE_FIELDS_SCHEMA } from './policy-field-schemas.js';
import type { FieldError } from './types.js';

/**
 * The size bounds of a policy body's collections (scope, scope.tags, metadata), checked alone and
 * without reading any item: for callers that would otherwise walk the body before validating it (a
 * JSON merge patch is merged into the stored policy first). validatePolicy reports the same problems.
 */
const MAX_TAGS = SCOPE_FIELDS_SCHEMA.maxTags;
const MAX_METADATA_ENTRIES = METADATA_FIELDS.maxEntries;

export function oversizedCollections(raw: unknown): FieldError[] {
  if (!isObject(raw)) return [];
  const errors: FieldError[] = [];
  const scope = own(raw, 'scope');
  if (isObject(scope)) {
    if (keyCountUpTo(scope, SCOPE_KEYS.length) > SCOPE_KEYS.length) {
      errors.push({ field: 'scope', message: `must hold at most ${SCOPE_KEYS.length} fields (the scope fields and tags), got more` });
    } else {
      const tags = own(scope, 'tags');
      if (isObject(tags) && keyCountUpTo(tags, MAX_TAGS) > MAX_TAGS) errors.push({ field: 'scope.tags', message: `must hold at most ${MAX_TAGS} tags, got more` });
    }
  }
  const metadata = own(raw, 'metadata');
  if (isObject(metadata) && keyCountUpTo(metadata, MAX_METADATA_ENTRIES) > MAX_METADATA_ENTRIES) {
    errors.push({ field: 'metadata', message: `must hold at most ${MAX_METADATA_ENTRIES} entries, got more` });
  }
  return errors;
}
