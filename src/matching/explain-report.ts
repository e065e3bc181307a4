import type { RequestContext } from '../model/request-context.js';
import type { RegexBudget } from '../policy/match-regex.js';
import type { CompiledPolicy } from './compiled-policy.js';
import type { PolicyFamily } from './layer-index.js';
import { inHome } from './policy-index.js';
import { COVERS, identityOf, missWhy, outsideRollout, scopeMiss } from './scan.js';

/**
 * Report mode of the matcher, for explain (docs/matching.md): why one compiled policy does or does not
 * cover a request, by the very checks a decision runs (`scopeMiss`, `outsideRollout`), told what
 * refused. The decision path never calls this.
 *
 * Answers undefined when the policy covers the request, else `algorithm`, `not_valid_now`,
 * `scope:<field>`, `scope:tags.<key>`, `match_expr` or `rollout`. `ctx.method` must already be in its
 * canonical form (Matcher.match puts it there).
 */
export function whyNotCovered(c: CompiledPolicy, ctx: RequestContext, family: PolicyFamily, nowMs: number, regexBudget: RegexBudget): string | undefined {
  if (c.family !== family) return 'algorithm';
  const miss = scopeMiss(c, ctx, nowMs, regexBudget);
  if (miss !== COVERS) return missWhy(c, miss);
  // The pair a decision finds the policy by (its bucket) is left out of scopeMiss' checks: a report,
  // which finds no bucket, compares it itself.
  if (!inHome(c, ctx)) return `scope:${c.home}`;
  if (c.rolloutPercent < 100 && outsideRollout(c, identityOf(c, ctx))) return 'rollout';
  return undefined;
}
