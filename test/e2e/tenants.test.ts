/**
 * Tenants: credentials limited to organisations (docs/tenants.md), over real server processes: a platform
 * credential (every organisation) and two teams' credentials, with API keys and with JWTs, over HTTP and
 * gRPC. Each team tries everything on its own and on the other team's policies, analytics, stream and
 * quota; every answer is collected into a table `attempt → status` that must equal the expected table
 * exactly (nothing missing, nothing extra), so a rule that leaks shows as a changed row.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import { envoyClient, rateLimitClient, unary } from '../grpc/helpers.js';
import { serverProcessSuite } from '../support/server-suite.js';

const SECRET = 'tenants-test-secret-long-enough-for-hs256';
const KEYS = { platform: 'platform-key-0123456789', 'team-a': 'team-a-key-0123456789', 'team-b': 'team-b-key-0123456789' };

const policy = (policy_id: string, org_id: string | undefined, limit = 1000) => ({
  policy_id,
  scope: { ...(org_id && { org_id }), user_id: '*' },
  algorithm: { type: 'fixed_window', limit, window: '24h' },
});
const SEED = [policy('a-limit', 'team-a'), policy('b-limit', 'team-b'), policy('global-limit', '*', 1_000_000), policy('concurrency-a', 'team-a')];

type Team = 'team-a' | 'team-b';
const OTHER: Record<Team, Team> = { 'team-a': 'team-b', 'team-b': 'team-a' };
const OWN_POLICY: Record<Team, string> = { 'team-a': 'a-limit', 'team-b': 'b-limit' };
/** What each team lists before it creates its own policy. */
const OWN_LIST: Record<Team, string[]> = { 'team-a': ['a-limit', 'concurrency-a'], 'team-b': ['b-limit'] };

interface Credentials {
  http: Record<string, string>;
  grpc: Record<string, string>;
  /** The audit's changed_by for this credential. */
  author: string;
}

interface Mode {
  name: string;
  env: Record<string, string>;
  credentials: Record<'platform' | Team, Credentials>;
}

const apiKey = (key: string): Credentials => ({
  http: { 'x-api-key': key },
  grpc: { 'x-api-key': key },
  author: `key:${createHash('sha256').update(key).digest('hex').slice(0, 8)}`,
});
const token = (sub: string, orgs?: string[]): Credentials => {
  const value = `Bearer ${jwt.sign({ sub, role: 'admin', ...(orgs && { orgs }) }, SECRET, { algorithm: 'HS256', expiresIn: '1h' })}`;
  return { http: { authorization: value }, grpc: { authorization: value }, author: sub };
};

const MODES: Mode[] = [
  {
    name: 'API keys',
    env: { RL_AUTH_MODE: 'apikey', RL_AUTH_API_KEYS: `${KEYS.platform},${KEYS['team-a']}:admin:team-a,${KEYS['team-b']}:admin:team-b` },
    credentials: { platform: apiKey(KEYS.platform), 'team-a': apiKey(KEYS['team-a']), 'team-b': apiKey(KEYS['team-b']) },
  },
  {
    name: 'JWT',
    env: { RL_AUTH_MODE: 'jwt', RL_AUTH_JWT_SECRET: SECRET },
    credentials: { platform: token('platform-ops'), 'team-a': token('alice@team-a', ['team-a']), 'team-b': token('bob@team-b', ['team-b']) },
  },
];

