import { expect } from 'chai';
import { gzipSync } from 'node:zlib';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { parseBody, serve, type TestServer } from '../support/http.js';
import { HTTP_PATHS } from '../support/http-listeners.js';

const SECURITY_HEADERS = ['strict-transport-security', 'x-content-type-options', 'x-frame-options', 'content-security-policy'];
/** What src/http/headers.ts generates: a per-process random prefix and a counter. */
const GENERATED_ID = /^[0-9a-f]{16}-[0-9a-z]+$/;

for (const [path, build] of HTTP_PATHS) {
  describe(`HTTP cross-cutting behaviour (${path})`, () => {
    let server: TestServer;
    let readiness: Readiness;
    const counters = new MemoryCounterStore({ sweepIntervalMs: 0 });

    beforeEach(async () => {
      readiness = new Readiness();
      const decisions = new DecisionService({ policies: new LiveMatcher([]), counters, keyPrefix: 't:' });
      server = await serve(build({ decisions, readiness, maxBodyBytes: 1000 }));
    });
    afterEach(() => server.close());

    async function call(path: string, init: RequestInit = {}) {
      const response = await fetch(`${server.url}${path}`, init);
      return { status: response.status, headers: response.headers, body: await parseBody(response) };
    }

    const post = (path: string, body: BodyInit, headers: Record<string, string>) => call(path, { method: 'POST', body, headers });

    it('puts security headers and X-Request-Id on every response, errors included', async () => {
      readiness.markReady();
      const responses = [
        await call('/healthz'),
        await call('/rl/v1/nowhere'),
        await call('/rl/v1/check'),
        await post('/rl/v1/check', '{', { 'content-type': 'application/json' }),
        await post('/rl/v1/check', 'x'.repeat(2000), { 'content-type': 'application/json' }),
        await post('/rl/v1/check', 'hello', { 'content-type': 'text/plain' }),
      ];
      expect(responses.map((r) => r.status)).to.deep.equal([200, 404, 405, 400, 413, 415]);
      for (const r of responses) {
        for (const header of SECURITY_HEADERS) expect(r.headers.get(header), `${r.status} ${header}`).to.be.a('string').and.not.empty;
        expect(r.headers.get('x-request-id')).to.match(GENERATED_ID);
      }
    });

    it('adds Cache-Control: no-store and Referrer-Policy to answers of GET and HEAD only', async () => {
      readiness.markReady();
      const reads = [await call('/healthz'), await call('/healthz', { method: 'HEAD' }), await call('/nope')];
      for (const r of reads) {
        expect(r.headers.get('cache-control')).to.equal('no-store');
        expect(r.headers.get('referrer-policy')).to.equal('no-referrer');
      }
      const json = { 'content-type': 'application/json' };
      const writes = [await post('/rl/v1/check', '{}', json), await post('/rl/v1/check', '{', json), await post('/rl/v1/nowhere', '{}', json)];
      expect(writes.map((r) => r.status)).to.deep.equal([200, 400, 404]);
      for (const r of writes) {
        for (const header of SECURITY_HEADERS) expect(r.headers.get(header), `${r.status} ${header}`).to.be.a('string').and.not.empty;
        expect(r.headers.get('cache-control'), `${r.status}`).to.equal(null);
        expect(r.headers.get('referrer-policy'), `${r.status}`).to.equal(null);
      }
    });

    it('echoes a well-formed X-Request-Id and replaces a malformed one', async () => {
      const echoed = await call('/healthz', { headers: { 'X-Request-Id': 'abc-123.x:y' } });
      expect(echoed.headers.get('x-request-id')).to.equal('abc-123.x:y');
      const forged = await call('/healthz', { headers: { 'X-Request-Id': 'a b"\\{}' } });
      expect(forged.headers.get('x-request-id')).to.match(GENERATED_ID);
      const tooLong = await call('/healthz', { headers: { 'X-Request-Id': 'a'.repeat(200) } });
      expect(tooLong.headers.get('x-request-id')).to.match(GENERATED_ID);
    });

    it('echoes or replaces X-Request-Id on decision calls too, and gives every call its own', async () => {
      const decide = (headers: Record<string, string>) => post('/rl/v1/check', '{"user_id":"u"}', { 'content-type': 'application/json', ...headers });
      expect((await decide({ 'X-Request-Id': 'abc-123.x:y' })).headers.get('x-request-id')).to.equal('abc-123.x:y');
      expect((await decide({ 'X-Request-Id': 'a b"\\{}' })).headers.get('x-request-id')).to.match(GENERATED_ID);
      const fresh = [await decide({}), await decide({}), await call('/healthz')].map((r) => r.headers.get('x-request-id'));
      for (const id of fresh) expect(id).to.match(GENERATED_ID);
      expect(new Set(fresh).size).to.equal(3);
    });

    it('answers unknown routes with a JSON 404 and wrong methods with a JSON 405 and Allow', async () => {
      const missing = await call('/nope');
      expect(missing.status).to.equal(404);
      expect(missing.headers.get('content-type')).to.match(/application\/json/);
      expect(missing.body).to.deep.equal({ error: 'no route for GET /nope', status: 404 });
      const wrong = await call('/rl/v1/check', { method: 'PUT', body: '{}', headers: { 'content-type': 'application/json' } });
      expect(wrong.status).to.equal(405);
      expect(wrong.headers.get('allow')).to.contain('POST');
      expect(wrong.body.status).to.equal(405);
      const odd = await call('/rl/v1/check', { method: 'PROPFIND' });
      expect(odd.status).to.equal(405);
    });

    it('refuses bodies above RL_MAX_BODY_BYTES with 413, counting gzip bodies after inflation', async () => {
      const big = JSON.stringify({ user_id: 'x'.repeat(2000) });
      const plain = await post('/rl/v1/check', big, { 'content-type': 'application/json' });
      expect(plain.status).to.equal(413);
      expect(plain.body.error).to.contain('RL_MAX_BODY_BYTES');
      const compressed = gzipSync(big);
      expect(compressed.length).to.be.lessThan(1000);
      const gz = await post('/rl/v1/check', compressed, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      expect(gz.status).to.equal(413);
      const smallGz = await post('/rl/v1/check', gzipSync('{"user_id":"u"}'), { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      expect(smallGz.status).to.equal(200);
    });

    it('refuses non-JSON bodies with 415 and accepts merge-patch JSON', async () => {
      const form = await post('/rl/v1/check', 'a=1', { 'content-type': 'application/x-www-form-urlencoded' });
      expect(form.status).to.equal(415);
      expect(form.body.error).to.contain('JSON');
      const merge = await post('/rl/v1/check', '{}', { 'content-type': 'application/merge-patch+json' });
      expect(merge.status).to.equal(200);
    });

    it('refuses __proto__ keys with a 400 and ignores constructor keys, polluting nothing', async () => {
      const bodies = [
        '{"__proto__": {"polluted": "yes", "allowed": false}}',
        '{"tags": {"__proto__": "x"}}',
        // JSON.parse reads escapes as the characters they stand for: the same key, spelled otherwise.
        '{"service": "svc", "\\u005f_proto__": {}}',
        '{"tags": {"__prot\\u006f__": "x"}}',
      ];
      for (const body of bodies) {
        const res = await post('/rl/v1/check', body, { 'content-type': 'application/json' });
        expect(res.status, body).to.equal(400);
        expect(res.body.error).to.contain('__proto__');
      }
      expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
      expect((Object.prototype as Record<string, unknown>).polluted).to.equal(undefined);
      // "constructor" is just an unknown field: nothing merges request objects into existing ones.
      for (const body of ['{"constructor": "x"}', '{"constructor": {"prototype": {"polluted": "yes"}}, "tags": {"constructor": "y"}}']) {
        const res = await post('/rl/v1/check', body, { 'content-type': 'application/json' });
        expect(res.status, body).to.equal(200);
        expect(res.body.allowed).to.equal(true);
      }
      expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
    });

    it('reports /readyz 503 while starting and draining, 200 when ready; /healthz always 200', async () => {
      expect((await call('/readyz')).status).to.equal(503);
      expect((await call('/healthz')).body).to.equal('ok');
      readiness.markReady();
      expect(await call('/readyz')).to.deep.include({ status: 200, body: 'ok' });
      readiness.markDraining();
      const draining = await call('/readyz');
      expect(draining.status).to.equal(503);
      expect(draining.body).to.deep.equal({ error: 'not ready: draining', status: 503 });
      expect((await call('/healthz')).status).to.equal(200);
    });
  });
}
