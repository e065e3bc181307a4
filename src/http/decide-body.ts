import type { DecisionService, Operation } from '../decision/decision-service.js';
import type { Decision } from '../model/decision.js';
import { parseOperationContext } from '../model/request-context.js';
import { DECISION_SPANS, httpTraceCarrier, itself, type Tracing } from '../observability/tracing.js';

/**
 * A decision request's parsed body, validated and decided, inside its span when tracing is on: what
 * both HTTP paths (the fast path and the Koa routes) do with a body, so they cannot drift apart.
 * Throws (or rejects) what validation and the DecisionService throw.
 */
export function decideBody(
  decisions: DecisionService,
  tracing: Tracing | undefined,
  operation: Operation,
  body: unknown,
  headers: Record<string, string | string[] | undefined>,
): Decision | Promise<Decision> {
  // Tracing off: no closure, no call beyond the decision itself.
  if (tracing === undefined) return decisions.decideNow(operation, parseOperationContext(operation, body));
  return tracing.decision(DECISION_SPANS[operation], httpTraceCarrier(headers), () => decisions.decideNow(operation, parseOperationContext(operation, body)), itself);
}
