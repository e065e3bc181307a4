/**
 * Tenant scoping's pieces without a server: the RL_AUTH_API_KEYS entry parser, the JWT organisations
 * claim, the one org rule (reachesOrg) and the decision check built on it, and the analytics / denied
 * identities views that filter through it. test/e2e/tenants.test.ts runs the whole rule over real
 * processes.
 */
import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import { Authenticator } from '../../src/auth/authenticator.js';
import { ConfigError, loadServerConfig, parseApiKeyEntry, type Env } from '../../src/config.js';
import type { DecisionEvent } from '../../src/decision/decision-service.js';
import { RlError } from '../../src/errors.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { reachesOrg, requireUnrestricted, scopeDecisionOrg } from '../../src/model/org-scope.js';
import type { RequestContext } from '../../src/model/request-context.js';
import { Analytics } from '../../src/analytics/analytics.js';
import { DeniedIdentities } from '../../src/analytics/denied-identities.js';
import { OrgView } from '../../src/analytics/org-view.js';
import { storedPolicy } from '../../src/policy/stored-policy.js';
import { validatePolicy } from '../../src/policy/validate.js';

const SECRET = 'test-secret-that-is-long-enough-for-hs256';

/** The error `fn` throws, which must be a `type`. */
function thrown<T>(type: new (...args: never[]) => T, fn: () => unknown): T {
  try {
    fn();
  } catch (error) {
    expect(error).to.be.instanceOf(type);
    return error as T;
  }
  expect.fail(`expected a ${type.name}`);
}
const configError = (fn: () => unknown) => thrown(ConfigError, fn);
const rlError = (fn: () => unknown) => thrown(RlError, fn);

