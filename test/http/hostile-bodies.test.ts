import { expect } from 'chai';
import fc from 'fast-check';
import net from 'node:net';
import zlib from 'node:zlib';
import * as grpc from '@grpc/grpc-js';
import { HTTP_PATHS, serveDecisions } from '../support/http-listeners.js';
import type { TestServer } from '../support/http.js';
import { makePolicy } from '../support/policies.js';
import { startGrpc, type GrpcFixture } from '../grpc/helpers.js';
import { MAX_JSON_DEPTH } from '../../src/util/json-shape.js';

/**
 * Hostile bodies sent to both HTTP paths (the Koa app alone, and the server listener whose decision
 * fast path answers first) and to gRPC: every answer is a 4xx (INVALID_ARGUMENT on gRPC) or a
 * decision, identical on both HTTP paths, never a 5xx, and the server keeps answering.
 */

const MAX_BODY_BYTES = 512 * 1024;

interface RawAnswer {
  status: number;
  body: string;
}

/**
 * One request over a fresh socket, written byte for byte (so Content-Length may lie), read until the
 * server closes or one full answer arrived. `status` 0: the server closed without answering.
 */
function rawRequest(url: string, head: string, body: Buffer, declaredLength?: number): Promise<RawAnswer> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1');
    const received: Buffer[] = [];
    let settled = false;
    const settle = () => {
      if (settled) return;
      settled = true;
      socket.destroy();
      const text = Buffer.concat(received).toString('utf8');
      const match = /^HTTP\/1\.1 (\d{3})/.exec(text);
      const split = text.indexOf('\r\n\r\n');
      resolve({ status: match ? Number(match[1]) : 0, body: split >= 0 ? text.slice(split + 4) : '' });
    };
    socket.on('data', (chunk) => {
      received.push(chunk);
      const text = Buffer.concat(received).toString('utf8');
      const length = /content-length: (\d+)/i.exec(text);
      const split = text.indexOf('\r\n\r\n');
      if (length && split >= 0 && Buffer.byteLength(text.slice(split + 4)) >= Number(length[1])) settle();
    });
    socket.on('end', settle);
    socket.on('close', settle);
    socket.on('error', (error) => (received.length > 0 ? settle() : reject(error)));
    const length = declaredLength ?? body.length;
    socket.write(`${head}Host: test\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n`);
    // A caller that declared more than it sends gives up (half-closes); the others wait for the answer.
    if (length > body.length) socket.end(body);
    else socket.write(body);
  });
}

function post(url: string, path: string, body: Buffer, headers: Record<string, string> = {}, declaredLength?: number): Promise<RawAnswer> {
  const lines = Object.entries({ 'Content-Type': 'application/json', ...headers })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return rawRequest(url, `POST ${path} HTTP/1.1\r\n${lines}`, body, declaredLength);
}

function nested(depth: number, leaf: string, kind: 'object' | 'array'): string {
  return kind === 'object' ? '{"a":'.repeat(depth) + leaf + '}'.repeat(depth) : '['.repeat(depth) + leaf + ']'.repeat(depth);
}

/** Both HTTP paths side by side, over the same (empty) policy set, so decisions answer alike. */
async function serveBoth(): Promise<TestServer[]> {
  const policies = [makePolicy({ policy_id: 'never', scope: { service: 'never-sent' }, algorithm: { type: 'fixed_window', limit: 5, window: '1m' } })];
  return Promise.all(HTTP_PATHS.map(([, build]) => serveDecisions(build, policies, MAX_BODY_BYTES)));
}

async function stillAnswers(server: TestServer): Promise<void> {
  const answer = await fetch(`${server.url}/healthz`);
  expect(answer.status).to.equal(200);
}

