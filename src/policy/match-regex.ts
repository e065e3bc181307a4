import { RE2JS } from 're2js';

/**
 * The regular expressions of `matches()` in `metadata.match_expr`: RE2 syntax on re2js, a linear-time
 * engine (a DFA, falling back to an NFA simulation; no backtracking), so no pattern and no input can
 * take exponential time. RE2 has no backreferences and no lookaround: a pattern that uses them (or is
 * otherwise invalid) is refused when the policy is saved.
 *
 * Cost: RE2 runs in O(program size x input length). Every call is charged that product in "steps"
 * against a budget of REGEX_STEPS_PER_DECISION for the whole decision (all match_expr evaluations of
 * one request together); a call the budget cannot pay for is an evaluation error, so its expression
 * counts as false. The budget lets a 10,000-character input through a ~200-instruction pattern, and
 * costs a few milliseconds at most at the engine's slowest rate (the NFA fallback; BENCHMARKS.md).
 */

/** RE2 steps (program instructions x input characters) all `matches()` calls of one decision may spend. */
export const REGEX_STEPS_PER_DECISION = 2_000_000;

/** Distinct compiled patterns kept; beyond it the oldest is dropped (and recompiled when seen again). */
export const REGEX_CACHE_SIZE = 1024;

interface CompiledRegex {
  re: RE2JS;
  /** Instructions of the compiled program: the per-character cost factor. */
  size: number;
}

export type RegexCompileResult = { ok: true; regex: CompiledRegex } | { ok: false; message: string };

const cache = new Map<string, CompiledRegex>();

/** What one decision may still spend on `matches()`. */
export class RegexBudget {
  remaining = REGEX_STEPS_PER_DECISION;

  /** A budget with nothing left (used outside any evaluation). */
  static spent(): RegexBudget {
    const b = new RegexBudget();
    b.remaining = 0;
    return b;
  }

  reset(): void {
    this.remaining = REGEX_STEPS_PER_DECISION;
  }
}

class RegexBudgetExceeded extends Error {
  constructor() {
    super(`matches(): this decision's regex budget (${REGEX_STEPS_PER_DECISION} steps) is spent`);
    this.name = 'RegexBudgetExceeded';
  }
}

/** Compiles (or finds in the cache) one pattern; the message says why RE2 refuses it. */
export function compileRegex(pattern: string): RegexCompileResult {
  const hit = cache.get(pattern);
  if (hit) return { ok: true, regex: hit };
  let re: RE2JS;
  try {
    re = RE2JS.compile(pattern);
  } catch (err) {
    return { ok: false, message: refusal(pattern, err) };
  }
  const regex: CompiledRegex = { re, size: Math.max(1, re.matcher('').programSize()) };
  if (cache.size >= REGEX_CACHE_SIZE) cache.delete(cache.keys().next().value as string);
  cache.set(pattern, regex);
  return { ok: true, regex };
}

/** CEL's `subject.matches(pattern)`: true when the pattern matches any part of the subject. */
export function regexMatches(subject: string, pattern: string, budget: RegexBudget): boolean {
  const compiled = compileRegex(pattern);
  if (!compiled.ok) throw new Error(compiled.message);
  const steps = compiled.regex.size * (subject.length + 1);
  if (steps > budget.remaining) {
    budget.remaining = 0;
    throw new RegexBudgetExceeded();
  }
  budget.remaining -= steps;
  // test() asks for no capture groups, so re2js can answer on its DFA.
  return compiled.regex.re.test(subject);
}

function refusal(pattern: string, err: unknown): string {
  const why = err instanceof Error ? err.message.replace(/^error parsing regexp: /, '') : String(err);
  const shown = pattern.length > 80 ? `${pattern.slice(0, 80)}…` : pattern;
  return (
    `matches() pattern ${JSON.stringify(shown)} is not valid RE2 syntax (${why}); patterns run on a ` +
    'linear-time engine, which has no backreferences and no lookahead or lookbehind'
  );
}

/** How many compiled patterns the cache holds (tests). */
export function cachedRegexCount(): number {
  return cache.size;
}
