import type { DecisionService, Operation } from '../decision/decision-service.js';
import type { Decision } from '../model/decision.js';
import { scopeDecisionOrg, type Orgs } from '../model/org-scope.js';
import { parseOperationContext } from '../model/request-context.js';
import { DECISION_SPANS, httpTraceCarrier, itself, type Tracing } from '../observability/tracing.js';

/**
 * A decision request's parsed body, validated and decided, inside its span when tracing is on: what
 * both HTTP paths (the fast path and the Koa routes) do with a body, so they cannot drift apart.
 * `orgs`: the caller's organisations (model/org-scope.ts; undefined = unrestricted).
 * Throws (or rejects) what validation, the organisation check and the DecisionService throw.
 */
export function decideBody(
  decisions: DecisionService,
  tracing: Tracing | undefined,
  operation: Operation,
  body: unknown,
  headers: Record<string, string | string[] | undefined>,
  orgs: Orgs,
): Decision | Promise<Decision> {
  // Tracing off: no closure, no call beyond the decision itself.
  if (tracing === undefined) return decisions.decideNow(operation, scopeDecisionOrg(orgs, parseOperationContext(operation, body)));
  return tracing.decision(
    DECISION_SPANS[operation],
    httpTraceCarrier(headers),
    () => decisions.decideNow(operation, scopeDecisionOrg(orgs, parseOperationContext(operation, body))),
    itself,
  );
}
