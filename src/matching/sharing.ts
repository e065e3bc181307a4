import type { CounterSpec } from '../counters/counter-spec.js';
import { compileMatchExpr, type CompileResult } from '../policy/match-expr.js';
import type { AlgorithmConfig } from '../policy/types.js';
import type { ScopeField } from '../model/request-context.js';
import { counterSpecOf } from './counter-spec-of.js';
import type { Wildcard } from './compiled-policy.js';

/** One object for equal values within a snapshot, and the process-wide caches of compiled algorithms and expressions. */

/** The empty list, shared by every policy (it stays in cache). */
export const EMPTY: string[] = [];

/**
 * One object for equal values within a snapshot: lists of strings, wildcard lists and counter specs
 * that many policies have in common (most per-user policies have the same `["user_id"]` wildcard, a
 * deployment has a handful of distinct algorithms). Fewer objects, warmer caches, and a kept list is a
 * copy of exactly its length (a list built with push() has room for 16 more).
 */
export interface Sharing {
  strings(parts: string[]): string[];
  wildcards(list: Wildcard[]): readonly Wildcard[];
  spec(spec: CounterSpec): CounterSpec;
  /** The parts of the `*` plain fields in `mask` (no source_ip, no tags), made once by `make`. */
  fieldWildcards(mask: number, make: () => WildParts): WildParts;
}

export const SHARING_MAX = 10_000;

/** `max`: most entries of each kind held before they are forgotten (only memory is at stake). */
export function sharing(max = Infinity): Sharing {
  const lists = new Map<string, unknown[]>();
  const specs = new Map<string, CounterSpec>();
  const byMask = new Map<number, WildParts>();
  const list = <T>(kind: string, items: T[], keyOf: (item: T) => string): T[] => {
    if (items.length === 0) return EMPTY as T[];
    let key = kind;
    for (const item of items) {
      const part = keyOf(item);
      key += `${part.length}:${part}`; // injective, like lengthPrefixed
    }
    const known = lists.get(key) as T[] | undefined;
    if (known) return known;
    const kept = items.slice();
    // A matcher keeps its common sharing for later changes: bounded.
    if (lists.size >= max) lists.clear();
    lists.set(key, kept);
    return kept;
  };
  return {
    strings: (parts) => list('s', parts, (part) => part),
    // A wildcard's name determines it (`tags.<key>` for a tag, the field name otherwise), but for the
    // prefix lengths of a source_ip one.
    wildcards: (wildcards) => list('w', wildcards, (w) => (w.network ? `${w.name}/${w.network.v4}/${w.network.v6}` : w.name)),
    spec: (spec) => {
      // Specs are flat objects of strings and numbers, built in a fixed key order per type.
      const key = JSON.stringify(spec);
      const known = specs.get(key);
      if (known) return known;
      if (specs.size >= max) specs.clear();
      specs.set(key, spec);
      return spec;
    },
    fieldWildcards: (mask, make) => {
      let parts = byMask.get(mask);
      if (parts === undefined) {
        parts = make();
        if (byMask.size >= max) byMask.clear();
        byMask.set(mask, parts);
      }
      return parts;
    },
  };
}

/** The `*` parts of a policy, in identity order (by name), and the field and tag names among them. */
export interface WildParts {
  wildcards: readonly Wildcard[];
  fields: ScopeField[];
  tags: string[];
}

/**
 * Counter specs of frozen algorithms: stored policies with equal algorithms share one frozen object
 * (policy/stored-policy.ts), so a build derives each distinct algorithm's spec once.
 */
export const specsByAlgorithm = new WeakMap<AlgorithmConfig, CounterSpec>();

export function specOf(algorithm: AlgorithmConfig, shared: Sharing): CounterSpec {
  const known = specsByAlgorithm.get(algorithm);
  if (known !== undefined) return known;
  const spec = shared.spec(counterSpecOf(algorithm));
  if (Object.isFrozen(algorithm)) specsByAlgorithm.set(algorithm, spec);
  return spec;
}

/** Compiled expressions by source text: rebuilding a large snapshot must not re-parse every one. */
export const exprCache = new Map<string, CompileResult>();
export const EXPR_CACHE_MAX = 10_000;

export function compileCached(expr: string): CompileResult {
  let compiled = exprCache.get(expr);
  if (compiled === undefined) {
    compiled = compileMatchExpr(expr);
    if (exprCache.size >= EXPR_CACHE_MAX) exprCache.clear();
    exprCache.set(expr, compiled);
  }
  return compiled;
}
