/**
 * Stacked limits over a real server process, in memory mode and on Redis: window and concurrency layers
 * (a refused request spends in no layer, seen by peeking afterwards), a layer served by a process lease
 * (on Redis its holder answers, and a refusal by another layer gives its units back to the holder),
 * tenants (a platform layer binds every organisation's traffic, and only the platform may write it), and
 * Envoy's RLS over gRPC (three descriptors decided together, or each on its own with RL_ENVOY_CONSUME_ALL).
 * The in-process rules are in test/layers; this file checks the server as it is started.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import { envoyClient, unary } from '../grpc/helpers.js';
import { getSuiteRedis } from '../support/counter-stores.js';
import { callApi, type ApiAnswer } from '../support/http.js';
import { randomPrefix } from '../support/redis.js';
import { startServerProcess, type ServerProcessHandle } from '../support/server-process.js';

const PLATFORM = 'platform-key-0123456789';
const TEAM_A = 'team-a-key-0123456789';
const TEAM_B = 'team-b-key-0123456789';

/** A day's window: a test never straddles its end in practice, and no counter resets under it. */
const window = (limit: number) => ({ type: 'fixed_window', limit, window: '24h' });
const slots = (max: number) => ({ type: 'concurrency', max_concurrency: max, lease_ttl: '1m' });

const POLICIES = [
  { policy_id: 'w-user', layer: 'user', scope: { endpoint: '/w', user_id: '*' }, algorithm: window(5) },
  { policy_id: 'w-org', layer: 'org', scope: { endpoint: '/w', org_id: '*' }, algorithm: window(8) },
  { policy_id: 'c-user', layer: 'user', scope: { endpoint: '/c', user_id: '*' }, algorithm: slots(2) },
  { policy_id: 'c-org', layer: 'org', scope: { endpoint: '/c', org_id: '*' }, algorithm: slots(3) },
  // A leased layer over a per-org one; the org `small` admits only 3.
  { policy_id: 'l-user', layer: 'user', scope: { endpoint: '/l', user_id: '*' }, algorithm: window(12), lease: { max_units: 4, max_hold: '30s' } },
  { policy_id: 'l-org', layer: 'org', scope: { endpoint: '/l', org_id: '*' }, algorithm: window(1000) },
  { policy_id: 'l-small', layer: 'org', scope: { endpoint: '/l', org_id: 'small' }, algorithm: window(3) },
  { policy_id: 'e-user', layer: 'user', scope: { user_id: '*', tags: { domain: 'rls' } }, algorithm: window(3) },
  { policy_id: 'e-all', layer: 'all', scope: { tags: { domain: 'rls' } }, algorithm: window(100) },
];

interface Server {
  process: ServerProcessHandle;
  envoy: grpc.Client;
  call(key: string, method: string, path: string, body?: unknown): Promise<ApiAnswer>;
  /** A decision with the platform key: `/check`, `/acquire`, `/release`. */
  decide(path: string, body: Record<string, unknown>): Promise<any>;
  /** Every layer's remaining, by policy, from a check of quantity 0. */
  peek(body: Record<string, unknown>): Promise<Record<string, number>>;
  rls(...users: string[]): Promise<Array<[string, number]>>;
}

async function startServer(dir: string, env: Record<string, string>): Promise<Server> {
  const process = await startServerProcess({
    RL_POLICY_FILE: join(dir, 'policies.json'),
    RL_DATA_DIR: join(dir, `data-${randomPrefix()}`),
    RL_AUTH_ENABLED: 'true',
    RL_AUTH_MODE: 'apikey',
    RL_AUTH_API_KEYS: `${PLATFORM},${TEAM_A}:admin:team-a,${TEAM_B}:admin:team-b`,
    // A refill never times a decision out here, however loaded the machine.
    RL_LEASE_MAX_WAIT_MS: '10000',
    ...env,
  });
  const envoy = envoyClient(`127.0.0.1:${Number(process.logs().find((l) => l.message === 'listening')!.grpc)}`);
  const call = (key: string, method: string, path: string, body?: unknown) => callApi(process.url, key, method, path, body);
  const decide = async (path: string, body: Record<string, unknown>) => (await call(PLATFORM, 'POST', path, body)).body;
  return {
    process,
    envoy,
    call,
    decide,
    async peek(body) {
      const answer = await decide('/check', { ...body, quantity: 0 });
      return Object.fromEntries((answer.layers as Array<{ policy_id: string; remaining: number }>).map((l) => [l.policy_id, l.remaining]));
    },
    async rls(...users) {
      const descriptors = users.map((user) => ({ entries: [{ key: 'user_id', value: user }] }));
      const response = await unary(envoy, 'ShouldRateLimit', { domain: 'rls', descriptors }, { metadata: { 'x-api-key': PLATFORM } });
      return response.statuses.map((s: { code: string; limit_remaining: number }) => [s.code, s.limit_remaining]);
    },
  };
}

