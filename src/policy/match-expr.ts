import { Environment } from '@marcbachmann/cel-js';
import { canonicalMethod } from '../model/http-method.js';
import { CONTEXT_STRING_FIELDS, type RequestContext } from '../model/request-context.js';
import { MAX_FIELD_LENGTH, MAX_MATCH_EXPR_LENGTH, MAX_TAGS } from '../schema/limits.js';
import { compileRegex, RegexBudget, regexMatches } from './match-regex.js';

/**
 * `metadata.match_expr`: a CEL expression over the RequestContext (README "What a decision means").
 *
 * Variables: every string field of RequestContext as `string`, `tags` as `map<string,string>`,
 * `quantity` as `int`. Expressions are parsed and type-checked once, when a policy is saved (and again
 * when the matcher is rebuilt); they must type-check to `bool`. At decision time an evaluation error
 * (an absent field, a missing tag key, a spent regex budget, ...) counts as false, as does any
 * non-`true` result.
 *
 * `matches()` runs on RE2 (re2js), never on the backtracking JavaScript engine: the library's own
 * `string.matches` cannot be replaced (its registry refuses overlapping overloads), so every
 * `.matches(...)` call in a checked expression is renamed to an RE2 function registered here. Its
 * pattern must be a string literal, compiled when the policy is saved (see match-regex.ts for the
 * syntax, the cache and the per-decision budget).
 *
 * Cost: besides regexes, only the comprehension macros (`all`, `exists`, `exists_one`, `map`,
 * `filter`) make an evaluation cost more than its size, by multiplying their body by the length of
 * what they iterate: nested over 64 tags four deep that is 16.7 million steps (seconds a request). So
 * an expression's evaluation steps are estimated when it is saved (every AST node once, a
 * comprehension's body once per element: `tags` has at most MAX_TAGS, a list literal its length,
 * anything else up to MAX_FIELD_LENGTH, the longest list a request can produce), and an expression
 * over MAX_MATCH_EXPR_COST is refused.
 */

export { MAX_MATCH_EXPR_LENGTH };

/** Most estimated evaluation steps (see above) of one expression: a few milliseconds at most. */
export const MAX_MATCH_EXPR_COST = 10_000;

/** The RE2 `matches`; a name no CEL identifier written by a user can reach unnoticed (refused below). */
const RE2_MATCHES = '__rl_re2_matches';

/**
 * The budget of the evaluation running now (evaluation is synchronous, so one slot is enough). Outside
 * an evaluation it is a spent budget, so the RE2 function cannot be used for free.
 */
const SPENT = RegexBudget.spent();
let activeBudget: RegexBudget = SPENT;

/** One shared, fully declared environment (declarations are immutable once built). */
const env = (() => {
  const e = new Environment({
    unlistedVariablesAreDyn: false,
    limits: { maxAstNodes: 2000, maxDepth: 64, maxListElements: 1000, maxMapEntries: 1000, maxCallArguments: 32 },
  });
  for (const field of CONTEXT_STRING_FIELDS) e.registerVariable(field, 'string');
  e.registerVariable('tags', 'map<string,string>');
  e.registerVariable('quantity', 'int');
  e.registerFunction(`string.${RE2_MATCHES}(string): bool`, (subject: string, pattern: string) => regexMatches(subject, pattern, activeBudget));
  return e;
})();

/**
 * Evaluates the expression against one request. `budget` is the regex budget of the whole decision
 * (the matcher passes one per decision); without it, this evaluation gets a budget of its own.
 */
export type MatchExprEvaluator = (ctx: RequestContext, budget?: RegexBudget) => boolean;

export type CompileResult = { ok: true; evaluate: MatchExprEvaluator } | { ok: false; message: string };