describe('hostile request bodies: one parser for the fast path and the Koa app', function () {
  let servers: TestServer[];
  before(async () => {
    servers = await serveBoth();
  });
  after(() => Promise.all(servers.map((s) => s.close())));

  /** The same request to both paths: the answers must agree, and be no 5xx. */
  async function sameOnBoth(path: string, body: Buffer, headers?: Record<string, string>, declaredLength?: number): Promise<RawAnswer> {
    const answers = await Promise.all(servers.map((s) => post(s.url, path, body, headers, declaredLength)));
    expect(answers[0].status, answers[0].body).to.be.below(500);
    expect(answers[1], `fast path vs Koa for ${body.toString('utf8', 0, 200)}`).to.deep.equal(answers[0]);
    return answers[0];
  }

  it('the issue body: tags nested 50,000 levels deep with an escape is a 400 naming the depth, on both paths', async () => {
    const body = Buffer.from(`{"tags": {"a": ${nested(50_000, '"\\u0041"', 'object')}}}`);
    const refused = await sameOnBoth('/rl/v1/check', body);
    expect(refused.status).to.equal(400);
    expect(JSON.parse(refused.body).error).to.equal(`body: is nested more than ${MAX_JSON_DEPTH} levels deep`);
  });

  it('a body that claims gzip and is not gzip is a 400 on /rl/v1/check (both paths) and on /rl/v1/policies', async () => {
    const plain = Buffer.from('{"service": "svc"}');
    for (const path of ['/rl/v1/check', '/rl/v1/acquire', '/rl/v1/policies']) {
      const answer = await sameOnBoth(path, plain, { 'Content-Encoding': 'gzip' });
      expect(answer.status, path).to.equal(400);
      expect(JSON.parse(answer.body).error).to.match(/^body: is not valid gzip data \(Content-Encoding: gzip\)/);
    }
  });

  it('gzip that inflates past the limit is a 413; a real gzip body is decided; an unknown encoding is a 415', async () => {
    const bomb = zlib.gzipSync(Buffer.from(`{"user_id": "${'a'.repeat(MAX_BODY_BYTES * 4)}"}`));
    expect((await sameOnBoth('/rl/v1/check', bomb, { 'Content-Encoding': 'gzip' })).status).to.equal(413);
    const good = zlib.gzipSync(Buffer.from('{"service": "svc"}'));
    const decided = await sameOnBoth('/rl/v1/check', good, { 'Content-Encoding': 'gzip' });
    expect(decided.status).to.equal(200);
    expect(JSON.parse(decided.body).reason).to.equal('no_matching_policy');
    expect((await sameOnBoth('/rl/v1/check', good, { 'Content-Encoding': 'compress' })).status).to.equal(415);
  });

  it('generated hostile bodies: the same 4xx (or decision) on both paths, never a 5xx, the server alive', async function () {
    this.timeout(120_000);
    const anyJson = fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v) ?? 'null');
    const field = fc.constantFrom('service', 'endpoint', 'method', 'user_id', 'api_key', 'tenant_id', 'source_ip', 'tags', 'quantity', 'lease_id', 'priority', '__proto__', '\\u005f_proto__', 'constructor');
    const hostileNumber = fc.constantFrom('1e400', '-1e400', '-0', '1.5', '18446744073709551616', '9007199254740993', '0x10', 'NaN', '1e-400', '"12"');
    const hostileString = fc.constantFrom('"\\ud800"', '"\\udfff\\ud800"', '"\\u0000"', `"${'x'.repeat(3000)}"`, '"\\u005f_proto__"', '""');
    const object = fc
      .array(fc.tuple(field, fc.oneof(anyJson, hostileNumber, hostileString)), { maxLength: 8 })
      .map((pairs) => `{${pairs.map(([k, v]) => `"${k}":${v}`).join(',')}}`);
    const deep = fc
      .tuple(fc.integer({ min: 1, max: 400 }), fc.constantFrom<'object' | 'array'>('object', 'array'), fc.constantFrom('1', '"\\u0041"', '{}', '[]'))
      .map(([depth, kind, leaf]) => `{"tags":${nested(depth, leaf, kind)}}`);
    const duplicates = fc.tuple(anyJson, anyJson).map(([a, b]) => `{"quantity":${a},"quantity":${b},"tags":{"k":${a},"k":"v"}}`);
    const broken = fc.oneof(object, deep).chain((text) => fc.integer({ min: 0, max: text.length }).map((cut) => text.slice(0, cut)));
    const body = fc.oneof(object, deep, duplicates, broken, anyJson, fc.string({ maxLength: 50 }));
    const encoding = fc.constantFrom<undefined | 'gzip' | 'gzip-lie' | 'deflate'>(undefined, undefined, 'gzip', 'gzip-lie', 'deflate');
    const lie = fc.constantFrom<'none' | 'none' | 'longer' | 'shorter'>('none', 'none', 'longer', 'shorter');
    const path = fc.constantFrom('/rl/v1/check', '/rl/v1/acquire', '/rl/v1/release', '/rl/v1/policies', '/rl/v1/policies/validate');

    await fc.assert(
      fc.asyncProperty(body, encoding, lie, path, async (text, enc, lengthLie, target) => {
        let bytes = Buffer.from(text);
        const headers: Record<string, string> = {};
        if (enc === 'gzip') bytes = zlib.gzipSync(bytes);
        if (enc === 'deflate') bytes = zlib.deflateSync(bytes);
        if (enc !== undefined) headers['Content-Encoding'] = enc === 'gzip-lie' ? 'gzip' : enc;
        // A declared length longer than what is sent: the caller half-closes after its bytes.
        const declared = lengthLie === 'longer' ? bytes.length + 10 : lengthLie === 'shorter' ? Math.max(0, bytes.length - 3) : undefined;
        if (lengthLie !== 'longer') return void (await sameOnBoth(target, bytes, headers, declared));
        // The caller hung up before its declared length: which of "aborted" and a parse error wins is a
        // race, and the answer may find nobody to read it. Either way: a 400 or nothing, never a 5xx.
        const answers = await Promise.all(servers.map((s) => post(s.url, target, bytes, headers, declared)));
        for (const answer of answers) expect([0, 400]).to.include(answer.status);
      }),
      { numRuns: 300 },
    );
    for (const server of servers) await stillAnswers(server);
  });

  it('a chunked body over the limit is a 413 and closes the connection, on both paths', async () => {
    const answers = await Promise.all(
      servers.map(
        (s) =>
          new Promise<RawAnswer>((resolve) => {
            const { port } = new URL(s.url);
            const socket = net.connect(Number(port), '127.0.0.1');
            const received: Buffer[] = [];
            socket.on('data', (chunk) => received.push(chunk));
            socket.on('close', () => {
              const text = Buffer.concat(received).toString('utf8');
              resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), body: text.slice(text.indexOf('\r\n\r\n') + 4) });
            });
            socket.on('error', () => undefined);
            socket.write('POST /rl/v1/check HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
            const chunk = `{"user_id":"${'x'.repeat(MAX_BODY_BYTES)}"}`; // one chunk over the limit
            socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
          }),
      ),
    );
    for (const answer of answers) expect(answer.status).to.equal(413);
    expect(answers[1].body).to.equal(answers[0].body);
  });
});

