import { canonicalMethod } from '../model/http-method.js';
import { SCOPE_FIELDS, type RequestContext } from '../model/request-context.js';
import type { RegexBudget } from '../policy/match-regex.js';
import { identityOf, isExact, outsideRollout, scopeMatches, type CompiledPolicy, type MissReport, type PolicyFamily } from './matcher.js';

/**
 * Report mode of the matcher, for explain (docs/matching.md): why one compiled policy does or does not
 * cover a request, by the very checks a decision runs (`scopeMatches`, `outsideRollout`), told what
 * refused. The decision path never calls this.
 *
 * Answers undefined when the policy covers the request, else `algorithm`, `not_valid_now`,
 * `scope:<field>`, `scope:tags.<key>`, `match_expr` or `rollout`. `ctx.method` must already be in its
 * canonical form (Matcher.match puts it there).
 */
export function whyNotCovered(c: CompiledPolicy, ctx: RequestContext, family: PolicyFamily, nowMs: number, regexBudget: RegexBudget): string | undefined {
  if (c.family !== family) return 'algorithm';
  const report: MissReport = { why: '' };
  if (!scopeMatches(c, ctx, nowMs, regexBudget, report)) return report.why;
  const indexed = indexedPairMiss(c, ctx);
  if (indexed !== undefined) return indexed;
  if (c.rolloutPercent < 100 && outsideRollout(c, identityOf(c, ctx))) return 'rollout';
  return undefined;
}

/**
 * The exact pair a decision finds a policy by (its index bucket) is left out of `scopeMatches`' checks;
 * a report, which finds no bucket, compares the policy's exact fields and tags (in the form they were
 * indexed under) itself. After `scopeMatches` passed, only the indexed pair can still differ here.
 */
function indexedPairMiss(c: CompiledPolicy, ctx: RequestContext): string | undefined {
  const scope = c.policy.scope ?? {};
  for (const field of SCOPE_FIELDS) {
    const scoped = scope[field];
    if (!isExact(scoped)) continue;
    if (ctx[field] !== (field === 'method' ? canonicalMethod(scoped) : scoped)) return `scope:${field}`;
  }
  const tags = scope.tags;
  if (tags) {
    for (const key of Object.keys(tags)) {
      const value = tags[key];
      if (!isExact(value)) continue;
      const has = ctx.tags !== undefined && Object.prototype.hasOwnProperty.call(ctx.tags, key) ? ctx.tags[key] : undefined;
      if (has !== value) return `scope:tags.${key}`;
    }
  }
  return undefined;
}
