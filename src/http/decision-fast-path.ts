import type http from 'node:http';
import type { DecisionService, Operation } from '../decision/decision-service.js';
import { RlError } from '../errors.js';
import { parseRequestContext } from '../model/request-context.js';
import type { Decision } from '../model/decision.js';
import type { HttpAuth } from './auth-guard.js';
import { JSON_TYPES, bodyErrors, hasBody } from './body.js';
import { errorResponse } from './errors.js';
import { headersForMethod, requestIdFor } from './headers.js';

const OPERATIONS = new Map<string, Operation>([
  ['/rl/v1/check', 'check'],
  ['/rl/v1/acquire', 'acquire'],
  ['/rl/v1/release', 'release'],
]);

export interface DecisionFastPathDeps {
  decisions: DecisionService;
  auth: HttpAuth;
  maxBodyBytes: number;
}

/**
 * The three decision endpoints served straight on node:http, in front of the Koa app.
 *
 * A rate limiter sits in front of every request its users serve, and Koa's general machinery
 * (middleware chain, routers, body parser, response helpers) cost several times the decision itself
 * (BENCHMARKS.md). This path handles the common shape — `POST /rl/v1/{check,acquire,release}` with a
 * JSON (or no) Content-Type and no Content-Encoding — with the same pieces the Koa path uses:
 * HttpAuth, parseRequestContext, DecisionService, headersForMethod, requestIdFor and errorResponse.
 * Every other request, including compressed bodies and unusual spellings of the paths, goes to Koa,
 * whose decision routes answer identically (test/http/decisions.test.ts runs both).
 *
 * Written for the per-request cost (it is most of a decision's CPU over HTTP): plain callbacks rather
 * than promise wrappers and async functions, no per-request closures beyond the auth call's
 * `setHeader`, the body's stream listeners and the decision's `then`, and the fixed headers prebuilt.
 */
export function withDecisionFastPath(deps: DecisionFastPathDeps, fallback: http.RequestListener): http.RequestListener {
  return (req, res) => {
    const operation = req.method === 'POST' ? OPERATIONS.get(req.url ?? '') : undefined;
    if (operation === undefined || !isPlainJson(req.headers)) return fallback(req, res);
    const requestId = requestIdFor(header(req, 'x-request-id'));
    try {
      deps.auth.check({
        method: 'POST',
        path: req.url!,
        apiKey: header(req, 'x-api-key') ?? '',
        authorization: header(req, 'authorization') ?? '',
        requestId,
        setHeader: (name, value) => res.setHeader(name, value),
      });
    } catch (error) {
      req.resume();
      return sendError(req, res, requestId, error);
    }
    readBody(deps, operation, req, res, requestId);
  };
}

/**
 * Collects the body (refusing more than `maxBodyBytes`, declared or sent), then decides and answers.
 * Exactly one answer per request: `answered` stops a stream error after the end, or after an
 * oversized body was refused, from answering a second time.
 */
function readBody(
  deps: DecisionFastPathDeps,
  operation: Operation,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  requestId: string,
): void {
  const maxBytes = deps.maxBodyBytes;
  if (Number(req.headers['content-length']) > maxBytes) return refuseOversized(req, res, requestId, maxBytes);
  const chunks: Buffer[] = [];
  let size = 0;
  let answered = false;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > maxBytes) {
      req.removeAllListeners('data');
      req.pause();
      answered = true;
      refuseOversized(req, res, requestId, maxBytes);
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (answered) return;
    answered = true;
    const text = chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8');
    decideAndAnswer(deps.decisions, operation, text, req, res, requestId);
  });
  req.on('error', () => {
    // The caller went away in the middle of its body. Answer as Koa's body parser does (400 request
    // aborted), not as an unexpected error: a 500 would be logged as a bug of ours.
    if (answered) return;
    answered = true;
    res.setHeader('Connection', 'close');
    sendError(req, res, requestId, new RlError('invalid_argument', 'request aborted'));
  });
}

/** The rest of an oversized body is not worth reading: answer 413, then drop the connection. */
function refuseOversized(req: http.IncomingMessage, res: http.ServerResponse, requestId: string, maxBytes: number): void {
  res.setHeader('Connection', 'close');
  sendError(req, res, requestId, bodyErrors.tooLarge(maxBytes));
}

function decideAndAnswer(
  decisions: DecisionService,
  operation: Operation,
  text: string,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  requestId: string,
): void {
  let decided: Decision | Promise<Decision>;
  try {
    decided = decisions.decideNow(operation, parseRequestContext(parseBody(text)));
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

const OPENING_BRACE = 0x7b;

/** Same answers as the Koa body parser: strict JSON (objects, arrays), no `__proto__` keys. */
function parseBody(text: string): unknown {
  // Only an empty or blank body means "no body". One that opens with `{` (every real request) is
  // neither, so it skips the trim, a pass over the whole text.
  if (text.charCodeAt(0) !== OPENING_BRACE && text.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw bodyErrors.malformed((error as Error).message);
  }
  if (typeof value !== 'object' || value === null) {
    throw bodyErrors.malformed('only objects and arrays are accepted');
  }
  // A `__proto__` key comes from text that spells it, plainly or with \u escapes (`"\u005f_proto__"`):
  // only those bodies need the walk.
  if ((text.includes('__proto__') || text.includes('\\u')) && hasProtoKey(value)) {
    throw bodyErrors.protoKey();
  }
  return value;
}

function hasProtoKey(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  for (const key of Object.keys(value)) {
    if (key === '__proto__' || hasProtoKey((value as Record<string, unknown>)[key])) return true;
  }
  return false;
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
  shadow_mode: true,
  metadata: true,
} as const satisfies Record<keyof Decision, true>;

/**
 * A Decision as JSON, written field by field: the text JSON.stringify gives for the decisions
 * DecisionService builds (which list their fields in this order), at about two thirds of its cost,
 * which shows on every answer. Strings are quoted by JSON.stringify; numbers are written as JSON
 * writes them (non-finite ones as null).
 */
export function decisionJson(d: Decision): string {
  return (
    `{"allowed":${d.allowed ? 'true' : 'false'},"action":${JSON.stringify(d.action)},"reason":${JSON.stringify(d.reason)}` +
    `,"matched_policy_id":${JSON.stringify(d.matched_policy_id)},"remaining":${jsonNumber(d.remaining)}` +
    `,"retry_after":${jsonNumber(d.retry_after)},"reset_after":${jsonNumber(d.reset_after)},"limit":${jsonNumber(d.limit)}` +
    `,"shadow_mode":${d.shadow_mode ? 'true' : 'false'},"metadata":${JSON.stringify(d.metadata)}}`
  );
}

function jsonNumber(n: number): string {
  return Number.isFinite(n) ? String(n) : 'null';
}

/** The headers of every answer to a POST and the Content-Type, as the flat [name, value, …] list writeHead takes: built once. */
const FIXED_HEADERS: readonly string[] = [...headersForMethod('POST').flat(), 'Content-Type', 'application/json; charset=utf-8'];

function send(res: http.ServerResponse, requestId: string, status: number, payload: string): void {
  // One writeHead with a flat list: cheaper than a validated setHeader call per header. Headers set
  // earlier (WWW-Authenticate, Connection) are merged in by writeHead.
  res.writeHead(status, FIXED_HEADERS.concat('X-Request-Id', requestId, 'Content-Length', String(Buffer.byteLength(payload))));
  res.end(payload);
}

function header(req: http.IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}