export function compileMatchExpr(expr: string): CompileResult {
  if (typeof expr !== 'string') return { ok: false, message: 'must be a string (a CEL expression)' };
  if (expr.trim() === '') return { ok: false, message: 'must not be empty' };
  if (expr.length > MAX_MATCH_EXPR_LENGTH) {
    return { ok: false, message: `must be at most ${MAX_MATCH_EXPR_LENGTH} characters, got ${expr.length}` };
  }
  let program: ReturnType<typeof env.parse>;
  try {
    program = env.parse(expr);
  } catch (err) {
    return { ok: false, message: `invalid CEL expression: ${celMessage(err)}` };
  }
  let checked: ReturnType<typeof program.check>;
  try {
    checked = program.check();
  } catch (err) {
    return { ok: false, message: `invalid CEL expression: ${celMessage(err)}` };
  }
  if (!checked.valid) return { ok: false, message: `invalid CEL expression: ${celMessage(checked.error)}` };
  if (checked.type !== 'bool') {
    return { ok: false, message: `must evaluate to bool, but the expression has type ${checked.type ?? 'unknown'}` };
  }
  // Checked as written (so messages name `matches`); now parse again and move every `matches` to RE2.
  program = env.parse(expr);
  const rewritten = useRe2(program.ast);
  if (rewritten !== undefined) return { ok: false, message: rewritten };
  canonicalMethodLiterals(program.ast);
  const cost = estimatedCost(program.ast);
  if (cost > MAX_MATCH_EXPR_COST) {
    return {
      ok: false,
      message:
        `is too costly: about ${cost} evaluation steps per request, at most ${MAX_MATCH_EXPR_COST} ` +
        `(a comprehension (all, exists, exists_one, map, filter) runs its body once per element: up to ${MAX_TAGS} for tags, ` +
        `${MAX_FIELD_LENGTH} for a list made from a request field; avoid nesting them)`,
    };
  }
  const recheck = program.check();
  if (!recheck.valid) return { ok: false, message: `invalid CEL expression: ${celMessage(recheck.error)}` };

  const evaluate: MatchExprEvaluator = (ctx, budget) => {
    try {
      // The context object is read per declared variable name only. A child of the request context
      // overrides `quantity` with the bigint CEL expects for `int`; absent string fields stay absent
      // (an "unknown variable" error, hence false).
      const scope = Object.create(ctx) as Record<string, unknown>;
      scope.quantity = typeof ctx.quantity === 'number' && Number.isSafeInteger(ctx.quantity) ? BigInt(ctx.quantity) : undefined;
      // The library types a value by its `constructor` property, so a tag named "constructor" would make
      // the whole map unreadable (and let a caller switch expressions off); hand it over as a Map instead.
      const tags = ctx.tags;
      if (tags && Object.prototype.hasOwnProperty.call(tags, 'constructor')) scope.tags = new Map(Object.entries(tags));
      activeBudget = budget ?? new RegexBudget();
      return program(scope) === true;
    } catch {
      return false;
    } finally {
      activeBudget = SPENT;
    }
  };
  return { ok: true, evaluate };
}

interface AstNode {
  op: string;
  args: unknown;
}

function isNode(x: unknown): x is AstNode {
  return typeof x === 'object' && x !== null && typeof (x as AstNode).op === 'string' && 'args' in x;
}

/**
 * Visits every call-like node of the AST (one whose args are a list), parents before children; a visit
 * that returns a message stops the walk with it.
 */
function walkNodes(root: unknown, visit: (node: AstNode, args: unknown[]) => string | undefined): string | undefined {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const node = stack.pop();
    if (Array.isArray(node)) {
      for (const child of node) stack.push(child);
      continue;
    }
    if (!isNode(node) || !Array.isArray(node.args)) continue;
    const args = node.args as unknown[];
    const stop = visit(node, args);
    if (stop !== undefined) return stop;
    for (const child of args) stack.push(child);
  }
  return undefined;
}

/**
 * Renames every `<string>.matches(<pattern>)` call to the RE2 function, after checking that its pattern
 * is a string literal RE2 compiles. Returns why the expression is refused, or undefined.
 */
function useRe2(root: unknown): string | undefined {
  return walkNodes(root, (node, args) => {
    if ((node.op === 'rcall' || node.op === 'call') && args[0] === RE2_MATCHES) return `invalid CEL expression: unknown function ${RE2_MATCHES}`;
    if (node.op === 'rcall' && args[0] === 'matches' && Array.isArray(args[2]) && args[2].length === 1) {
      const pattern = args[2][0];
      if (!isNode(pattern) || pattern.op !== 'value' || typeof pattern.args !== 'string') {
        return 'matches() takes a string literal pattern (patterns are compiled when the policy is saved)';
      }
      const compiled = compileRegex(pattern.args);
      if (!compiled.ok) return compiled.message;
      args[0] = RE2_MATCHES;
    }
    return undefined;
  });
}

