import type http from 'node:http';
import type { DecisionService, Operation } from '../decision/decision-service.js';
import type { Decision } from '../model/decision.js';
import type { LayerVerdict } from '../schema/decision.js';
import type { Orgs } from '../model/org-scope.js';
import type { Tracing } from '../observability/tracing.js';
import type { HttpAuth } from './auth-guard.js';
import { decideBody } from './decide-body.js';
import { JSON_TYPES, hasBody, readJsonBody } from './json-body.js';
import { errorResponse } from './errors.js';
import { headersForMethod, requestIdFor } from './headers.js';

/** The operation of a decision path as the fast path serves it, spelled exactly (string compares: no hash of the URL). */
function operationOf(url: string | undefined): Operation | undefined {
  switch (url) {
    case '/rl/v1/check':
      return 'check';
    case '/rl/v1/acquire':
      return 'acquire';
    case '/rl/v1/release':
      return 'release';
    case '/rl/v1/refund':
      return 'refund';
    default:
      return undefined;
  }
}

export interface DecisionFastPathDeps {
  decisions: DecisionService;
  auth: HttpAuth;
  maxBodyBytes: number;
  /** OpenTelemetry spans per decision (absent: tracing off, nothing is called). */
  tracing?: Tracing;
}

/**
 * The four decision endpoints served straight on node:http, in front of the Koa app.
 *
 * A rate limiter sits in front of every request its users serve, and Koa's general machinery
 * (middleware chain, routers, body parser, response helpers) cost several times the decision itself
 * (BENCHMARKS.md). This path handles the common shape — `POST /rl/v1/{check,acquire,release,refund}` with a
 * JSON (or no) Content-Type and no Content-Encoding — with the same pieces the Koa path uses:
 * HttpAuth, decideBody (validation, the DecisionService, the span), headersForMethod, requestIdFor and errorResponse.
 * Every other request, including compressed bodies and unusual spellings of the paths, goes to Koa,
 * whose decision routes answer identically (test/http/decisions.test.ts runs both).
 *
 * Written for the per-request cost (it is most of a decision's CPU over HTTP): plain callbacks rather
 * than promise wrappers and async functions, no per-request closures beyond the body's `done` and the
 * decision's `then`, and the fixed headers prebuilt.
 */
export function withDecisionFastPath(deps: DecisionFastPathDeps, fallback: http.RequestListener): http.RequestListener {
  const authCall = new AuthCall();
  return (req, res) => {
    const operation = req.method === 'POST' ? operationOf(req.url) : undefined;
    if (operation === undefined) return fallback(req, res);
    const headers = req.headers;
    if (!isPlainJson(headers)) return fallback(req, res);
    const requestId = requestIdFor(first(headers['x-request-id']));
    let orgs: Orgs;
    try {
      orgs = deps.auth.check(authCall.of(req.url!, first(headers['x-api-key']), first(headers['authorization']), requestId, res))?.orgs;
    } catch (error) {
      req.resume();
      return sendError(req, res, requestId, error);
    } finally {
      authCall.res = undefined;
    }
    readBody(deps, operation, orgs, req, res, requestId);
  };
}

/**
 * The argument of HttpAuth.check, one object per listener refilled for each request instead of an
 * object and a `setHeader` closure per request: check reads it synchronously and keeps nothing, and
 * the listener lets go of the response once check returns.
 */
class AuthCall {
  readonly method = 'POST';
  path = '';
  apiKey = '';
  authorization = '';
  requestId = '';
  res: http.ServerResponse | undefined = undefined;

  of(path: string, apiKey: string | undefined, authorization: string | undefined, requestId: string, res: http.ServerResponse): this {
    this.path = path;
    this.apiKey = apiKey ?? '';
    this.authorization = authorization ?? '';
    this.requestId = requestId;
    this.res = res;
    return this;
  }

  setHeader(name: string, value: string): void {
    this.res!.setHeader(name, value);
  }
}