describe('hostile gRPC requests', function () {
  let fixture: GrpcFixture;
  let raw: grpc.Client;
  before(async () => {
    fixture = await startGrpc([makePolicy({ policy_id: 'p', scope: { service: 'svc' }, algorithm: { type: 'fixed_window', limit: 5, window: '1m' } })]);
    raw = new grpc.Client(fixture.target, grpc.credentials.createInsecure());
  });
  after(async () => {
    raw.close();
    await fixture.close();
  });

  function rawCall(method: string, bytes: Buffer): Promise<grpc.ServiceError | undefined> {
    return new Promise((resolve) => {
      raw.makeUnaryRequest(
        `/rl.v1.RateLimitService/${method}`,
        (b: Buffer) => b,
        (b: Buffer) => b,
        bytes,
        (error) => resolve(error ?? undefined),
      );
    });
  }

  it('random and malformed protobuf bytes answer INVALID_ARGUMENT or a decision, never INTERNAL', async function () {
    this.timeout(60_000);
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 300 }), fc.constantFrom('CheckLimit', 'Acquire', 'Release'), async (bytes, method) => {
        const error = await rawCall(method, Buffer.from(bytes));
        if (error !== undefined) expect([grpc.status.INVALID_ARGUMENT, grpc.status.NOT_FOUND], `${error.code} ${error.details}`).to.include(error.code);
      }),
      { numRuns: 300 },
    );
  });
});
