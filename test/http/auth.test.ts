import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Router from '@koa/router';
import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import { Authenticator } from '../../src/auth/authenticator.js';
import { loadServerConfig, type Env } from '../../src/config.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { createApp, createHttpListener } from '../../src/http/app.js';
import { accessOf, HttpAuth, httpAuthGuard } from '../../src/http/auth-guard.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { setLogLevel } from '../../src/util/log.js';

const ADMIN_KEY = 'adm-5f1d8c0e7b2a4e69a1c3';
const READER_KEY = 'ro-9b7e6d5c4b3a29180f7e';
const SECRET = 'http-test-secret-0123456789abcdef';

/**
 * Stand-ins for the management routes (the real ones are mounted by the lead): each answers with the
 * caller's subject, the way the policy routes record `changed_by`.
 */
function managementRoutes(): Router {
  const router = new Router({ prefix: '/rl/v1' });
  const echo = (status: number) => (ctx: import('koa').Context) => {
    ctx.status = status;
    ctx.body = { changed_by: ctx.state.principal?.subject ?? null, role: ctx.state.principal?.role ?? null };
  };
  router.get('/policies', echo(200));
  router.post('/policies', echo(201));
  router.post('/policies/validate', echo(200));
  router.put('/policies/:id', echo(200));
  router.patch('/policies/:id', echo(200));
  router.delete('/policies/:id', echo(200));
  router.post('/policies/:id/rollout', echo(200));
  router.get('/policies/:id/audit', echo(200));
  return router;
}

interface TestServer {
  url: string;
  close(): Promise<void>;
}

/** `listener`: the server's listener (the decision fast path in front of the app) instead of the Koa app alone. */
async function startApp(env: Env, front: 'app' | 'listener' = 'app'): Promise<TestServer> {
  const config = loadServerConfig(env);
  const readiness = new Readiness();
  readiness.markReady();
  const counters = new MemoryCounterStore({ sweepIntervalMs: 0 });
  const decisions = new DecisionService({ policies: new LiveMatcher([]), counters, keyPrefix: 't:' });
  const auth = new HttpAuth(new Authenticator(config.auth), config.auth);
  const deps = { decisions, readiness, maxBodyBytes: 1024 * 1024, routers: [managementRoutes()] };
  const listener = front === 'listener' ? createHttpListener({ ...deps, auth }) : createApp({ ...deps, guards: [httpAuthGuard(auth)] }).callback();
  const server = http.createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await counters.close();
    },
  };
}

async function call(
  server: TestServer,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: unknown,
): Promise<{ status: number; headers: Headers; json: any; text: string }> {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    (init.headers as Record<string, string>)['Content-Type'] = 'application/json';
  }
  const response = await fetch(server.url + path, init);
  const text = await response.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, json, text };
}

const CHECK_BODY = { tenant_id: 't1', resource: 'r' };
const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
const token = (claims: object, options: jwt.SignOptions = {}) => jwt.sign(claims, SECRET, { algorithm: 'HS256', ...options });

/** Captures (and swallows) everything written to stderr, where the logger writes, while the suite runs. */
function captureStderr(): { text(): string; restore(): void } {
  const chunks: string[] = [];
  const original = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: unknown, ...rest: unknown[]) => {
    chunks.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString());
    const callback = rest.find((arg) => typeof arg === 'function') as (() => void) | undefined;
    callback?.();
    return true;
  }) as typeof process.stderr.write;
  return { text: () => chunks.join(''), restore: () => void (process.stderr.write = original) };
}