/** Reads the body with the reader the Koa path uses, then decides and answers. */
function readBody(
  deps: DecisionFastPathDeps,
  operation: Operation,
  orgs: Orgs,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  requestId: string,
): void {
  readJsonBody(req, deps.maxBodyBytes, (error, body) => {
    if (error === undefined) return decideAndAnswer(deps, operation, orgs, body, req, res, requestId);
    if (error.closeConnection) res.setHeader('Connection', 'close');
    sendError(req, res, requestId, error);
  });
}

function decideAndAnswer(
  deps: DecisionFastPathDeps,
  operation: Operation,
  orgs: Orgs,
  body: unknown,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  requestId: string,
): void {
  let decided: Decision | Promise<Decision>;
  try {
    decided = decideBody(deps.decisions, deps.tracing, operation, body, req.headers, orgs);
  } catch (error) {
    return sendError(req, res, requestId, error);
  }
  // In memory mode the decision is already made: answer now, without a microtask and two closures.
  if (!(decided instanceof Promise)) return send(res, requestId, 200, decisionJson(decided));
  decided.then(
    (decision) => send(res, requestId, 200, decisionJson(decision)),
    (error: unknown) => sendError(req, res, requestId, error),
  );
}

/** JSON or no Content-Type, no Content-Encoding: anything else is the Koa path's (415, inflation). */
function isPlainJson(headers: http.IncomingHttpHeaders): boolean {
  const encoding = headers['content-encoding'];
  if (encoding !== undefined && encoding !== 'identity') return false;
  const type = headers['content-type'];
  if (type === undefined) return !hasBody(headers);
  if (type === 'application/json') return true; // what nearly every client sends: no parsing needed
  return JSON_TYPES.includes(type.split(';', 1)[0].trim().toLowerCase());
}

function sendError(req: http.IncomingMessage, res: http.ServerResponse, requestId: string, error: unknown): void {
  const { status, body } = errorResponse(error, { method: req.method ?? 'POST', path: req.url ?? '' });
  send(res, requestId, status, JSON.stringify(body));
}

/**
 * The fields decisionJson writes, in its order. Typed so that a field added to Decision and not
 * written here fails to compile; the tests check decisionJson against this list.
 */
export const DECISION_JSON_FIELDS = {
  allowed: true,
  action: true,
  reason: true,
  matched_policy_id: true,
  remaining: true,
  retry_after: true,
  reset_after: true,
  limit: true,
  window: true,
  shadow_mode: true,
  metadata: true,
  layers: true,
} as const satisfies Record<keyof Decision, true>;

/**
 * A Decision as JSON, written field by field: the text JSON.stringify gives for the decisions
 * DecisionService builds (which list their fields in this order), at a fraction of its cost, which
 * shows on every answer. The strings that repeat from answer to answer (action, reason, policy id) are
 * quoted once and remembered; numbers are written as JSON writes them (non-finite ones as null); an
 * empty metadata object (the common case) is written without a call.
 */
export function decisionJson(d: Decision): string {
  return (
    (d.allowed ? '{"allowed":true,"action":' : '{"allowed":false,"action":') +
    quoted(d.action) +
    ',"reason":' +
    quoted(d.reason) +
    ',"matched_policy_id":' +
    quoted(d.matched_policy_id) +
    ',"remaining":' +
    jsonNumber(d.remaining) +
    ',"retry_after":' +
    jsonNumber(d.retry_after) +
    ',"reset_after":' +
    jsonNumber(d.reset_after) +
    ',"limit":' +
    jsonNumber(d.limit) +
    ',"window":' +
    jsonNumber(d.window) +
    (d.shadow_mode ? ',"shadow_mode":true,"metadata":' : ',"shadow_mode":false,"metadata":') +
    (isEmpty(d.metadata) ? '{}' : JSON.stringify(d.metadata)) +
    // Only a decision over two or more layers has them.
    (d.layers === undefined ? '}' : ',"layers":' + layersJson(d.layers) + '}')
  );
}

