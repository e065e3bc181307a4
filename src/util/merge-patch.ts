import { isObject } from './json-shape.js';

/**
 * RFC 7396 JSON merge patch. Results are prototype-less objects, so a `__proto__` key is just a key.
 * Callers bound the depth first (jsonShapeProblem).
 */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const result: Record<string, unknown> = Object.create(null);
  if (isObject(target)) for (const key of Object.keys(target)) result[key] = target[key];
  for (const key of Object.keys(patch)) {
    const value = patch[key];
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}
