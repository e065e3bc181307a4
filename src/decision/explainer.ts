import { Matcher, type CompiledPolicy, type LayerMatch, type PolicyFamily } from '../matching/matcher.js';
import { whyNotCovered } from '../matching/explain-report.js';
import type { MatcherSource } from '../matching/live-matcher.js';
import type { Actor } from '../model/org-scope.js';
import type { RequestContext } from '../model/request-context.js';
import { RegexBudget } from '../policy/match-regex.js';
import type { Policy } from '../policy/types.js';
import type { PolicyService } from '../policy-service/policy-service.js';
import type { ExplainCandidate, ExplainLayer, Explanation } from '../schema/explain.js';
import type { Operation } from './decision-service.js';

/**
 * POST /rl/v1/explain (docs/matching.md "Asking which policy decides"): for a request context, every
 * layer's candidates among the policies the caller may read, whether each covers the request and why
 * not, and which one wins. Nothing is counted.
 *
 * The winners are the matcher's own answer for the request (Matcher.match, as a decision asks it), and
 * each candidate's coverage is the matcher's report mode (matching/explain-report.ts) over the same
 * compiled policy: explain cannot disagree with a decision made at the same moment.
 */
export class Explainer {
  private readonly now: () => number;

  constructor(
    private readonly matchers: MatcherSource,
    private readonly policies: Pick<PolicyService, 'list'>,
    now?: () => number,
  ) {
    this.now = now ?? Date.now;
  }

  explain(ctx: RequestContext, decision: Operation, caller?: Actor): Explanation {
    const matcher = this.matchers.current();
    const nowMs = this.now();
    const family: PolicyFamily = decision === 'acquire' || decision === 'release' ? 'concurrency' : 'rate';
    const match = matcher.match(ctx, family, nowMs);
    const winners = new Map<string, LayerMatch>((match.layers ?? [match]).map((m) => [m.layer, m]));
    const budget = new RegexBudget();
    const byLayer = new Map<string, ExplainCandidate[]>();
    const add = (layer: string, candidate: ExplainCandidate) => {
      const list = byLayer.get(layer);
      if (list) list.push(candidate);
      else byLayer.set(layer, [candidate]);
    };
    const disabled: Policy[] = [];
    for (const policy of this.policies.list(caller)) {
      const c = matcher.get(policy.policy_id);
      if (c === undefined) {
        // Not compiled: disabled (a policy that cannot be compiled never matches and is logged at load).
        if (!policy.enabled) disabled.push(policy);
        continue;
      }
      const why = whyNotCovered(c, ctx, family, nowMs, budget);
      add(c.layer, candidateOf(c, why, isWinner(winners.get(c.layer), c)));
    }
    // A disabled policy's specificity, by the matcher's own compile of it switched on.
    const compiled = Matcher.build(disabled.map((p) => ({ ...p, enabled: true })));
    for (const policy of disabled) {
      const c = compiled.get(policy.policy_id);
      if (c !== undefined) add(c.layer, { ...candidateOf(c, 'disabled', false), priority: policy.priority });
    }
    const layers: ExplainLayer[] = [];
    for (const layer of [...byLayer.keys()].sort(compareBytes)) {
      const candidates = byLayer.get(layer)!.sort(inWinnerOrder);
      const winner = winners.get(layer)?.enforce?.compiled.policy.policy_id;
      // A winner the caller may not read is not named.
      layers.push({ layer, winner: winner !== undefined && candidates.some((c) => c.policy_id === winner) ? winner : null, candidates });
    }
    return { layers };
  }
}

function candidateOf(c: CompiledPolicy, why: string | undefined, wins: boolean): ExplainCandidate {
  const candidate: ExplainCandidate = { policy_id: c.policy.policy_id, covers: why === undefined, specificity: c.specificity, priority: c.policy.priority, wins };
  if (why !== undefined) candidate.why_not = why;
  return candidate;
}

function isWinner(layer: LayerMatch | undefined, c: CompiledPolicy): boolean {
  return layer !== undefined && (layer.enforce?.compiled === c || layer.shadow?.compiled === c);
}

/** The winner order: highest specificity, then highest priority, then smallest policy_id. */
function inWinnerOrder(a: ExplainCandidate, b: ExplainCandidate): number {
  return b.specificity - a.specificity || b.priority - a.priority || compareBytes(a.policy_id, b.policy_id);
}

function compareBytes(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