/** The fields layerJson writes, in its order (as DECISION_JSON_FIELDS for a decision). */
export const LAYER_JSON_FIELDS = {
  layer: true,
  policy_id: true,
  allowed: true,
  action: true,
  reason: true,
  remaining: true,
  limit: true,
  window: true,
  reset_after: true,
  retry_after: true,
} as const satisfies Record<keyof LayerVerdict, true>;

/** Every layer's verdict, as decisionJson writes a decision: field by field, the repeating strings quoted once. */
function layersJson(layers: readonly LayerVerdict[]): string {
  let text = '[';
  for (let i = 0; i < layers.length; i++) text += (i === 0 ? '' : ',') + layerJson(layers[i]);
  return text + ']';
}

function layerJson(v: LayerVerdict): string {
  return (
    '{"layer":' +
    quoted(v.layer) +
    ',"policy_id":' +
    quoted(v.policy_id) +
    // What nearly every layer of an admitted check says, written at once.
    (v.allowed && v.action === 'allow' && v.reason === 'within_limit'
      ? ',"allowed":true,"action":"allow","reason":"within_limit"'
      : (v.allowed ? ',"allowed":true,"action":' : ',"allowed":false,"action":') + quoted(v.action) + ',"reason":' + quoted(v.reason)) +
    ',"remaining":' +
    jsonNumber(v.remaining) +
    ',"limit":' +
    jsonNumber(v.limit) +
    ',"window":' +
    jsonNumber(v.window) +
    ',"reset_after":' +
    jsonNumber(v.reset_after) +
    ',"retry_after":' +
    jsonNumber(v.retry_after) +
    '}'
  );
}

function jsonNumber(n: number): string {
  return Number.isFinite(n) ? '' + n : 'null';
}

/**
 * Strings as JSON quotes them, remembered: actions and reasons are a handful of server-defined
 * names and policy ids are as many as the policies. Bounded, so odd strings cannot pin memory: past
 * QUOTED_CAP distinct strings the rest are quoted on every call.
 */
const QUOTED_CAP = 4096;
const quotedStrings = new Map<string, string>();

function quoted(s: string): string {
  const known = quotedStrings.get(s);
  if (known !== undefined) return known;
  const text = JSON.stringify(s);
  if (quotedStrings.size < QUOTED_CAP) quotedStrings.set(s, text);
  return text;
}

function isEmpty(metadata: Record<string, string>): boolean {
  for (const key in metadata) if (Object.prototype.hasOwnProperty.call(metadata, key)) return false;
  return true;
}

/** The headers of every answer to a POST and the Content-Type, as the flat [name, value, …] list writeHead takes: built once. */
const FIXED_HEADERS: readonly string[] = [...headersForMethod('POST').flat(), 'Content-Type', 'application/json; charset=utf-8'];

/**
 * FIXED_HEADERS followed by X-Request-Id and Content-Length, whose values `send` fills in: one array
 * for every answer, not one per answer. Safe because writeHead reads the list synchronously and keeps
 * no reference to it (it renders the header block, or copies the pairs into setHeader's store).
 */
const ANSWER_HEADERS: string[] = [...FIXED_HEADERS, 'X-Request-Id', '', 'Content-Length', ''];
const REQUEST_ID_AT = FIXED_HEADERS.length + 1;
const LENGTH_AT = FIXED_HEADERS.length + 3;

function send(res: http.ServerResponse, requestId: string, status: number, payload: string): void {
  // One writeHead with a flat list: cheaper than a validated setHeader call per header. Headers set
  // earlier (WWW-Authenticate, Connection) are merged in by writeHead.
  ANSWER_HEADERS[REQUEST_ID_AT] = requestId;
  ANSWER_HEADERS[LENGTH_AT] = '' + Buffer.byteLength(payload);
  res.writeHead(status, ANSWER_HEADERS);
  res.end(payload);
}

/** A request header's value; the first, should node:http have kept several (it keeps a list for set-cookie only). */
function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
