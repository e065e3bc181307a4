import { createHash, generateKeyPairSync } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import fc from 'fast-check';
import jwt from 'jsonwebtoken';
import { Authenticator, apiKeyFingerprint, credentialsFromMetadata, type Access, type Credentials, type Principal } from '../../src/auth/authenticator.js';
import { ConfigError, loadServerConfig, type Env } from '../../src/config.js';
import { RlError } from '../../src/errors.js';

const ADMIN_KEY = 'k-admin-0123456789abcdef';
const READER_KEY = 'k-reader-0123456789abcde';
const SECRET = 'test-secret-that-is-long-enough-for-hs256';

function authFrom(env: Env): Authenticator {
  return new Authenticator(loadServerConfig(env).auth);
}

const apiKeyAuth = () =>
  authFrom({ RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'apikey', RL_AUTH_API_KEYS: `${ADMIN_KEY},${READER_KEY}:read-only,with:colon:read-only` });
const jwtAuth = (extra: Env = {}) => authFrom({ RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'jwt', RL_AUTH_JWT_SECRET: SECRET, ...extra });

/** Runs `fn`, expects an RlError of `kind`, and returns it. */
function expectRlError(kind: RlError['kind'], fn: () => unknown): RlError {
  try {
    fn();
  } catch (error) {
    expect(error, String(error)).to.be.instanceOf(RlError);
    expect((error as RlError).kind).to.equal(kind);
    return error as RlError;
  }
  expect.fail(`expected RlError ${kind}`);
}

function expect401(auth: Authenticator, credentials: Credentials, secret?: string): RlError {
  const error = expectRlError('unauthenticated', () => auth.authenticate(credentials));
  // The presented secret (minus a leading scheme word) must not be echoed; very short strings would match by chance.
  for (const s of [secret, credentials.apiKey, credentials.authorization?.replace(/^\S+\s+/, '')]) {
    if (s && s.length >= 8) expect(error.message).not.to.contain(s);
  }
  return error;
}

const b64url = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
const nowSec = () => Math.floor(Date.now() / 1000);
const hs256 = (payload: object, options: jwt.SignOptions = {}) => jwt.sign(payload, SECRET, { algorithm: 'HS256', ...options });
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

function allowed(auth: Authenticator, principal: Principal, access: Access): boolean {
  try {
    auth.authorize(principal, access);
    return true;
  } catch (error) {
    expect(error).to.be.instanceOf(RlError);
    expect((error as RlError).kind).to.equal('permission_denied');
    return false;
  }
}

