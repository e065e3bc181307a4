import type http from 'node:http';
import zlib from 'node:zlib';
import { RlError, invalidField } from '../errors.js';
import { MAX_JSON_DEPTH, jsonShapeProblem } from '../util/json-shape.js';
import { jsonSyntaxError } from '../util/json-syntax.js';
import { lineColumnOf } from '../util/source-position.js';

/**
 * The one reader of JSON request bodies, used by the decision fast path and by the Koa app alike, so
 * both refuse the same bodies with the same messages: a size limit counted on the decoded bytes (a
 * small compressed body cannot expand past it), a body that is not what its Content-Encoding says,
 * malformed or non-container JSON, nesting deeper than MAX_JSON_DEPTH and `__proto__` keys. Nothing in
 * here recurses, so no input can overflow the stack.
 */

/** Both are JSON; merge-patch is what PATCH sends. */
export const JSON_TYPES = ['application/json', 'application/merge-patch+json'];

/** The errors a body is refused with. */
export const bodyErrors = {
  tooLarge: (maxBytes: number) => new RlError('payload_too_large', `body exceeds the limit of ${maxBytes} bytes (RL_MAX_BODY_BYTES)`),
  malformed: (problem: string) => invalidField('body', `malformed JSON: ${problem}`),
  protoKey: () => invalidField('body', 'must not contain "__proto__" keys'),
  tooDeep: () => invalidField('body', `is nested more than ${MAX_JSON_DEPTH} levels deep`),
  badEncoding: (encoding: string, problem: string) => invalidField('body', `is not valid ${encoding} data (Content-Encoding: ${encoding}): ${problem}`),
  unsupportedEncoding: (encoding: string) =>
    new RlError('unsupported_media_type', `Content-Encoding "${encoding}" is not supported (use gzip, deflate, br or identity)`),
  aborted: () => new RlError('invalid_argument', 'request aborted'),
};

