/** Request bodies are shallow documents (a RequestContext, a Policy); anything deeper is refused. */
export const MAX_JSON_DEPTH = 32;

/** A decoded JSON object: not null, not an array. */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export type JsonShapeProblem = 'too_deep' | 'proto_key';

/**
 * What is wrong with the shape of a decoded JSON value: nesting deeper than MAX_JSON_DEPTH, or (when
 * asked) a `__proto__` key anywhere. Walks with an explicit stack: no input can overflow the call stack.
 */
export function jsonShapeProblem(root: unknown, lookForProtoKeys: boolean): JsonShapeProblem | undefined {
  if (typeof root !== 'object' || root === null) return undefined;
  const stack: object[] = [root];
  const depths: number[] = [0];
  while (stack.length > 0) {
    const value = stack.pop()!;
    const depth = depths.pop()!;
    if (depth >= MAX_JSON_DEPTH) return 'too_deep';
    const isArray = Array.isArray(value);
    for (const key in value) {
      if (!isArray && lookForProtoKeys && key === '__proto__') return 'proto_key';
      const child = (value as Record<string, unknown>)[key];
      if (typeof child === 'object' && child !== null) {
        stack.push(child);
        depths.push(depth + 1);
      }
    }
  }
  return undefined;
}
