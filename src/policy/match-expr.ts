import { Environment } from '@marcbachmann/cel-js';
import { CONTEXT_STRING_FIELDS, type RequestContext } from '../model/request-context.js';

/**
 * `metadata.match_expr`: a CEL expression over the RequestContext (CONTRACT.md, "Scope and matching").
 *
 * Variables: every string field of RequestContext as `string`, `tags` as `map<string,string>`,
 * `quantity` as `int`. Expressions are parsed and type-checked once, when a policy is saved (and again
 * when the matcher is rebuilt); they must type-check to `bool`. At decision time an evaluation error
 * (an absent field, a missing tag key, ...) counts as false, as does any non-`true` result.
 */

/** Longest accepted expression, in characters. Expressions run on the hot path; keep them small. */
export const MAX_MATCH_EXPR_LENGTH = 4096;

/** One shared, fully declared environment (declarations are immutable once built). */
const env = (() => {
  const e = new Environment({
    unlistedVariablesAreDyn: false,
    limits: { maxAstNodes: 2000, maxDepth: 64, maxListElements: 1000, maxMapEntries: 1000, maxCallArguments: 32 },
  });
  for (const field of CONTEXT_STRING_FIELDS) e.registerVariable(field, 'string');
  e.registerVariable('tags', 'map<string,string>');
  e.registerVariable('quantity', 'int');
  return e;
})();

export type MatchExprEvaluator = (ctx: RequestContext) => boolean;

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

  const evaluate: MatchExprEvaluator = (ctx) => {
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
      return program(scope) === true;
    } catch {
      return false;
    }
  };
  return { ok: true, evaluate };
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
