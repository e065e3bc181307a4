import type { DecisionService, Operation } from '../decision/decision-service.js';
import { RlError } from '../errors.js';
import type { Decision } from '../model/decision.js';
import { scopeDecisionOrg, type Orgs } from '../model/org-scope.js';
import { parseOperationContext, type RequestContext } from '../model/request-context.js';
import { DECISION_SPANS, httpTraceCarrier, itself, type Tracing } from '../observability/tracing.js';

/** README "The request": an empty body on a decision endpoint is a 400 (a client that sent nothing more likely lost its body than meant "no fields"). */
export const EMPTY_DECISION_BODY_MESSAGE = 'empty body: send `{}` for an empty context';

/**
 * The RequestContext of a decision request's parsed body (undefined: the body was empty or blank): what
 * every HTTP decision endpoint (the fast path, the Koa routes and the sidecar) reads, so all refuse the
 * same bodies with the same messages.
 */
export function decisionContextOf(operation: Operation, body: unknown): RequestContext {
  if (body === undefined) throw new RlError('invalid_argument', EMPTY_DECISION_BODY_MESSAGE, 'body');
  return parseOperationContext(operation, body);
}

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
  if (tracing === undefined) return decisions.decideNow(operation, scopeDecisionOrg(orgs, decisionContextOf(operation, body)));
  return tracing.decision(
    DECISION_SPANS[operation],
    httpTraceCarrier(headers),
    () => decisions.decideNow(operation, scopeDecisionOrg(orgs, decisionContextOf(operation, body))),
    itself,
  );
}
