import { expect } from 'chai';
import https from 'node:https';
import { generateKeyPairSync } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import jwt from 'jsonwebtoken';
import { loadServerConfig } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { setLogLevel } from '../../src/util/log.js';
import { callError, healthClient, rateLimitClient, unary } from '../grpc/helpers.js';
import { testCertificate } from '../support/tls.js';
import { tempDir } from '../support/temp-dir.js';

/**
 * The whole server as `npm start` builds it, with native TLS and authentication on: the same
 * credentials and the same certificate on HTTPS and gRPC.
 */
describe('server with TLS and authentication, HTTP and gRPC', function () {
  this.timeout(30_000);
  const cert = testCertificate();
  const ADMIN_KEY = 'admin-key-0123456789';
  const READER_KEY = 'reader-key-0123456789';
  const JWT_SECRET = 'jwt-secret-for-tests-only-0123456789';
  let dataDir: string;

  before(() => setLogLevel('silent'));
  after(() => setLogLevel('info'));
  tempDir('rl-secure-', { per: 'test', made: (path) => (dataDir = path) });

  async function start(auth: Record<string, string>): Promise<RunningServer> {
    return startServer(
      loadServerConfig({
        RL_HTTP_ADDR: '127.0.0.1:0',
        RL_GRPC_ADDR: '127.0.0.1:0',
        RL_DATA_DIR: dataDir,
        RL_TLS_ENABLED: 'true',
        RL_TLS_CERT_FILE: cert.certFile,
        RL_TLS_KEY_FILE: cert.keyFile,
        RL_AUTH_ENABLED: 'true',
        RL_DRAIN_SECS: '1',
        RL_SHUTDOWN_DELAY_SECS: '0',
        ...auth,
      }),
    );
  }

  function request(port: number, method: string, path: string, headers: Record<string, string> = {}, body?: unknown) {
    return new Promise<{ status: number; headers: Record<string, unknown>; body: any }>((resolve, reject) => {
      const req = https.request(
        { host: '127.0.0.1', servername: 'localhost', port, method, path, ca: cert.cert, headers: { 'content-type': 'application/json', ...headers } },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk) => (text += chunk));
          res.on('end', () => {
            let parsed: unknown = text;
            try {
              parsed = JSON.parse(text);
            } catch {
              // plain text (healthz)
            }
            resolve({ status: res.statusCode!, headers: res.headers, body: parsed });
          });
        },
      );
      req.on('error', reject);
      req.end(body === undefined ? undefined : JSON.stringify(body));
    });
  }

  const tlsCredentials = () => grpc.credentials.createSsl(cert.cert);
  function secureClient(port: number) {
    const client = rateLimitClient(`localhost:${port}`, tlsCredentials());
    return client;
  }
  const context = { org_id: 'acme', signal_type: 'http', user_id: 'alice' };

  it('API keys: same rules over HTTPS and gRPC over TLS', async () => {
    const server = await start({ RL_AUTH_MODE: 'apikey', RL_AUTH_API_KEYS: `${ADMIN_KEY},${READER_KEY}:read-only` });
    const client = secureClient(server.grpcPort);
    try {
      // HTTPS: exempt probes, 401 without credentials, decisions with any key, mutations need admin.
      expect((await request(server.httpPort, 'GET', '/healthz')).status).to.equal(200);
      const anonymous = await request(server.httpPort, 'POST', '/rl/v1/check', {}, context);
      expect(anonymous.status).to.equal(401);
      expect(anonymous.headers['www-authenticate']).to.contain('ApiKey');
      const decided = await request(server.httpPort, 'POST', '/rl/v1/check', { 'x-api-key': READER_KEY }, context);
      expect(decided.status).to.equal(200);
      expect(decided.body.matched_policy_id).to.equal('acme-api-per-user');
      const policy = { policy_id: 'secure-test', scope: { service: 'x' }, algorithm: { type: 'fixed_window', limit: 5, window: '1m' } };
      expect((await request(server.httpPort, 'POST', '/rl/v1/policies', { 'x-api-key': READER_KEY }, policy)).status).to.equal(403);
      const created = await request(server.httpPort, 'POST', '/rl/v1/policies', { authorization: `Bearer ${ADMIN_KEY}` }, policy);
      expect(created.status).to.equal(201);
      const audit = await request(server.httpPort, 'GET', '/rl/v1/policies/secure-test/audit', { 'x-api-key': READER_KEY });
      expect(audit.body[0].changed_by).to.match(/^key:[0-9a-f]{8}$/);
      expect(JSON.stringify(audit.body)).not.to.contain(ADMIN_KEY);

      // gRPC over TLS with the same certificate and keys.
      const missing = await callError(client, 'CheckLimit', context);
      expect(missing.code).to.equal(grpc.status.UNAUTHENTICATED);
      const wrong = await callError(client, 'CheckLimit', context, { metadata: { 'x-api-key': 'nope' } });
      expect(wrong.code).to.equal(grpc.status.UNAUTHENTICATED);
      const ok = await unary(client, 'CheckLimit', context, { metadata: { 'x-api-key': READER_KEY } });
      expect(ok).to.deep.include({ allowed: true, matched_policy_id: 'acme-api-per-user' });
      const bearer = await unary(client, 'CheckLimit', context, { metadata: { authorization: `Bearer ${ADMIN_KEY}` } });
      expect(bearer.allowed).to.equal(true);
      // Health is exempt, like /healthz.
      const health = await unary(healthClient(`localhost:${server.grpcPort}`, tlsCredentials()), 'Check', { service: '' });
      expect(health.status).to.equal('SERVING');
      // A plaintext client cannot talk to the TLS port.
      const plain = rateLimitClient(`127.0.0.1:${server.grpcPort}`);
      const refused = await callError(plain, 'CheckLimit', context, { metadata: { 'x-api-key': READER_KEY }, timeoutMs: 2000 });
      expect(refused.code).to.be.oneOf([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED]);
      plain.close();
    } finally {
      client.close();
      await server.drain();
    }
  });

  it('JWT: HS256 accepted; alg none, RS256, a wrong secret, expired and not-yet-valid tokens refused on both transports', async () => {
    const server = await start({ RL_AUTH_MODE: 'jwt', RL_AUTH_JWT_SECRET: JWT_SECRET });
    const client = secureClient(server.grpcPort);
    const now = Math.floor(Date.now() / 1000);
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const unsigned = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${Buffer.from(JSON.stringify({ sub: 'eve', role: 'admin' })).toString('base64url')}.`;
    const tokens: Record<string, string> = {
      'alg none': unsigned,
      RS256: jwt.sign({ sub: 'eve', role: 'admin' }, privateKey, { algorithm: 'RS256' }),
      HS512: jwt.sign({ sub: 'eve', role: 'admin' }, JWT_SECRET, { algorithm: 'HS512' }),
      'wrong secret': jwt.sign({ sub: 'eve', role: 'admin' }, 'another-secret', { algorithm: 'HS256' }),
      expired: jwt.sign({ sub: 'eve', role: 'admin', exp: now - 60 }, JWT_SECRET, { algorithm: 'HS256' }),
      'future nbf': jwt.sign({ sub: 'eve', role: 'admin', nbf: now + 3600 }, JWT_SECRET, { algorithm: 'HS256' }),
    };
    try {
      for (const [name, token] of Object.entries(tokens)) {
        const http = await request(server.httpPort, 'POST', '/rl/v1/check', { authorization: `Bearer ${token}` }, context);
        expect(http.status, name).to.equal(401);
        const rpc = await callError(client, 'CheckLimit', context, { metadata: { authorization: `Bearer ${token}` } });
        expect(rpc.code, name).to.equal(grpc.status.UNAUTHENTICATED);
      }
      const reader = jwt.sign({ sub: 'dashboard', role: ['read-only'] }, JWT_SECRET, { algorithm: 'HS256', expiresIn: 60 });
      expect((await request(server.httpPort, 'POST', '/rl/v1/check', { authorization: `Bearer ${reader}` }, context)).status).to.equal(200);
      expect((await request(server.httpPort, 'GET', '/rl/v1/policies', { authorization: `Bearer ${reader}` })).status).to.equal(200);
      expect((await request(server.httpPort, 'DELETE', '/rl/v1/policies/acme-api-per-user', { authorization: `Bearer ${reader}` })).status).to.equal(403);
      const rpc = await unary(client, 'CheckLimit', context, { metadata: { authorization: `Bearer ${reader}` } });
      expect(rpc.allowed).to.equal(true);
      const admin = jwt.sign({ sub: 'ops@example.com', role: 'admin' }, JWT_SECRET, { algorithm: 'HS256', expiresIn: 60 });
      const patched = await request(server.httpPort, 'POST', '/rl/v1/policies/acme-api-per-user/rollout', { authorization: `Bearer ${admin}` }, { rollout_percent: 50 });
      expect(patched.status).to.equal(200);
      const audit = await request(server.httpPort, 'GET', '/rl/v1/policies/acme-api-per-user/audit', { authorization: `Bearer ${admin}` });
      expect(audit.body.at(-1)).to.deep.include({ action_type: 'rollout', changed_by: 'ops@example.com' });
    } finally {
      client.close();
      await server.drain();
    }
  });
});