describe('tenants: credentials limited to organisations', () => {
  describe('RL_PLATFORM_LAYERS', () => {
    it('defaults to platform, takes a comma-separated list, refuses a name that is not a layer naming the variable', () => {
      expect(loadServerConfig({}).platformLayers).to.deep.equal(['platform']);
      expect(loadServerConfig({ RL_PLATFORM_LAYERS: 'platform, shared,platform' }).platformLayers).to.deep.equal(['platform', 'shared']);
      for (const bad of ['Platform', 'a b', '-x', 'x'.repeat(33)]) {
        const error = configError(() => loadServerConfig({ RL_PLATFORM_LAYERS: `platform,${bad}` }));
        expect(error.variable, bad).to.equal('RL_PLATFORM_LAYERS');
      }
    });
  });

  describe('RL_AUTH_API_KEYS entries', () => {
    it('key, key:role and key:role:org1|org2, read from the end so keys may contain colons', () => {
      const cases: [string, ReturnType<typeof parseApiKeyEntry>][] = [
        ['k1', { key: 'k1', role: 'admin' }],
        ['k1:read-only', { key: 'k1', role: 'read-only' }],
        ['k1:admin', { key: 'k1', role: 'admin' }],
        ['k1:admin:acme', { key: 'k1', role: 'admin', orgs: ['acme'] }],
        ['k1:read-only:acme|globex', { key: 'k1', role: 'read-only', orgs: ['acme', 'globex'] }],
        ['k1:admin:acme|acme', { key: 'k1', role: 'admin', orgs: ['acme'] }],
        ['with:colon:read-only', { key: 'with:colon', role: 'read-only' }],
        ['with:colon:admin:team-a', { key: 'with:colon', role: 'admin', orgs: ['team-a'] }],
      ];
      for (const [entry, parsed] of cases) expect(parseApiKeyEntry(entry, 1), entry).to.deep.equal(parsed);
    });

    it('refuses malformed entries naming the variable and the position, never the key', () => {
      const secret = 'sup3r-s3cret-key';
      const malformed = [
        `${secret}:admn:acme`, // unknown role before an organisation list
        `${secret}:superuser`, // a colon without a role after it
        `${secret}:admin:`, // empty organisation list
        `${secret}:admin:acme||globex`, // empty organisation name
        `${secret}:admin:*`, // "*" is not an organisation
        `${secret}:read-only: acme`, // surrounding space
        ':admin', // no key
        ':admin:acme',
      ];
      for (const entry of malformed) {
        const error = configError(() => loadServerConfig({ RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'apikey', RL_AUTH_API_KEYS: `first-key,${entry}` }));
        expect(error.variable, entry).to.equal('RL_AUTH_API_KEYS');
        expect(error.message, entry).to.contain('entry 2 ');
        expect(error.message, entry).not.to.contain(secret);
      }
    });

    it('an API key with organisations authenticates as a principal limited to them; without, unrestricted', () => {
      const auth = new Authenticator(loadServerConfig({ RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'apikey', RL_AUTH_API_KEYS: 'platform,team-a-key:admin:team-a,team-b-key:read-only:team-b|shared' }).auth);
      expect(auth.authenticate({ apiKey: 'platform' }).orgs).to.equal(undefined);
      expect(auth.authenticate({ apiKey: 'team-a-key' })).to.include({ role: 'admin' }).and.to.have.deep.property('orgs', ['team-a']);
      expect(auth.authenticate({ apiKey: 'team-b-key' })).to.include({ role: 'read-only' }).and.to.have.deep.property('orgs', ['team-b', 'shared']);
      expect(auth.authenticate({ apiKey: 'team-a-key' }).subject).to.match(/^key:[0-9a-f]{8}$/);
      expect(auth.mayLimitOrgs).to.equal(true);
      const plain = new Authenticator(loadServerConfig({ RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'apikey', RL_AUTH_API_KEYS: 'a,b:read-only' }).auth);
      expect(plain.mayLimitOrgs).to.equal(false);
    });
  });

  describe('the JWT organisations claim', () => {
    const auth = (env: Env = {}) => new Authenticator(loadServerConfig({ RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'jwt', RL_AUTH_JWT_SECRET: SECRET, ...env }).auth);
    const bearer = (payload: object) => ({ authorization: `Bearer ${jwt.sign(payload, SECRET, { algorithm: 'HS256' })}` });

    it('orgs (a string or an array) limits the token; without the claim it is unrestricted', () => {
      const a = auth();
      expect(a.mayLimitOrgs).to.equal(true);
      expect(a.authenticate(bearer({ sub: 'alice', role: 'admin' })).orgs).to.equal(undefined);
      expect(a.authenticate(bearer({ sub: 'alice', role: 'admin', orgs: 'team-a' })).orgs).to.deep.equal(['team-a']);
      expect(a.authenticate(bearer({ sub: 'alice', role: 'admin', orgs: ['team-a', 'team-b'] })).orgs).to.deep.equal(['team-a', 'team-b']);
      expect(a.authenticate(bearer({ sub: 'alice', role: 'admin', orgs: [] })).orgs).to.deep.equal([]);
    });

    it('RL_AUTH_ORG_CLAIM names another claim', () => {
      const a = auth({ RL_AUTH_ORG_CLAIM: 'https://example.com/tenants' });
      expect(a.authenticate(bearer({ sub: 'bob', 'https://example.com/tenants': ['team-b'], orgs: 'ignored' })).orgs).to.deep.equal(['team-b']);
      expect(a.authenticate(bearer({ sub: 'bob', orgs: 'ignored' })).orgs).to.equal(undefined);
    });

    it('a claim that names nothing usable refuses the token (401), it never reads as unrestricted', () => {
      const a = auth();
      for (const orgs of [42, { a: 1 }, null, '', '*', ['team-a', ''], ['team-a', 7], ['*']]) {
        const error = rlError(() => a.authenticate(bearer({ sub: 'mallory', orgs })));
        expect(error.kind, JSON.stringify(orgs)).to.equal('unauthenticated');
        expect(error.message).to.contain('"orgs" claim');
      }
    });
  });

  describe('reachesOrg, the one rule', () => {
    it('unrestricted reaches everything; restricted only its exact organisations, never global (* or absent)', () => {
      const table: [readonly string[] | undefined, string | undefined, boolean][] = [
        [undefined, 'team-a', true],
        [undefined, '*', true],
        [undefined, undefined, true],
        [['team-a'], 'team-a', true],
        [['team-a'], 'team-b', false],
        [['team-a'], 'TEAM-A', false],
        [['team-a'], '*', false],
        [['team-a'], undefined, false],
        [['team-a', 'team-b'], 'team-b', true],
        [[], 'team-a', false],
      ];
      for (const [orgs, orgId, expected] of table) expect(reachesOrg(orgs, orgId), `${JSON.stringify(orgs)} ${orgId}`).to.equal(expected);
    });

    it('decisions: org_id among the organisations, filled in with the only one, else 403 naming org_id', () => {
      const ctx = (org_id?: string): RequestContext => ({ quantity: 1, tags: {}, ...(org_id === undefined ? {} : { org_id }) });
      expect(scopeDecisionOrg(undefined, ctx()).org_id).to.equal(undefined);
      expect(scopeDecisionOrg(undefined, ctx('anything')).org_id).to.equal('anything');
      expect(scopeDecisionOrg(['team-a'], ctx()).org_id).to.equal('team-a');
      expect(scopeDecisionOrg(['team-a'], ctx('team-a')).org_id).to.equal('team-a');
      expect(scopeDecisionOrg(['team-a', 'team-b'], ctx('team-b')).org_id).to.equal('team-b');
      for (const [orgs, org] of [[['team-a'], 'team-b'], [['team-a', 'team-b'], undefined], [['team-a'], '*'], [[], undefined]] as const) {
        const error = rlError(() => scopeDecisionOrg(orgs, ctx(org)));
        expect(error.kind).to.equal('permission_denied');
        expect(error.field).to.equal('org_id');
        expect(error.message).to.match(/^org_id /);
      }
      expect(rlError(() => requireUnrestricted(['team-a'], '/metrics')).kind).to.equal('permission_denied');
      requireUnrestricted(undefined, '/metrics');
    });
  });

  describe('analytics and denied identities through an OrgView', () => {
    const policy = (policy_id: string, org_id?: string) => {
      const result = validatePolicy({ policy_id, scope: { ...(org_id && { org_id }), user_id: '*' }, algorithm: { type: 'fixed_window', limit: 1, window: '1m' } });
      if (!result.ok) throw new Error(JSON.stringify(result.errors));
      return storedPolicy(result.policy, 1, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');
    };
    const matcher = new LiveMatcher();
    matcher.replace([policy('a-limit', 'team-a'), policy('b-limit', 'team-b'), policy('global-limit', '*')]);
    const event = (org_id: string, matched: string, allowed: boolean, tag: string): DecisionEvent =>
      ({
        operation: 'check',
        ctx: { org_id, user_id: 'u1', quantity: 1, tags: { team: tag } },
        decision: { allowed, action: allowed ? 'allow' : 'deny', reason: allowed ? 'within_limit' : 'limit_exceeded', matched_policy_id: matched, remaining: 0, retry_after: 0, reset_after: 0, limit: 1, window: 60, shadow_mode: false, metadata: {} },
      }) as unknown as DecisionEvent;

    it('a restricted view counts its organisations only and lists only the policies it reaches', () => {
      const analytics = new Analytics({ byOrg: true });
      const denied = new DeniedIdentities(matcher);
      const events = [
        ...Array.from({ length: 3 }, () => event('team-a', 'a-limit', true, 'a')),
        event('team-a', 'a-limit', false, 'a'),
        event('team-a', 'global-limit', false, 'a'),
        ...Array.from({ length: 5 }, () => event('team-b', 'b-limit', false, 'b')),
      ];
      for (const e of events) {
        analytics.record(e);
        denied.record(e);
      }
      const all = analytics.summary();
      expect(all).to.include({ total: 10, allowed: 3, denied: 7 });
      expect(all.by_policy.map((p) => p.policy_id)).to.have.members(['a-limit', 'b-limit', 'global-limit']);

      const viewA = new OrgView(['team-a'], matcher);
      const a = analytics.summary(undefined, viewA);
      expect(a).to.include({ total: 5, allowed: 3, denied: 2, shadow: 0 });
      expect(a.by_action).to.deep.equal({ allow: 3, deny: 2 });
      expect(a.by_policy).to.deep.equal([{ policy_id: 'a-limit', total: 4, allowed: 3, denied: 1, shadow: 0 }]);
      expect(a.top_tags).to.deep.equal([{ key: 'team', value: 'a', count: 5 }]);
      expect(denied.top(10, viewA).map((d) => d.policy_id)).to.deep.equal(['a-limit']);

      const viewB = new OrgView(['team-b'], matcher);
      expect(analytics.summary(undefined, viewB)).to.include({ total: 5, allowed: 0, denied: 5 });
      expect(analytics.summary(undefined, viewB).by_policy.map((p) => p.policy_id)).to.deep.equal(['b-limit']);
      expect(denied.top(10, viewB).map((d) => d.policy_id)).to.deep.equal(['b-limit']);

      const both = analytics.summary(1, new OrgView(['team-a', 'team-b'], matcher));
      expect(both).to.include({ total: 10 });
      expect(both.by_policy).to.have.length(1);
      expect(analytics.summary(undefined, new OrgView(['team-c'], matcher))).to.include({ total: 0 });
    });

    it('without byOrg (no credential can be limited) nothing is counted per organisation', () => {
      const analytics = new Analytics();
      analytics.record(event('team-a', 'a-limit', true, 'a'));
      expect(analytics.summary().total).to.equal(1);
      expect(analytics.summary(undefined, new OrgView(['team-a'], matcher)).total).to.equal(0);
    });
  });
});