/** `method`, as a CEL identifier node. */
function isMethod(node: unknown): boolean {
  return isNode(node) && node.op === 'id' && node.args === 'method';
}

/** Upper-cases a string literal node that spells an HTTP method name (model/http-method.ts). */
function canonicalLiteral(node: unknown): void {
  if (isNode(node) && node.op === 'value' && typeof node.args === 'string') node.args = canonicalMethod(node.args);
}

/**
 * The matcher hands match_expr the request's `method` upper-cased when it is an HTTP method name, so the
 * literals it is compared with are brought to the same form: `method == "post"`, `"post" != method` and
 * `method in ["get", "put"]` compare case-insensitively, as a scope does. (A function of `method`, such
 * as `matches()` or `startsWith()`, sees the upper-case name: README, "Matching".)
 */
function canonicalMethodLiterals(root: unknown): void {
  walkNodes(root, (node, [left, right]) => {
    if (node.op === '==' || node.op === '!=') {
      if (isMethod(left)) canonicalLiteral(right);
      if (isMethod(right)) canonicalLiteral(left);
    } else if (node.op === 'in' && isMethod(left) && isNode(right) && right.op === 'list' && Array.isArray(right.args)) {
      for (const item of right.args) canonicalLiteral(item);
    }
    return undefined;
  });
}

/** The macros that run their body once per element of their receiver. */
const COMPREHENSIONS = new Set(['all', 'exists', 'exists_one', 'map', 'filter']);

/**
 * Evaluation steps of the expression in the worst case: every node once, times the length of the
 * lists every enclosing comprehension iterates (see the file comment). Saturates instead of overflowing.
 */
function estimatedCost(root: unknown): number {
  let cost = 0;
  const stack: [unknown, number][] = [[root, 1]];
  while (stack.length > 0) {
    const [node, times] = stack.pop()!;
    if (Array.isArray(node)) {
      for (const child of node) stack.push([child, times]);
      continue;
    }
    if (!isNode(node)) continue;
    cost = Math.min(Number.MAX_SAFE_INTEGER, cost + times);
    if (!Array.isArray(node.args)) continue;
    const args = node.args as unknown[];
    if (node.op === 'rcall' && typeof args[0] === 'string' && COMPREHENSIONS.has(args[0]) && Array.isArray(args[2])) {
      stack.push([args[1], times]);
      const each = Math.min(Number.MAX_SAFE_INTEGER, times * iterationBound(args[1]));
      for (const body of args[2]) stack.push([body, each]);
      continue;
    }
    for (const child of args) stack.push([child, times]);
  }
  return cost;
}

/** How many elements a comprehension over `receiver` may visit. */
function iterationBound(receiver: unknown): number {
  if (!isNode(receiver)) return MAX_FIELD_LENGTH;
  if (receiver.op === 'id' && receiver.args === 'tags') return MAX_TAGS;
  if ((receiver.op === 'list' || receiver.op === 'map') && Array.isArray(receiver.args)) return receiver.args.length;
  // `tags.filter(...).map(...)` yields no more elements than what it iterates.
  const args = receiver.args as unknown[];
  if (receiver.op === 'rcall' && (args[0] === 'map' || args[0] === 'filter')) return iterationBound(args[1]);
  return MAX_FIELD_LENGTH;
}

function celMessage(err: unknown): string {
  if (err && typeof err === 'object') {
    const e = err as { summary?: unknown; message?: unknown; range?: { start?: unknown } };
    const text = typeof e.summary === 'string' ? e.summary : typeof e.message === 'string' ? e.message.split('\n')[0] : String(err);
    const at = typeof e.range?.start === 'number' ? ` (at offset ${e.range.start})` : '';
    return `${text}${at}`;
  }
  return String(err);
}