async function call(base: string, method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(base + path, {
    method,
    headers: { ...headers, ...(body !== undefined && { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON (metrics)
  }
  return { status: response.status, body: parsed };
}

/** The `hello` and first `snapshot` events of the stream, then the connection is closed. */
function streamEvents(base: string, headers: Record<string, string>): Promise<{ status: number; hello?: any; snapshot?: any }> {
  return new Promise((resolve, reject) => {
    const request = http.get(`${base}/rl/v1/stream`, { headers }, (response) => {
      if (response.statusCode !== 200) {
        response.resume();
        return resolve({ status: response.statusCode ?? 0 });
      }
      let text = '';
      const events: Record<string, any> = {};
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        text += chunk;
        for (;;) {
          const end = text.indexOf('\n\n');
          if (end < 0) break;
          const frame = text.slice(0, end);
          text = text.slice(end + 2);
          const name = /^event: (.*)$/m.exec(frame)?.[1];
          const data = /^data: (.*)$/m.exec(frame)?.[1];
          if (name && data && !(name in events)) events[name] = JSON.parse(data);
        }
        if (events.hello && events.snapshot) {
          request.destroy();
          resolve({ status: 200, hello: events.hello, snapshot: events.snapshot });
        }
      });
    });
    request.on('error', reject);
  });
}

async function grpcStatus(client: grpc.Client, method: string, request: unknown, metadata: Record<string, string>): Promise<string> {
  try {
    await unary(client, method, request, { metadata });
    return 'OK';
  } catch (error) {
    const code = (error as grpc.ServiceError).code;
    return grpc.status[code] ?? String(code);
  }
}

for (const mode of MODES) {
  describe(`tenants over real processes (${mode.name})`, function () {
    this.timeout(60_000);
    const suite = serverProcessSuite('rl-tenants-', { policies: SEED, env: () => ({ RL_AUTH_ENABLED: 'true', ...mode.env }) });
    let grpcPort: number;

    before(() => {
      grpcPort = Number(suite.server.logs().find((l) => l.message === 'listening')!.grpc);
    });

    it('each team reaches only its own organisation: every attempt on HTTP and gRPC answers as the table says', async () => {
      const base = suite.server.url;
      const rl = rateLimitClient(`127.0.0.1:${grpcPort}`);
      const envoy = envoyClient(`127.0.0.1:${grpcPort}`);
      const actual: Record<string, number | string> = {};
      const expected: Record<string, number | string> = {};
      const details: Record<string, any> = {};

      for (const team of ['team-a', 'team-b'] as const) {
        const other = OTHER[team];
        const own = OWN_POLICY[team];
        const theirs = OWN_POLICY[other];
        const c = mode.credentials[team];
        const attempts: [string, number | string, () => Promise<{ status: number | string; body?: any }>][] = [
          // Policies: its own reachable, the other team's and the global one absent (404), writes outside its organisation 403.
          ['GET /policies', 200, () => call(base, 'GET', '/rl/v1/policies', c.http)],
          ['GET own', 200, () => call(base, 'GET', `/rl/v1/policies/${own}`, c.http)],
          ['GET theirs', 404, () => call(base, 'GET', `/rl/v1/policies/${theirs}`, c.http)],
          ['GET global', 404, () => call(base, 'GET', '/rl/v1/policies/global-limit', c.http)],
          ['GET unknown', 404, () => call(base, 'GET', '/rl/v1/policies/no-such-policy', c.http)],
          ['GET theirs/versions', 404, () => call(base, 'GET', `/rl/v1/policies/${theirs}/versions`, c.http)],
          ['GET theirs/audit', 404, () => call(base, 'GET', `/rl/v1/policies/${theirs}/audit`, c.http)],
          ['PUT theirs', 404, () => call(base, 'PUT', `/rl/v1/policies/${theirs}`, c.http, policy(theirs, team))],
          ['PATCH theirs', 404, () => call(base, 'PATCH', `/rl/v1/policies/${theirs}`, c.http, { priority: 5 })],
          ['PATCH global', 404, () => call(base, 'PATCH', '/rl/v1/policies/global-limit', c.http, { priority: 5 })],
          ['POST theirs/rollout', 404, () => call(base, 'POST', `/rl/v1/policies/${theirs}/rollout`, c.http, { rollout_percent: 10 })],
          ['POST theirs/rollback', 404, () => call(base, 'POST', `/rl/v1/policies/${theirs}/rollback`, c.http, { version: 1 })],
          ['DELETE theirs', 404, () => call(base, 'DELETE', `/rl/v1/policies/${theirs}`, c.http)],
          ['DELETE global', 404, () => call(base, 'DELETE', '/rl/v1/policies/global-limit', c.http)],
          ['POST in their org', 403, () => call(base, 'POST', '/rl/v1/policies', c.http, policy(`${team}-new-1`, other))],
          ['POST global', 403, () => call(base, 'POST', '/rl/v1/policies', c.http, policy(`${team}-new-2`, '*'))],
          ['POST without org', 403, () => call(base, 'POST', '/rl/v1/policies', c.http, policy(`${team}-new-3`, undefined))],
          ['POST taken id', 409, () => call(base, 'POST', '/rl/v1/policies', c.http, policy(theirs, team))],
          ['POST own', 201, () => call(base, 'POST', '/rl/v1/policies', c.http, { ...policy(`${team}-new`, team), scope: { org_id: team, service: 'new' } })],
          ['PATCH own out of its org', 403, () => call(base, 'PATCH', `/rl/v1/policies/${team}-new`, c.http, { scope: { org_id: other } })],
          ['PUT own out of its org', 403, () => call(base, 'PUT', `/rl/v1/policies/${team}-new`, c.http, policy(`${team}-new`, '*'))],
          ['PATCH own', 200, () => call(base, 'PATCH', `/rl/v1/policies/${team}-new`, c.http, { priority: 3 })],
          ['GET own/audit', 200, () => call(base, 'GET', `/rl/v1/policies/${team}-new/audit`, c.http)],
          ['validate in their org', 403, () => call(base, 'POST', '/rl/v1/policies/validate', c.http, policy('x', other))],
          ['validate own', 200, () => call(base, 'POST', '/rl/v1/policies/validate', c.http, policy('x', team))],
          // Decisions: its own organisation (or none: filled in), never the other's.
          ['check own org', 200, () => call(base, 'POST', '/rl/v1/check', c.http, { org_id: team, user_id: 'u1' })],
          ['check no org', 200, () => call(base, 'POST', '/rl/v1/check', c.http, { user_id: 'u1' })],
          ['check their org', 403, () => call(base, 'POST', '/rl/v1/check', c.http, { org_id: other, user_id: 'u1' })],
          ['check their org (Koa path)', 403, () =>
            fetch(`${base}/rl/v1/check/`, { method: 'POST', headers: { ...c.http, 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify({ org_id: other }) }).then((r) => ({ status: r.status }))],
          ['acquire their org', 403, () => call(base, 'POST', '/rl/v1/acquire', c.http, { org_id: other, user_id: 'u1' })],
          ['release their org', 403, () => call(base, 'POST', '/rl/v1/release', c.http, { org_id: other, user_id: 'u1' })],
          ['refund their org', 403, () => call(base, 'POST', '/rl/v1/refund', c.http, { org_id: other, user_id: 'u1', quantity: 1 })],
          ['refund own org', 200, () => call(base, 'POST', '/rl/v1/refund', c.http, { org_id: team, user_id: 'u1', quantity: 1 })],
          // What it sees.
          ['GET analytics', 200, () => call(base, 'GET', '/rl/v1/analytics/summary', c.http)],
          ['GET /metrics', 403, () => call(base, 'GET', '/metrics', c.http)],
          ['GET stream', 200, () => streamEvents(base, c.http)],
          // gRPC.
          ['gRPC CheckLimit own org', 'OK', async () => ({ status: await grpcStatus(rl, 'CheckLimit', { org_id: team, user_id: 'u2' }, c.grpc) })],
          ['gRPC CheckLimit no org', 'OK', async () => ({ status: await grpcStatus(rl, 'CheckLimit', { user_id: 'u2' }, c.grpc) })],
          ['gRPC CheckLimit their org', 'PERMISSION_DENIED', async () => ({ status: await grpcStatus(rl, 'CheckLimit', { org_id: other, user_id: 'u2' }, c.grpc) })],
          ['gRPC Acquire their org', 'PERMISSION_DENIED', async () => ({ status: await grpcStatus(rl, 'Acquire', { org_id: other, user_id: 'u2' }, c.grpc) })],
          ['gRPC Release their org', 'PERMISSION_DENIED', async () => ({ status: await grpcStatus(rl, 'Release', { org_id: other, user_id: 'u2' }, c.grpc) })],
          ['gRPC Refund their org', 'PERMISSION_DENIED', async () => ({ status: await grpcStatus(rl, 'Refund', { org_id: other, user_id: 'u2', quantity: 1 }, c.grpc) })],
          ['gRPC ShouldRateLimit', 'PERMISSION_DENIED', async () => ({ status: await grpcStatus(envoy, 'ShouldRateLimit', { domain: 'edge', descriptors: [{ entries: [{ key: 'user_id', value: 'u3' }] }] }, c.grpc) })],
        ];
        for (const [name, status, attempt] of attempts) {
          const key = `${team} ${name}`;
          expected[key] = status;
          const result = await attempt();
          actual[key] = result.status;
          details[key] = result;
        }

        // What the allowed answers held.
        expect(details[`${team} GET /policies`].body.map((p: { policy_id: string }) => p.policy_id)).to.deep.equal(OWN_LIST[team]);
        expect(details[`${team} POST in their org`].body.error).to.match(/^scope\.org_id /);
        expect(details[`${team} check their org`].body).to.include({ field: 'org_id' });
        expect(details[`${team} check their org`].body.error).to.match(/^org_id /);
        expect(details[`${team} POST taken id`].body.error).not.to.contain('version');
        const audit = details[`${team} GET own/audit`].body as { changed_by: string }[];
        expect(audit.map((e) => e.changed_by)).to.deep.equal([c.author, c.author]);
        for (const text of [JSON.stringify(audit), JSON.stringify(details)]) for (const key of Object.values(KEYS)) expect(text).not.to.contain(key);
        const analytics = details[`${team} GET analytics`].body;
        expect(analytics.by_policy.every((p: { policy_id: string }) => p.policy_id === own || p.policy_id === `${team}-new` || p.policy_id === 'concurrency-a')).to.equal(true);
        const stream = details[`${team} GET stream`];
        expect(stream.snapshot.policies.every((p: { policy_id: string }) => p.policy_id === own || p.policy_id === `${team}-new` || p.policy_id === 'concurrency-a')).to.equal(true);
        expect(stream.snapshot.fail_open_rate).to.equal(0);
      }

      // The platform credential reaches everything, Envoy's adapter and /metrics included.
      const p = mode.credentials.platform;
      const platform: [string, number | string, () => Promise<{ status: number | string; body?: any }>][] = [
        ['GET /policies', 200, () => call(base, 'GET', '/rl/v1/policies', p.http)],
        ['GET global', 200, () => call(base, 'GET', '/rl/v1/policies/global-limit', p.http)],
        ['GET b-limit', 200, () => call(base, 'GET', '/rl/v1/policies/b-limit', p.http)],
        ['check any org', 200, () => call(base, 'POST', '/rl/v1/check', p.http, { org_id: 'team-b', user_id: 'u9' })],
        ['GET /metrics', 200, () => call(base, 'GET', '/metrics', p.http)],
        ['GET analytics', 200, () => call(base, 'GET', '/rl/v1/analytics/summary', p.http)],
        ['gRPC ShouldRateLimit', 'OK', async () => ({ status: await grpcStatus(envoy, 'ShouldRateLimit', { domain: 'edge', descriptors: [{ entries: [{ key: 'user_id', value: 'u3' }] }] }, p.grpc) })],
        ['gRPC CheckLimit any org', 'OK', async () => ({ status: await grpcStatus(rl, 'CheckLimit', { org_id: 'team-a', user_id: 'u9' }, p.grpc) })],
      ];
      for (const [name, status, attempt] of platform) {
        const key = `platform ${name}`;
        expected[key] = status;
        const result = await attempt();
        actual[key] = result.status;
        details[key] = result;
      }
      rl.close();
      envoy.close();

      expect(actual).to.deep.equal(expected);

      // The listing's ETag is the caller's listing's: the platform's tag does not validate a team's copy.
      const etag = async (headers: Record<string, string>, ifNoneMatch?: string) => {
        const response = await fetch(`${base}/rl/v1/policies`, { headers: { ...headers, ...(ifNoneMatch && { 'if-none-match': ifNoneMatch }) } });
        await response.arrayBuffer();
        return { status: response.status, etag: response.headers.get('etag') ?? '' };
      };
      const platformTag = (await etag(p.http)).etag;
      const teamTag = (await etag(mode.credentials['team-a'].http)).etag;
      expect(teamTag).not.to.equal(platformTag);
      expect((await etag(mode.credentials['team-a'].http, platformTag)).status).to.equal(200);
      expect((await etag(mode.credentials['team-a'].http, teamTag)).status).to.equal(304);

      // The platform sees every team's policies and decisions; each team's decisions were counted in its own view.
      const all = details['platform GET /policies'].body.map((x: { policy_id: string }) => x.policy_id);
      expect(all).to.include.members(['a-limit', 'b-limit', 'global-limit', 'team-a-new', 'team-b-new']);
      const a = await call(base, 'GET', '/rl/v1/analytics/summary', mode.credentials['team-a'].http);
      const total = await call(base, 'GET', '/rl/v1/analytics/summary', p.http);
      // team-a: 2 HTTP checks and 2 gRPC checks allowed (refunds are not counted), plus the platform's gRPC check in team-a.
      expect(a.body.total).to.equal(5);
      expect(total.body.total).to.be.greaterThan(a.body.total);
      // No team's quota was spent by the other: team-b's counter for u1 saw only team-b's own two checks.
      const peek = await call(base, 'POST', '/rl/v1/check', mode.credentials['team-b'].http, { user_id: 'u1', quantity: 0 });
      expect(peek.body).to.include({ matched_policy_id: 'b-limit', remaining: 1000 - 2 + 1 });
    });
  });
}