describe('HTTP auth guard', () => {
  let stderr: ReturnType<typeof captureStderr>;
  /** Every credential sent in this suite; none may ever show up in a log line. */
  const sentSecrets = new Set<string>();
  const remember = (headers: Record<string, string>) => {
    for (const value of Object.values(headers)) sentSecrets.add(value.replace(/^Bearer\s+/i, ''));
    return headers;
  };

  before(() => {
    setLogLevel('debug');
    stderr = captureStderr();
  });

  after(() => {
    stderr.restore();
    setLogLevel('info');
  });

  describe('access classification', () => {
    it('decision calls are "decide", GET/HEAD/OPTIONS and validate are "read", everything else is "write"', () => {
      const cases: [method: string, path: string, access: string][] = [
        ['POST', '/rl/v1/check', 'decide'],
        ['POST', '/rl/v1/acquire', 'decide'],
        ['POST', '/rl/v1/release/', 'decide'],
        // docs/tenants.md: a refund takes the same credentials as check.
        ['POST', '/rl/v1/refund', 'decide'],
        ['GET', '/rl/v1/policies', 'read'],
        ['HEAD', '/rl/v1/policies/a', 'read'],
        ['OPTIONS', '/rl/v1/check', 'read'],
        ['POST', '/rl/v1/policies/validate', 'read'],
        ['POST', '/rl/v1/policies', 'write'],
        ['POST', '/rl/v1/policies/validate/rollout', 'write'],
        ['POST', '/rl/v1/checkx', 'write'],
        ['PUT', '/rl/v1/check', 'write'],
        ['PUT', '/rl/v1/policies/a', 'write'],
        ['PATCH', '/rl/v1/policies/a', 'write'],
        ['DELETE', '/rl/v1/policies/a', 'write'],
        ['POST', '/anything/new', 'write'],
      ];
      for (const [method, path, access] of cases) expect(accessOf(method, path), `${method} ${path}`).to.equal(access);
    });
  });

  describe('API key mode', () => {
    let server: TestServer;
    before(async () => {
      server = await startApp({
        RL_AUTH_ENABLED: 'true',
        RL_AUTH_MODE: 'apikey',
        RL_AUTH_API_KEYS: `${ADMIN_KEY},${READER_KEY}:read-only`,
      });
    });
    after(() => server.close());

    it('401 with WWW-Authenticate, the JSON error body and the usual headers when no credential is sent', async () => {
      for (const [method, path] of [
        ['POST', '/rl/v1/check'],
        ['GET', '/rl/v1/policies'],
        ['POST', '/rl/v1/policies'],
        ['GET', '/no/such/route'],
      ] as const) {
        const r = await call(server, method, path, {}, method === 'POST' ? CHECK_BODY : undefined);
        expect(r.status, `${method} ${path}`).to.equal(401);
        expect(r.headers.get('www-authenticate')).to.equal('ApiKey realm="rl"');
        expect(r.headers.get('content-type')).to.match(/application\/json/);
        expect(r.json).to.deep.include({ status: 401 });
        expect(r.json.error).to.be.a('string').and.match(/missing credentials/);
        expect(r.headers.get('x-request-id')).to.be.a('string');
        expect(r.headers.get('x-content-type-options')).to.equal('nosniff');
      }
    });

    it('401 for a wrong key and for a key of another length (never 500)', async () => {
      for (const key of ['adm-5f1d8c0e7b2a4e69a1c4', 'short', 'x'.repeat(4000)]) {
        for (const headers of [{ 'X-Api-Key': key }, bearer(key)]) {
          const r = await call(server, 'POST', '/rl/v1/check', remember(headers), CHECK_BODY);
          expect(r.status).to.equal(401);
          expect(r.headers.get('www-authenticate')).to.equal('ApiKey realm="rl"');
          expect(r.text).not.to.contain(key);
        }
      }
    });

    it('admin key works in X-Api-Key and in Authorization: Bearer, and may mutate', async () => {
      const subject = (await call(server, 'GET', '/rl/v1/policies', remember({ 'X-Api-Key': ADMIN_KEY }))).json.changed_by;
      expect(subject).to.match(/^key:[0-9a-f]{8}$/);
      for (const headers of [{ 'X-Api-Key': ADMIN_KEY }, bearer(ADMIN_KEY)]) {
        remember(headers);
        expect((await call(server, 'POST', '/rl/v1/check', headers, CHECK_BODY)).status).to.equal(200);
        const created = await call(server, 'POST', '/rl/v1/policies', headers, { policy_id: 'p' });
        expect(created.status).to.equal(201);
        expect(created.json).to.deep.equal({ changed_by: subject, role: 'admin' });
        expect((await call(server, 'PUT', '/rl/v1/policies/p', headers, { policy_id: 'p' })).status).to.equal(200);
        expect((await call(server, 'PATCH', '/rl/v1/policies/p', headers, {})).status).to.equal(200);
        expect((await call(server, 'DELETE', '/rl/v1/policies/p', headers)).status).to.equal(200);
      }
    });

    it('read-only may GET, validate and call check/acquire/release/refund', async () => {
      const headers = remember({ 'X-Api-Key': READER_KEY });
      const list = await call(server, 'GET', '/rl/v1/policies', headers);
      expect(list.status).to.equal(200);
      expect(list.json.role).to.equal('read-only');
      expect((await call(server, 'GET', '/rl/v1/policies/p/audit', headers)).status).to.equal(200);
      expect((await call(server, 'POST', '/rl/v1/policies/validate', headers, {})).status).to.equal(200);
      for (const op of ['check', 'acquire', 'release', 'refund']) {
        const body = op === 'refund' ? { ...CHECK_BODY, quantity: 1 } : CHECK_BODY;
        const r = await call(server, 'POST', `/rl/v1/${op}`, headers, body);
        expect(r.status, op).to.equal(200);
        expect(r.json.allowed).to.equal(true);
      }
    });

    it('read-only gets 403 (not 401) on every mutation', async () => {
      const headers = remember(bearer(READER_KEY));
      for (const [method, path] of [
        ['POST', '/rl/v1/policies'],
        ['PUT', '/rl/v1/policies/p'],
        ['PATCH', '/rl/v1/policies/p'],
        ['DELETE', '/rl/v1/policies/p'],
        ['POST', '/rl/v1/policies/p/rollout'],
      ] as const) {
        const r = await call(server, method, path, headers, method === 'DELETE' ? undefined : { policy_id: 'p' });
        expect(r.status, `${method} ${path}`).to.equal(403);
        expect(r.json).to.deep.equal({ error: 'this call needs the admin role', status: 403 });
        expect(r.headers.get('www-authenticate')).to.equal(null);
      }
    });

    it('/healthz and /readyz are exempt', async () => {
      expect((await call(server, 'GET', '/healthz')).status).to.equal(200);
      expect((await call(server, 'GET', '/readyz')).status).to.equal(200);
      expect((await call(server, 'GET', '/healthz', remember({ 'X-Api-Key': 'garbage-key-123' }))).status).to.equal(200);
    });
  });

  describe('JWT mode', () => {
    let server: TestServer;
    before(async () => {
      server = await startApp({ RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'jwt', RL_AUTH_JWT_SECRET: SECRET });
    });
    after(() => server.close());

    it('401 with a Bearer challenge; invalid_token once a token was sent', async () => {
      const missing = await call(server, 'GET', '/rl/v1/policies');
      expect(missing.status).to.equal(401);
      expect(missing.headers.get('www-authenticate')).to.equal('Bearer realm="rl"');

      const expired = token({ sub: 'alice', role: 'admin', exp: Math.floor(Date.now() / 1000) - 10 });
      const hs512 = jwt.sign({ sub: 'alice', role: 'admin' }, SECRET, { algorithm: 'HS512' });
      const none = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${Buffer.from('{"role":"admin"}').toString('base64url')}.`;
      for (const bad of [expired, hs512, none, 'garbage.token.value']) {
        const r = await call(server, 'GET', '/rl/v1/policies', remember(bearer(bad)));
        expect(r.status).to.equal(401);
        expect(r.headers.get('www-authenticate')).to.equal('Bearer realm="rl", error="invalid_token"');
        expect(r.text).not.to.contain(bad);
      }
    });

    it('the subject (sub) reaches the routes as ctx.state.principal', async () => {
      const r = await call(server, 'POST', '/rl/v1/policies', remember(bearer(token({ sub: 'alice@example.com', role: ['admin'] }))), {});
      expect(r.status).to.equal(201);
      expect(r.json).to.deep.equal({ changed_by: 'alice@example.com', role: 'admin' });
    });

    it('read-only token: GET and check 200, mutation 403', async () => {
      const headers = remember(bearer(token({ sub: 'reader', role: 'read-only' })));
      expect((await call(server, 'GET', '/rl/v1/policies', headers)).status).to.equal(200);
      expect((await call(server, 'POST', '/rl/v1/check', headers, CHECK_BODY)).status).to.equal(200);
      expect((await call(server, 'DELETE', '/rl/v1/policies/p', headers)).status).to.equal(403);
    });

    it('a token without a known role may call check but nothing else (403)', async () => {
      const headers = remember(bearer(token({ sub: 'nobody', role: 'guest' })));
      expect((await call(server, 'POST', '/rl/v1/check', headers, CHECK_BODY)).status).to.equal(200);
      const read = await call(server, 'GET', '/rl/v1/policies', headers);
      expect(read.status).to.equal(403);
      expect(read.json.error).to.match(/no known role/);
      expect((await call(server, 'POST', '/rl/v1/policies', headers, {})).status).to.equal(403);
    });
  });

  describe('configured exempt paths and auth disabled', () => {
    it('RL_AUTH_EXEMPT_PATHS replaces the default list; matching is exact', async () => {
      const server = await startApp({
        RL_AUTH_ENABLED: 'true',
        RL_AUTH_MODE: 'apikey',
        RL_AUTH_API_KEYS: ADMIN_KEY,
        RL_AUTH_EXEMPT_PATHS: '/healthz',
      });
      try {
        expect((await call(server, 'GET', '/healthz')).status).to.equal(200);
        expect((await call(server, 'GET', '/readyz')).status).to.equal(401);
        expect((await call(server, 'GET', '/healthz/')).status).to.equal(401);
        expect((await call(server, 'GET', '/readyz', remember({ 'X-Api-Key': ADMIN_KEY }))).status).to.equal(200);
      } finally {
        await server.close();
      }
    });

    it('with auth disabled every caller is "anonymous" admin', async () => {
      const server = await startApp({});
      try {
        const r = await call(server, 'POST', '/rl/v1/policies', {}, {});
        expect(r.status).to.equal(201);
        expect(r.json).to.deep.equal({ changed_by: 'anonymous', role: 'admin' });
      } finally {
        await server.close();
      }
    });
  });

  describe('decision fast path (the server listener)', () => {
    it('answers one caller 401 with WWW-Authenticate and the next, authenticated, 200 without it', async () => {
      const server = await startApp(
        { RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'apikey', RL_AUTH_API_KEYS: `${ADMIN_KEY},${READER_KEY}:read-only` },
        'listener',
      );
      try {
        for (let round = 0; round < 2; round++) {
          const refused = await call(server, 'POST', '/rl/v1/check', {}, CHECK_BODY);
          expect(refused.status).to.equal(401);
          expect(refused.headers.get('www-authenticate')).to.equal('ApiKey realm="rl"');
          expect(refused.json.error).to.match(/missing credentials/);
          const wrong = await call(server, 'POST', '/rl/v1/check', remember({ 'X-Api-Key': 'ro-wrong-key' }), CHECK_BODY);
          expect(wrong.status).to.equal(401);
          expect(wrong.headers.get('www-authenticate')).to.equal('ApiKey realm="rl"');
          const served = await call(server, 'POST', '/rl/v1/check', remember({ 'X-Api-Key': READER_KEY }), CHECK_BODY);
          expect(served.status).to.equal(200);
          expect(served.headers.get('www-authenticate')).to.equal(null);
          expect(served.json).to.include({ allowed: true, reason: 'no_matching_policy' });
        }
      } finally {
        await server.close();
      }
    });
  });

  describe('logs', () => {
    it('auth outcomes were logged, and no credential appears in anything written to stderr', () => {
      const logged = stderr.text();
      expect(logged).to.contain('authentication failed');
      expect(logged).to.contain('permission denied');
      expect(sentSecrets.size).to.be.greaterThan(10);
      for (const secret of [...sentSecrets, ADMIN_KEY, READER_KEY, SECRET]) {
        expect(logged, 'a credential was logged').not.to.contain(secret);
      }
    });
  });
});