/** Whether the request declares a body (chunked, or a non-zero Content-Length). */
export function hasBody(headers: http.IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

type Decoder = () => zlib.Gunzip | zlib.Inflate | zlib.BrotliDecompress;
const DECODERS = new Map<string, Decoder>([
  ['gzip', () => zlib.createGunzip()],
  ['x-gzip', () => zlib.createGunzip()],
  ['deflate', () => zlib.createInflate()],
  ['br', () => zlib.createBrotliDecompress()],
]);

/**
 * Reads and parses the body of `req`, calling `done` exactly once: with the parsed value (undefined
 * for an empty or blank body) or with the RlError to answer. `error.closeConnection` is set when the
 * rest of the request was not read (an oversized body): the answer must close the connection.
 *
 * Callback-shaped because the decision fast path avoids promises per request; Koa wraps it.
 */
export function readJsonBody(
  req: http.IncomingMessage,
  maxBytes: number,
  done: (error: BodyError | undefined, value: unknown) => void,
): void {
  // A declared length over the limit is refused before a byte is read.
  if (Number(req.headers['content-length']) > maxBytes) return done(oversized(req, maxBytes), undefined);

  const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  const decoder = encoding === 'identity' || encoding === '' ? undefined : DECODERS.get(encoding);
  if (decoder === undefined && encoding !== 'identity' && encoding !== '') {
    req.resume();
    return done(bodyErrors.unsupportedEncoding(encoding), undefined);
  }

  if (decoder === undefined) {
    readPlainBody(req, maxBytes, done);
    return;
  }

  let finished = false;
  const finish = (error: BodyError | undefined, value?: unknown) => {
    if (finished) return;
    finished = true;
    done(error, value);
  };

  const chunks: Buffer[] = [];
  let size = 0;
  const onDecoded = (chunk: Buffer) => {
    size += chunk.length;
    if (size > maxBytes) return finish(oversized(req, maxBytes));
    chunks.push(chunk);
  };
  const onEnd = () => {
    if (finished) return;
    const text = chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8');
    let value: unknown;
    try {
      value = parseJsonText(text);
    } catch (error) {
      return finish(error as RlError);
    }
    finish(undefined, value);
  };
  // The caller went away in the middle of its body: a 400 (request aborted), not an error of ours.
  req.on('error', () => finish(aborted()));
  const decoding = decoder();
  decoding.on('data', onDecoded);
  decoding.on('end', onEnd);
  decoding.on('error', (error: Error) => {
    req.unpipe(decoding);
    req.resume();
    finish(bodyErrors.badEncoding(encoding, error.message));
  });
  req.pipe(decoding);
}

function aborted(): BodyError {
  return Object.assign(bodyErrors.aborted(), { closeConnection: true });
}

/**
 * An uncompressed body (every decision call): the same rules as the decoding path above, read with
 * module-level listeners (an event emitter calls them with the request as `this`) and the state in one
 * object on the request, instead of four closures and an array per request. The common body is one
 * chunk, decoded without Buffer.concat.
 */
class PlainBodyRead {
  finished = false;
  size = 0;
  first: Buffer | undefined = undefined;
  rest: Buffer[] | undefined = undefined;

  constructor(
    readonly maxBytes: number,
    readonly done: (error: BodyError | undefined, value: unknown) => void,
  ) {}

  finish(error: BodyError | undefined, value: unknown): void {
    if (this.finished) return;
    this.finished = true;
    this.first = this.rest = undefined;
    this.done(error, value);
  }
}

const PLAIN_BODY_READ = Symbol('plainBodyRead');
type ReadingRequest = http.IncomingMessage & { [PLAIN_BODY_READ]?: PlainBodyRead };

function readPlainBody(req: ReadingRequest, maxBytes: number, done: (error: BodyError | undefined, value: unknown) => void): void {
  req[PLAIN_BODY_READ] = new PlainBodyRead(maxBytes, done);
  // The caller went away in the middle of its body: a 400 (request aborted), not an error of ours.
  req.on('error', onPlainError);
  req.on('data', onPlainData);
  req.on('end', onPlainEnd);
}

function onPlainData(this: ReadingRequest, chunk: Buffer): void {
  const read = this[PLAIN_BODY_READ]!;
  if (read.finished) return;
  read.size += chunk.length;
  if (read.size > read.maxBytes) return read.finish(oversized(this, read.maxBytes), undefined);
  if (read.first === undefined) read.first = chunk;
  else (read.rest ??= [read.first]).push(chunk);
}

function onPlainEnd(this: ReadingRequest): void {
  const read = this[PLAIN_BODY_READ]!;
  if (read.finished) return;
  const text = read.rest !== undefined ? Buffer.concat(read.rest).toString('utf8') : read.first !== undefined ? read.first.toString('utf8') : '';
  let value: unknown;
  try {
    value = parseJsonText(text);
  } catch (error) {
    return read.finish(error as RlError, undefined);
  }
  read.finish(undefined, value);
}

function onPlainError(this: ReadingRequest): void {
  this[PLAIN_BODY_READ]!.finish(aborted(), undefined);
}

export type BodyError = RlError & { closeConnection?: boolean };

/** The rest of an oversized body is not worth reading: stop reading and ask for the connection to close. */
function oversized(req: http.IncomingMessage, maxBytes: number): BodyError {
  req.unpipe();
  req.removeAllListeners('data');
  req.pause();
  return Object.assign(bodyErrors.tooLarge(maxBytes), { closeConnection: true });
}

const OPENING_BRACE = 0x7b;

/** "at line 2, column 5: unexpected "}"": where JSON.parse gave up, for a reader of the body. */
function syntaxErrorOf(text: string): string | undefined {
  const syntax = jsonSyntaxError(text);
  if (syntax === undefined) return undefined;
  const { line, column } = lineColumnOf(text, syntax.offset);
  return `at line ${line}, column ${column}: ${syntax.problem}`;
}

/** Strict JSON (objects and arrays only), depth-bounded, without `__proto__` keys; blank text is no body. */
export function parseJsonText(text: string): unknown {
  // Only an empty or blank body means "no body". One that opens with `{` (every real request) is
  // neither, so it skips the trim, a pass over the whole text.
  if (text.charCodeAt(0) !== OPENING_BRACE && text.trim() === '') return undefined;
  let value: unknown;
  try {
    // V8's JSON.parse does not recurse on the native stack, so deep nesting cannot overflow it.
    value = JSON.parse(text);
  } catch (error) {
    throw bodyErrors.malformed(syntaxErrorOf(text) ?? (error as Error).message);
  }
  if (typeof value !== 'object' || value === null) {
    throw bodyErrors.malformed('only objects and arrays are accepted');
  }
  // A `__proto__` key comes from text that spells it, plainly or with \u escapes (`"\u005f_proto__"`).
  const mayHaveProtoKey = text.includes('__proto__') || text.includes('\\u');
  const problem = jsonShapeProblem(value, mayHaveProtoKey);
  if (problem === 'too_deep') throw bodyErrors.tooDeep();
  if (problem === 'proto_key') throw bodyErrors.protoKey();
  return value;
}