describe('Authenticator', () => {
  describe('auth disabled', () => {
    it('everyone is anonymous with the admin role', () => {
      const auth = authFrom({});
      const principal = auth.authenticate({});
      expect(principal).to.deep.equal({ subject: 'anonymous', role: 'admin' });
      expect(allowed(auth, principal, 'write')).to.equal(true);
    });
  });

  describe('API key mode', () => {
    it('accepts a key in X-Api-Key; the subject is a fingerprint, not the key', () => {
      const principal = apiKeyAuth().authenticate({ apiKey: ADMIN_KEY });
      expect(principal.role).to.equal('admin');
      const hex = createHash('sha256').update(ADMIN_KEY).digest('hex');
      expect(principal.subject).to.equal(`key:${hex.slice(0, 8)}`).and.equal(apiKeyFingerprint(ADMIN_KEY));
      expect(principal.subject).not.to.contain(ADMIN_KEY);
    });

    it('accepts a key in Authorization: Bearer (scheme case-insensitive)', () => {
      expect(apiKeyAuth().authenticate({ authorization: `Bearer ${ADMIN_KEY}` }).role).to.equal('admin');
      expect(apiKeyAuth().authenticate({ authorization: `bearer ${READER_KEY}` }).role).to.equal('read-only');
    });

    it('X-Api-Key wins over Authorization when both are sent', () => {
      expect(apiKeyAuth().authenticate({ apiKey: READER_KEY, authorization: `Bearer ${ADMIN_KEY}` }).role).to.equal('read-only');
      expect401(apiKeyAuth(), { apiKey: 'wrong', authorization: `Bearer ${ADMIN_KEY}` });
    });

    it('key:read-only gives the read-only role; the role is after the last colon', () => {
      const auth = apiKeyAuth();
      expect(auth.authenticate({ apiKey: READER_KEY }).role).to.equal('read-only');
      expect(auth.authenticate({ apiKey: 'with:colon' }).role).to.equal('read-only');
      expect401(auth, { apiKey: `${READER_KEY}:read-only` });
    });

    it('a wrong key of the same length is 401', () => {
      const wrong = ADMIN_KEY.slice(0, -1) + (ADMIN_KEY.endsWith('f') ? 'e' : 'f');
      const error = expect401(apiKeyAuth(), { apiKey: wrong });
      expect(error.message).to.equal('invalid API key');
    });

    it('a key of another length is a plain 401, never another error', () => {
      for (const key of ['x', ADMIN_KEY + 'x', ADMIN_KEY.slice(1), 'k'.repeat(10_000), 'ключ-🔑']) {
        expect401(apiKeyAuth(), { apiKey: key });
        expect401(apiKeyAuth(), { authorization: `Bearer ${key}` });
      }
    });

    it('any presented string is either accepted or a 401 (property)', () => {
      const auth = apiKeyAuth();
      fc.assert(
        fc.property(fc.string({ maxLength: 200 }), fc.string({ maxLength: 200 }), (apiKey, authorization) => {
          try {
            auth.authenticate({ apiKey, authorization });
          } catch (error) {
            expect(error).to.be.instanceOf(RlError);
            expect((error as RlError).kind).to.equal('unauthenticated');
          }
        }),
        { numRuns: 300 },
      );
    });

    it('missing credentials, empty values, and another scheme are 401', () => {
      const auth = apiKeyAuth();
      expect(expect401(auth, {}).message).to.match(/missing credentials/);
      expect401(auth, { apiKey: '', authorization: '' });
      expect401(auth, { authorization: 'Bearer' });
      expect401(auth, { authorization: `Basic ${Buffer.from(`u:${ADMIN_KEY}`).toString('base64')}` });
      expect401(auth, { authorization: ADMIN_KEY });
    });

    it('roles: admin may do everything, read-only may read and decide but not write', () => {
      const auth = apiKeyAuth();
      const admin = auth.authenticate({ apiKey: ADMIN_KEY });
      const reader = auth.authenticate({ apiKey: READER_KEY });
      for (const access of ['read', 'decide', 'write'] as const) expect(allowed(auth, admin, access)).to.equal(true);
      expect(allowed(auth, reader, 'read')).to.equal(true);
      expect(allowed(auth, reader, 'decide')).to.equal(true);
      expect(allowed(auth, reader, 'write')).to.equal(false);
    });
  });

  describe('JWT mode', () => {
    it('accepts an HS256 token; subject from sub, role from the role claim', () => {
      const principal = jwtAuth().authenticate(bearer(hs256({ sub: 'alice', role: 'admin' }, { expiresIn: 60 })));
      expect(principal).to.deep.equal({ subject: 'alice', role: 'admin' });
    });

    it('subject is "jwt" when the token has no sub', () => {
      expect(jwtAuth().authenticate(bearer(hs256({ role: 'read-only' }))).subject).to.equal('jwt');
    });

    it('rejects alg "none" (crafted by hand), with or without a signature part', () => {
      const payload = b64url({ sub: 'mallory', role: 'admin', exp: nowSec() + 60 });
      for (const alg of ['none', 'None', 'NONE']) {
        const header = b64url({ alg, typ: 'JWT' });
        expect401(jwtAuth(), bearer(`${header}.${payload}.`));
        expect401(jwtAuth(), bearer(`${header}.${payload}`));
        expect401(jwtAuth(), bearer(`${header}.${payload}.${b64url('sig')}`));
      }
    });

    it('rejects RS256 tokens (signed with a generated RSA key)', () => {
      const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      const token = jwt.sign({ sub: 'mallory', role: 'admin' }, privateKey, { algorithm: 'RS256' });
      expect(jwt.verify(token, publicKey, { algorithms: ['RS256'] })).to.include({ sub: 'mallory' }); // a genuine RS256 token
      expect(expect401(jwtAuth(), bearer(token)).message).to.match(/HS256/);
    });

    it('rejects HS384 and HS512 tokens signed with the right secret', () => {
      for (const algorithm of ['HS384', 'HS512'] as const) {
        const token = jwt.sign({ sub: 'alice', role: 'admin' }, SECRET, { algorithm });
        expect401(jwtAuth(), bearer(token), SECRET);
      }
    });

    it('rejects a wrong secret', () => {
      const token = jwt.sign({ sub: 'alice', role: 'admin' }, 'another-secret', { algorithm: 'HS256' });
      expect(expect401(jwtAuth(), bearer(token)).message).to.match(/signature/);
    });

    it('rejects an expired exp', () => {
      const token = hs256({ sub: 'alice', role: 'admin', exp: nowSec() - 5 });
      expect(expect401(jwtAuth(), bearer(token)).message).to.match(/expired/);
    });

    it('rejects a future nbf', () => {
      const token = hs256({ sub: 'alice', role: 'admin', nbf: nowSec() + 60 });
      expect(expect401(jwtAuth(), bearer(token)).message).to.match(/not yet valid/);
      expect(jwtAuth().authenticate(bearer(hs256({ role: 'admin', nbf: nowSec() - 1 }))).role).to.equal('admin');
    });

    it('rejects malformed tokens and non-object payloads', () => {
      const header = b64url({ alg: 'HS256', typ: 'JWT' });
      const signedRaw = (payloadPart: string) => {
        const sig = jwt.sign('x', SECRET, { algorithm: 'HS256' }); // only to prove a "signature" alone is not enough
        return `${header}.${payloadPart}.${sig.split('.')[2]}`;
      };
      for (const token of ['not-a-jwt', 'a.b.c', '..', `${header}..`, signedRaw(b64url('not json')), signedRaw('%%%')]) {
        expect401(jwtAuth(), bearer(token));
      }
      // a correctly signed token whose payload is a JSON string, not an object
      expect401(jwtAuth(), bearer(jwt.sign('just a string', SECRET, { algorithm: 'HS256' })));
    });

    it('needs Authorization: Bearer; an X-Api-Key alone or another scheme is 401', () => {
      const token = hs256({ role: 'admin' });
      expect401(jwtAuth(), {});
      expect401(jwtAuth(), { apiKey: token });
      expect401(jwtAuth(), { authorization: `Token ${token}` });
      expect(jwtAuth().authenticate({ authorization: `bearer ${token}` }).role).to.equal('admin');
    });

    it('roles: a string, an array (admin wins), and a custom claim', () => {
      expect(jwtAuth().authenticate(bearer(hs256({ role: 'read-only' }))).role).to.equal('read-only');
      expect(jwtAuth().authenticate(bearer(hs256({ role: ['read-only', 'admin'] }))).role).to.equal('admin');
      expect(jwtAuth().authenticate(bearer(hs256({ role: ['other', 'read-only'] }))).role).to.equal('read-only');

      const custom = jwtAuth({ RL_AUTH_ROLE_CLAIM: 'https://rl.example/roles' });
      expect(custom.authenticate(bearer(hs256({ 'https://rl.example/roles': ['admin'] }))).role).to.equal('admin');
      // the default claim is ignored once another one is configured
      expect(custom.authenticate(bearer(hs256({ role: 'admin' }))).role).to.equal(null);
    });

    it('a valid token without a known role is authenticated but gets 403 on reads and writes', () => {
      const auth = jwtAuth();
      for (const claims of [{}, { role: 'superuser' }, { role: [] }, { role: 42 }, { role: { admin: true } }]) {
        const principal = auth.authenticate(bearer(hs256({ sub: 'bob', ...claims })));
        expect(principal).to.deep.equal({ subject: 'bob', role: null });
        expect(allowed(auth, principal, 'decide'), 'decision calls need any valid credential').to.equal(true);
        expect(allowed(auth, principal, 'read')).to.equal(false);
        expect(allowed(auth, principal, 'write')).to.equal(false);
      }
    });

    it('read-only may read and decide, not write', () => {
      const auth = jwtAuth();
      const reader = auth.authenticate(bearer(hs256({ role: 'read-only' })));
      expect(allowed(auth, reader, 'read')).to.equal(true);
      expect(allowed(auth, reader, 'decide')).to.equal(true);
      const error = expectRlError('permission_denied', () => auth.authorize(reader, 'write'));
      expect(error.message).to.match(/admin/);
    });
  });

  describe('gRPC metadata', () => {
    it('credentialsFromMetadata reads x-api-key and authorization from grpc-js Metadata', () => {
      const metadata = new grpc.Metadata();
      expect(credentialsFromMetadata(metadata)).to.deep.equal({});
      metadata.set('x-api-key', READER_KEY);
      metadata.set('authorization', `Bearer ${ADMIN_KEY}`);
      expect(credentialsFromMetadata(metadata)).to.deep.equal({ apiKey: READER_KEY, authorization: `Bearer ${ADMIN_KEY}` });
      expect(apiKeyAuth().authenticate(credentialsFromMetadata(metadata)).role).to.equal('read-only');
      metadata.remove('x-api-key');
      expect(apiKeyAuth().authenticate(credentialsFromMetadata(metadata)).role).to.equal('admin');
    });
  });

  describe('configuration errors stop start-up', () => {
    const expectConfigError = (env: Env, variable: string) => {
      try {
        loadServerConfig(env);
      } catch (error) {
        expect(error).to.be.instanceOf(ConfigError);
        expect((error as ConfigError).variable).to.equal(variable);
        expect((error as Error).message).to.contain(variable);
        return error as ConfigError;
      }
      expect.fail(`expected a ConfigError for ${variable}`);
    };

    it('auth enabled without a mode', () => {
      expectConfigError({ RL_AUTH_ENABLED: 'true' }, 'RL_AUTH_MODE');
    });

    it('an unknown mode', () => {
      expectConfigError({ RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'basic' }, 'RL_AUTH_MODE');
    });

    it('apikey mode without keys', () => {
      expectConfigError({ RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'apikey' }, 'RL_AUTH_API_KEYS');
      expectConfigError({ RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'apikey', RL_AUTH_API_KEYS: ' , ' }, 'RL_AUTH_API_KEYS');
    });

    it('jwt mode without a secret', () => {
      expectConfigError({ RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'jwt' }, 'RL_AUTH_JWT_SECRET');
      expectConfigError({ RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'jwt', RL_AUTH_API_KEYS: ADMIN_KEY }, 'RL_AUTH_JWT_SECRET');
    });

    it('a bad RL_AUTH_ENABLED value', () => {
      expectConfigError({ RL_AUTH_ENABLED: 'maybe' }, 'RL_AUTH_ENABLED');
    });

    it('the Authenticator itself refuses a hand-built config that would let everyone in', () => {
      const base = { enabled: true, apiKeys: [], jwtSecret: undefined, roleClaim: 'role', orgClaim: 'orgs', exemptPaths: [] };
      expect(() => new Authenticator({ ...base, mode: 'apikey' })).to.throw(/apikey/);
      expect(() => new Authenticator({ ...base, mode: 'jwt' })).to.throw(/secret/);
      expect(() => new Authenticator({ ...base, mode: undefined })).to.throw(/mode/);
    });

    it('defaults: role claim "role", exempt /healthz and /readyz', () => {
      const { auth } = loadServerConfig({});
      expect(auth.roleClaim).to.equal('role');
      expect(auth.exemptPaths).to.deep.equal(['/healthz', '/readyz']);
    });
  });
});
