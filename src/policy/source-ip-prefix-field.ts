import { describe } from '../model/request-context.js';
import { DEFAULT_SOURCE_IP_PREFIX, SOURCE_IP_PREFIX_KEYS, type SourceIpPrefix } from '../schema/policy.js';
import { isObject } from '../util/json-shape.js';
import { isIntegerIn } from './bound-wording.js';
import { own, type ErrFn } from './field-reading.js';
import { SOURCE_IP_PREFIX_RANGES } from './policy-field-schemas.js';
import { unknownFieldErrors } from './unknown-fields.js';

/** Absent stays absent (the defaults apply); given, both lengths are stored, defaults filled in. */
export function validateSourceIpPrefix(v: unknown, err: ErrFn): SourceIpPrefix | undefined {
  if (v === undefined) return undefined;
  if (!isObject(v)) {
    const { v4, v6 } = SOURCE_IP_PREFIX_RANGES;
    err('source_ip_prefix', `must be an object {"v4": ${v4.minimum}–${v4.maximum}, "v6": ${v6.minimum}–${v6.maximum}}, got ${describe(v)}`);
    return undefined;
  }
  const prefix: SourceIpPrefix = { ...DEFAULT_SOURCE_IP_PREFIX };
  for (const e of unknownFieldErrors(v, SOURCE_IP_PREFIX_KEYS, 'source_ip_prefix', 'source_ip_prefix')) err(e.field, e.message);
  for (const key of ['v4', 'v6'] as const) {
    const length = own(v, key);
    if (length === undefined) continue;
    const { minimum, maximum } = SOURCE_IP_PREFIX_RANGES[key];
    if (isIntegerIn(length, SOURCE_IP_PREFIX_RANGES[key])) prefix[key] = length;
    else err(`source_ip_prefix.${key}`, `must be an integer prefix length from ${minimum} to ${maximum}, got ${describe(length)}`);
  }
  return prefix;
}