const MODES: Array<{ name: string; env: () => Promise<Record<string, string>> }> = [
  { name: 'memory', env: async () => ({}) },
  { name: 'Redis', env: async () => ({ RL_COUNTERSTORE_ADDR: (await getSuiteRedis()).url, RL_KEY_PREFIX: randomPrefix() }) },
];

for (const mode of MODES) {
  describe(`layers over a real server process (${mode.name})`, function () {
    this.timeout(90_000);
    let dir: string;
    let server: Server;
    /** The same policies with RL_ENVOY_CONSUME_ALL=true, on counters of its own. */
    let consumeAll: Server;

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'rl-layers-process-'));
      writeFileSync(join(dir, 'policies.json'), JSON.stringify(POLICIES));
      [server, consumeAll] = await Promise.all([
        startServer(dir, await mode.env()),
        startServer(dir, { ...(await mode.env()), RL_ENVOY_CONSUME_ALL: 'true' }),
      ]);
    });
    after(async () => {
      for (const s of [server, consumeAll]) s?.envoy.close();
      await Promise.all([server?.process.stop(), consumeAll?.process.stop()]);
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('window layers: a request refused by one layer spends in none', async () => {
      const u1 = { endpoint: '/w', org_id: 'o1', user_id: 'u1' };
      const answers = [];
      for (let i = 0; i < 6; i++) answers.push(await server.decide('/check', u1));
      expect(answers.map((a) => a.allowed)).to.deep.equal([true, true, true, true, true, false]);
      expect(answers[5].layers.map((l: any) => [l.policy_id, l.allowed])).to.deep.equal([['w-org', true], ['w-user', false]]);
      // The user's refusal took nothing of the org: 8 - 5.
      expect(await server.peek(u1)).to.deep.equal({ 'w-org': 3, 'w-user': 0 });
      const u2 = { ...u1, user_id: 'u2' };
      const second = [];
      for (let i = 0; i < 4; i++) second.push((await server.decide('/check', u2)).allowed);
      expect(second).to.deep.equal([true, true, true, false]);
      // The org's refusal took nothing of u2.
      expect(await server.peek(u2)).to.deep.equal({ 'w-org': 0, 'w-user': 2 });
    });

    it('concurrency layers: an acquire holds a slot in every layer or in none', async () => {
      const acquire = async (user: string, request: string) => (await server.decide('/acquire', { endpoint: '/c', org_id: 'o1', user_id: user, request_id: request })).allowed;
      const held = [await acquire('a', 'r1'), await acquire('a', 'r2'), await acquire('a', 'r3')];
      expect(held).to.deep.equal([true, true, false]);
      // a's refused third held no org slot: b gets the org's third, then the org refuses b's second.
      expect([await acquire('b', 'r4'), await acquire('b', 'r5')]).to.deep.equal([true, false]);
      const released = await server.decide('/release', { endpoint: '/c', org_id: 'o1', user_id: 'a', request_id: 'r1' });
      expect(released.layers.map((l: any) => [l.policy_id, l.reason])).to.deep.equal([['c-org', 'lease_released'], ['c-user', 'lease_released']]);
      // b's refused r5 held no user slot either: with one org slot freed it gets it.
      expect(await acquire('b', 'r5')).to.equal(true);
    });

    it('a leased layer: refusals by another layer give its units back; the counter ends at what was admitted', async () => {
      const answers = [];
      for (let i = 0; i < 20; i++) answers.push(await server.decide('/check', { endpoint: '/l', org_id: i % 2 === 0 ? 'big' : 'small', user_id: 'seq' }));
      // big and small alternate: small admits its 3, big the rest of the 12 the user layer allows.
      const admitted = answers.map((a, i) => (a.allowed ? i : -1)).filter((i) => i >= 0);
      expect(admitted).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 14, 16]);
      expect(answers[18].layers.find((l: any) => l.policy_id === 'l-user')).to.include({ allowed: false, reason: 'limit_exceeded' });
      // The deciding layer's metadata: on Redis the leased layer's answers come from the process's units.
      const decidedByLease = answers.filter((a) => a.matched_policy_id === 'l-user');
      expect(decidedByLease.map((a) => a.metadata.lease)).to.deep.equal(decidedByLease.map(() => (mode.name === 'Redis' ? 'local' : undefined)));
      expect(await server.peek({ endpoint: '/l', org_id: 'big', user_id: 'seq' })).to.deep.equal({ 'l-org': 1000 - 9, 'l-user': 0 });
    });

    it('a leased layer under 10 concurrent checks: once the answers are in, admitted and remaining add up to the limit', async () => {
      let admitted = 0;
      for (let round = 0; round < 3; round++) {
        const checks = Array.from({ length: 10 }, (_, i) => server.decide('/check', { endpoint: '/l', org_id: i % 2 === 0 ? 'big' : 'small', user_id: 'par' }));
        admitted += (await Promise.all(checks)).filter((a) => a.allowed).length;
      }
      // A check may be refused while another's unit, about to be given back, is still out: never a unit lost.
      const { 'l-user': remaining } = await server.peek({ endpoint: '/l', org_id: 'big', user_id: 'par' });
      expect(admitted).to.be.at.most(12);
      expect(admitted + remaining).to.equal(12);
    });

    it('tenants: only the platform writes a platform layer, and it binds every organisation', async () => {
      const cap = { policy_id: 'p-cap', layer: 'platform', scope: { endpoint: '/t', org_id: '*' }, algorithm: window(2) };
      const denied = await server.call(TEAM_A, 'POST', '/policies', { ...cap, policy_id: 'a-cap', scope: { endpoint: '/t', org_id: 'team-a' } });
      expect([denied.status, denied.body.field]).to.deep.equal([403, 'layer']);
      expect((await server.call(PLATFORM, 'POST', '/policies', cap)).status).to.equal(201);
      const own = (org: string, key: string) => server.call(key, 'POST', '/policies', { policy_id: `${org}-own`, scope: { endpoint: '/t', org_id: org, user_id: '*' }, algorithm: window(10) });
      expect([(await own('team-a', TEAM_A)).status, (await own('team-b', TEAM_B)).status]).to.deep.equal([201, 201]);
      for (const [org, key] of [['team-a', TEAM_A], ['team-b', TEAM_B]]) {
        const answers = [];
        for (let i = 0; i < 3; i++) answers.push((await server.call(key, 'POST', '/check', { endpoint: '/t', org_id: org, user_id: 'u' })).body);
        expect(answers.map((a) => [a.allowed, a.matched_policy_id])).to.deep.equal([[true, 'p-cap'], [true, 'p-cap'], [false, 'p-cap']]);
        // The platform's refusal took nothing of the team's own layer.
        expect(await server.peek({ endpoint: '/t', org_id: org, user_id: 'u' })).to.deep.equal({ [`${org}-own`]: 8, 'p-cap': 0 });
      }
    });

    it('Envoy RLS, three descriptors: one refuses, the others spend nothing; with RL_ENVOY_CONSUME_ALL each counts', async () => {
      for (const s of [server, consumeAll]) for (let i = 0; i < 3; i++) await s.rls('carol');
      expect(await server.rls('alice', 'bob', 'carol')).to.deep.equal([['OK', 3], ['OK', 3], ['OVER_LIMIT', 0]]);
      for (const user of ['alice', 'bob']) expect(await server.peek({ user_id: user, tags: { domain: 'rls' } })).to.deep.equal({ 'e-all': 97, 'e-user': 3 });
      expect(await consumeAll.rls('alice', 'bob', 'carol')).to.deep.equal([['OK', 2], ['OK', 2], ['OVER_LIMIT', 0]]);
      // alice and bob counted in both their layers; carol's refusal by her own layer took nothing of `all`.
      for (const user of ['alice', 'bob']) expect(await consumeAll.peek({ user_id: user, tags: { domain: 'rls' } })).to.deep.equal({ 'e-all': 95, 'e-user': 2 });
    });
  });
}
