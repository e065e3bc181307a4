import type http from 'node:http';
import type { DecisionService } from '../decision/decision-service.js';
import { RlError, invalidField } from '../errors.js';
import { parseRequestContext } from '../model/request-context.js';
import type { Decision } from '../model/decision.js';
import type { HttpAuth } from './auth-guard.js';
import { errorResponse } from './errors.js';
import { SECURITY_HEADERS, requestIdFor } from './headers.js';

type Operation = 'check' | 'acquire' | 'release';
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
 * HttpAuth, parseRequestContext, DecisionService, SECURITY_HEADERS, requestIdFor and errorResponse.
 * Every other request, including compressed bodies and unusual spellings of the paths, goes to Koa,
 * whose decision routes answer identically (test/http/decisions.test.ts runs both).
 */
export function withDecisionFastPath(deps: DecisionFastPathDeps, fallback: http.RequestListener): http.RequestListener {
  return (req, res) => {
    const operation = req.method === 'POST' ? OPERATIONS.get(req.url ?? '') : undefined;
    if (operation === undefined || !isPlainJson(req)) return fallback(req, res);
    const requestId = requestIdFor(header(req, 'x-request-id'));
    const answer = (status: number, body: unknown) => send(res, requestId, status, body);
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
      return answer(...errorAnswer(error, req));
    }
    readBody(req, deps.maxBodyBytes).then(
      async (text) => {
        try {
          const decision = await decide(deps.decisions, operation, parseBody(text));
          answer(200, decision);
        } catch (error) {
          answer(...errorAnswer(error, req));
        }
      },
      (error) => {
        // The rest of an oversized body is not worth reading: answer, then drop the connection.
        res.setHeader('Connection', 'close');
        answer(...errorAnswer(error, req));
      },
    );
  };
}

function decide(decisions: DecisionService, operation: Operation, body: unknown): Promise<Decision> {
  const ctx = parseRequestContext(body);
  return operation === 'check' ? decisions.check(ctx) : operation === 'acquire' ? decisions.acquire(ctx) : decisions.release(ctx);
}

/** JSON or no Content-Type, no Content-Encoding: anything else is the Koa path's (415, inflation). */
function isPlainJson(req: http.IncomingMessage): boolean {
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding !== 'identity') return false;
  const type = req.headers['content-type'];
  if (type === undefined) return !hasBody(req);
  const mediaType = type.split(';', 1)[0].trim().toLowerCase();
  return mediaType === 'application/json' || mediaType === 'application/merge-patch+json';
}

function hasBody(req: http.IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

function readBody(req: http.IncomingMessage, maxBytes: number): Promise<string> {
  const tooLarge = () => new RlError('payload_too_large', `body exceeds the limit of ${maxBytes} bytes (RL_MAX_BODY_BYTES)`);
  const declared = Number(req.headers['content-length']);
  if (declared > maxBytes) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        req.removeAllListeners('data');
        req.pause();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** Same answers as the Koa body parser: strict JSON (objects, arrays), no `__proto__` keys. */
function parseBody(text: string): unknown {
  if (text.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw invalidField('body', `malformed JSON: ${(error as Error).message}`);
  }
  if (typeof value !== 'object' || value === null) {
    throw invalidField('body', 'malformed JSON: only objects and arrays are accepted');
  }
  if (text.includes('__proto__') && hasProtoKey(value)) throw invalidField('body', 'must not contain "__proto__" keys');
  return value;
}

function hasProtoKey(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  for (const key of Object.keys(value)) {
    if (key === '__proto__' || hasProtoKey((value as Record<string, unknown>)[key])) return true;
  }
  return false;
}

function errorAnswer(error: unknown, req: http.IncomingMessage): [number, unknown] {
  const { status, body } = errorResponse(error, { method: req.method ?? 'POST', path: req.url ?? '' });
  return [status, body];
}

/** The security headers as the flat [name, value, …] list writeHead takes: built once, not per response. */
const FIXED_HEADERS: string[] = [...SECURITY_HEADERS.flat(), 'Content-Type', 'application/json; charset=utf-8'];

function send(res: http.ServerResponse, requestId: string, status: number, body: unknown): void {
  const payload = JSON.stringify(body);
  // One writeHead with a flat list: cheaper than a validated setHeader call per header. Headers set
  // earlier (WWW-Authenticate, Connection) are merged in by writeHead.
  res.writeHead(status, [...FIXED_HEADERS, 'X-Request-Id', requestId, 'Content-Length', String(Buffer.byteLength(payload))]);
  res.end(payload);
}

function header(req: http.IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}
