/**
 * End to end with real processes: one Redis, two server processes sharing it (policies and counters),
 * and sidecar agents, all started as the deployment would start them.
 *
 *   server A ─┐                     ┌─ agent 1: upstream B, sync every hour, in A's and B's
 *             ├── Redis (shared) ───┤           RL_INVALIDATION_TARGETS (with an invalidate token)
 *   server B ─┘                     └─ agent 2: upstream A, sync every 1 s, in nobody's targets
 *
 * Server A's targets also list a target that never answers and one that refuses connections: policy
 * changes through A must not be slowed by them.
 *
 * No assertion here times anything (the machine is shared and noisy): how a change reached an agent is
 * shown by what can have brought it (agent 1's periodic sync is an hour away, agent 2 is nobody's
 * target), and that the API does not wait for a hung target by the order of events. Waits poll with a
 * deadline that only turns a hang into a clear failure.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { parseBody, postJson } from '../support/http.js';
import { randomPrefix, startPrivateRedis, type RedisHandle } from '../support/redis.js';
import { startServerProcess, type ServerProcessHandle } from '../support/server-process.js';

const ADMIN_KEY = 'e2e-admin-key';
const AGENT_KEY = 'e2e-agent-key';
const INVALIDATE_TOKEN = 'e2e-invalidate-token';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function freePort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Polls `probe` until it returns true; the deadline is a hang guard, no claim about speed. */
async function eventually(probe: () => Promise<boolean>, intervalMs = 20, timeoutMs = 15_000): Promise<void> {
  const started = Date.now();
  for (;;) {
    if (await probe()) return;
    if (Date.now() - started > timeoutMs) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(intervalMs);
  }
}

/** What the never-answering target saw, in the order it happened (with the test's own events). */
type Event =
  | { kind: 'answered'; policy_id: string; version: number | undefined }
  | { kind: 'hung_received'; request: number; policy_id: string; version: number }
  | { kind: 'hung_closed'; request: number };

describe('sidecar end to end (real processes)', function () {
  this.timeout(60_000);

  let redis: RedisHandle;
  let dir: string;
  let serverA: ServerProcessHandle;
  let serverB: ServerProcessHandle;
  let agent1: ServerProcessHandle;
  let agent2: ServerProcessHandle;
  let serverEnv: Record<string, string>;
  let portB: number;
  let hung: http.Server;
  const hungRequests: string[] = [];
  const events: Event[] = [];
  let refusedUrl: string;

  const admin = { 'x-api-key': ADMIN_KEY };
  const agentUrl = (agent: ServerProcessHandle) => agent.url;
  const check = async (agent: ServerProcessHandle, body: unknown) => (await postJson(`${agentUrl(agent)}/rl/v1/check`, body)).body;
  const createPolicy = (server: ServerProcessHandle, policy: Record<string, unknown>) =>
    postJson(`${server.url}/rl/v1/policies`, policy, admin);
  const policy = (id: string, over: Record<string, unknown> = {}) => ({
    policy_id: id,
    scope: { service: id },
    algorithm: { type: 'fixed_window', limit: 1000, window: '1h' },
    ...over,
  });

  before(async () => {
    redis = await startPrivateRedis();
    dir = mkdtempSync(join(tmpdir(), 'rl-e2e-'));
    const policyFile = join(dir, 'policies.json');
    writeFileSync(policyFile, '{"policies": []}');

    hung = http.createServer((req, res) => {
      const request = hungRequests.push(req.url ?? '');
      let text = '';
      req.on('data', (chunk) => (text += chunk));
      req.on('end', () => {
        const change = JSON.parse(text);
        events.push({ kind: 'hung_received', request, policy_id: change.policy_id, version: change.version });
      });
      // Never answered: it ends only when server A gives up on it.
      res.on('close', () => events.push({ kind: 'hung_closed', request }));
    });
    await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
    refusedUrl = `http://127.0.0.1:${await freePort()}`;

    const [portA, pB, portAgent1] = await Promise.all([freePort(), freePort(), freePort()]);
    portB = pB;
    const agent1Target = `http://127.0.0.1:${portAgent1}`;
    const hungUrl = `http://127.0.0.1:${(hung.address() as AddressInfo).port}`;
    serverEnv = {
      RL_COUNTERSTORE_ADDR: redis.url,
      RL_KEY_PREFIX: randomPrefix(),
      RL_COUNTERSTORE_TIMEOUT_MS: '500',
      RL_POLICY_FILE: policyFile,
      RL_DATA_DIR: dir,
      RL_DRAIN_SECS: '1',
      RL_AUTH_ENABLED: 'true',
      RL_AUTH_MODE: 'apikey',
      RL_AUTH_API_KEYS: `${ADMIN_KEY},${AGENT_KEY}:read-only`,
      RL_INVALIDATION_TOKEN: INVALIDATE_TOKEN,
    };
    [serverA, serverB] = await Promise.all([
      startServerProcess({
        ...serverEnv,
        RL_HTTP_ADDR: `127.0.0.1:${portA}`,
        RL_INVALIDATION_TARGETS: [agent1Target, hungUrl, refusedUrl].join(','),
      }),
      startServerProcess({ ...serverEnv, RL_HTTP_ADDR: `127.0.0.1:${portB}`, RL_INVALIDATION_TARGETS: agent1Target }),
    ]);
    const agentEnv = {
      RL_AGENT_API_KEY: AGENT_KEY,
      RL_AGENT_UPSTREAM_TIMEOUT_MS: '300',
      RL_DRAIN_SECS: '1',
    };
    [agent1, agent2] = await Promise.all([
      startServerProcess(
        {
          ...agentEnv,
          RL_AGENT_LISTEN: `127.0.0.1:${portAgent1}`,
          RL_UPSTREAM_HTTP: serverB.url,
          // An hour: within this suite, only an invalidation can bring agent 1 a change.
          RL_AGENT_SYNC_SECS: '3600',
          RL_AGENT_INVALIDATE_TOKEN: INVALIDATE_TOKEN,
        },
        { entry: 'src/agent/main.ts' },
      ),
      startServerProcess(
        { ...agentEnv, RL_AGENT_LISTEN: '127.0.0.1:0', RL_UPSTREAM_HTTP: serverA.url, RL_AGENT_SYNC_SECS: '1' },
        { entry: 'src/agent/main.ts' },
      ),
    ]);
  });

  after(async () => {
    await Promise.all([agent1, agent2, serverA, serverB].map((p) => p?.stop('SIGTERM', 5000)));
    hung?.closeAllConnections();
    await new Promise((resolve) => (hung ? hung.close(resolve) : resolve(undefined)));
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('agents start, sync with their credential and report status', async () => {
    for (const agent of [agent1, agent2]) {
      // The agent listens at once and syncs right after: the first sync may still be on its way.
      const status = async () => parseBody(await fetch(`${agent.url}/rl/v1/agent/status`));
      await eventually(async () => (await status()).last_sync_ok === true);
      expect(await status()).to.include({ last_sync_ok: true, policies: 0, mode: 'forward' });
    }
    expect((await check(agent1, { service: 'nothing' })).reason).to.equal('no_matching_policy');
  });

  it('a policy created on server A changes the agent decisions at once: by invalidation, not by its periodic sync (agent upstream is B)', async () => {
    expect((await check(agent1, { service: 'e2e-inv' })).reason).to.equal('no_matching_policy');
    const before = await parseBody(await fetch(`${agent1.url}/rl/v1/agent/status`));
    const created = await createPolicy(serverA, policy('e2e-inv'));
    expect(created.status).to.equal(201);
    await eventually(async () => (await check(agent1, { service: 'e2e-inv' })).matched_policy_id === 'e2e-inv');
    const status = await parseBody(await fetch(`${agent1.url}/rl/v1/agent/status`));
    // Its periodic sync is an hour away: the invalidation it received brought the change.
    expect(status.sync_interval_secs).to.equal(3600);
    expect(status.invalidations).to.be.at.least(before.invalidations + 1);
  });

  it('with the invalidation lost, the change arrives with the next periodic sync', async () => {
    const created = await createPolicy(serverB, policy('e2e-lost'));
    expect(created.status).to.equal(201);
    // Agent 2 is nobody's target: only its 1 s periodic sync (through server A) can bring the change.
    // Once its upstream has the change, the first sync that starts after that brings it: the sync in
    // flight may have read before, the one after it cannot have. So after two completed syncs it is there.
    await eventually(async () => (await fetch(`${serverA.url}/rl/v1/policies/e2e-lost`, { headers: admin })).status === 200);
    const lastSyncAt = async () => (await parseBody(await fetch(`${agent2.url}/rl/v1/agent/status`))).last_sync_at as string;
    let seen = await lastSyncAt();
    for (let completed = 0; completed < 2; completed++) {
      const previous = seen;
      await eventually(async () => (seen = await lastSyncAt()) !== previous);
    }
    expect(await check(agent2, { service: 'e2e-lost' })).to.include({ matched_policy_id: 'e2e-lost' });
    const status = await parseBody(await fetch(`${agent2.url}/rl/v1/agent/status`));
    expect(status.invalidations).to.equal(0);
    expect(status.sync_interval_secs).to.equal(1);
  });

  it('two servers together admit exactly the limit across both', async () => {
    const created = await createPolicy(serverA, policy('e2e-shared', { algorithm: { type: 'fixed_window', limit: 10, window: '1h' } }));
    expect(created.status).to.equal(201);
    await eventually(async () => (await fetch(`${serverB.url}/rl/v1/policies/e2e-shared`, { headers: admin })).status === 200);
    const calls = Array.from({ length: 30 }, (_, i) =>
      postJson(`${(i % 2 === 0 ? serverA : serverB).url}/rl/v1/check`, { service: 'e2e-shared', user_id: 'u' }, admin),
    );
    const answers = await Promise.all(calls);
    expect(answers.every((a) => a.status === 200)).to.equal(true);
    expect(answers.filter((a) => a.body.allowed).length).to.equal(10);
    expect(answers.filter((a) => !a.body.allowed).every((a) => a.body.reason === 'limit_exceeded')).to.equal(true);
  });

  it('the sidecar counts client networks (source_ip_prefix): spellings and addresses of one network share a counter', async () => {
    const created = await createPolicy(serverA, policy('e2e-net', { scope: { service: 'e2e-net', source_ip: '*' }, source_ip_prefix: { v4: 24, v6: 48 }, algorithm: { type: 'fixed_window', limit: 2, window: '1h' } }));
    expect(created.status).to.equal(201);
    await eventually(async () => (await check(agent1, { service: 'e2e-net', source_ip: '10.0.0.1' })).matched_policy_id === 'e2e-net');
    // 10.0.0.1 was counted once above; ::ffff:10.0.0.200 is in the same /24.
    expect(await check(agent1, { service: 'e2e-net', source_ip: '::ffff:10.0.0.200' })).to.include({ allowed: true, remaining: 0 });
    expect(await check(agent1, { service: 'e2e-net', source_ip: '10.0.0.9' })).to.include({ allowed: false });
    const v6 = ['2001:DB8:1::1', '2001:db8:1:ff::2', '2001:0db8:0001:0000::3'];
    const answers = [];
    for (const ip of v6) answers.push((await check(agent1, { service: 'e2e-net', source_ip: ip })).allowed);
    expect(answers).to.deep.equal([true, true, false]);
  });

  it('a target that hangs or refuses never delays the API response of a policy change', async () => {
    const before = hungRequests.length;
    const answered = (policy_id: string, version: number | undefined) => events.push({ kind: 'answered', policy_id, version });
    for (let i = 0; i < 5; i++) {
      const created = await createPolicy(serverA, policy(`e2e-fast-${i}`));
      expect(created.status).to.equal(201);
      answered(`e2e-fast-${i}`, created.body.version);
    }
    const put = await fetch(`${serverA.url}/rl/v1/policies/e2e-fast-0`, {
      method: 'PUT',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify(policy('e2e-fast-0', { priority: 5 })),
    });
    expect(put.status).to.equal(200);
    answered('e2e-fast-0', (await put.json()).version);
    const deleted = await fetch(`${serverA.url}/rl/v1/policies/e2e-fast-1`, { method: 'DELETE', headers: admin });
    expect(deleted.status).to.equal(200);
    answered('e2e-fast-1', undefined);

    // The hanging target is really notified of these changes (one at a time, the latest coalesced).
    await eventually(async () => events.some((e) => e.kind === 'hung_received' && e.policy_id.startsWith('e2e-fast-')));
    expect(hungRequests.length).to.be.greaterThan(before);
    expect(hungRequests.every((path) => path === '/rl/v1/agent/invalidate')).to.equal(true);
    // It never answers, so a request to it ends only when server A gives up on it (its timeout). Had
    // the API waited for the notification, the change's answer would come after that end; it came while
    // the request was still open (or before it was even sent).
    const position = (predicate: (e: Event) => boolean) => events.findIndex(predicate);
    for (const received of events.filter((e) => e.kind === 'hung_received' && e.policy_id.startsWith('e2e-fast-'))) {
      if (received.kind !== 'hung_received') continue;
      const answers = events.filter((e) => e.kind === 'answered' && e.policy_id === received.policy_id);
      const cause = answers.find((e) => e.kind === 'answered' && e.version === received.version) ?? answers.at(-1)!;
      const closed = position((e) => e.kind === 'hung_closed' && e.request === received.request);
      const shown = `${received.policy_id} v${received.version}: answered at event ${events.indexOf(cause)}, hung request closed at ${closed}`;
      if (closed >= 0) expect(events.indexOf(cause), shown).to.be.lessThan(closed);
    }
  });

  it('the agent answers by failure_mode while its server is killed, and recovers when it returns', async () => {
    const created = await createPolicy(serverA, policy('e2e-down', { failure_mode: 'fail_closed' }));
    expect(created.status).to.equal(201);
    const openCreated = await createPolicy(serverA, policy('e2e-down-open'));
    expect(openCreated.status).to.equal(201);
    await eventually(async () => (await check(agent1, { service: 'e2e-down-open' })).matched_policy_id === 'e2e-down-open');
    await eventually(async () => (await check(agent1, { service: 'e2e-down' })).matched_policy_id === 'e2e-down');

    await serverB.kill();
    const statusOf = async () => parseBody(await fetch(`${agent1.url}/rl/v1/agent/status`));
    const before = (await statusOf()).decisions;
    for (let i = 0; i < 5; i++) {
      const closed = await check(agent1, { service: 'e2e-down' });
      const open = await check(agent1, { service: 'e2e-down-open' });
      expect(closed).to.include({ allowed: false, action: 'deny', reason: 'counter_store_unavailable', matched_policy_id: 'e2e-down' });
      expect(open).to.include({ allowed: true, action: 'allow', reason: 'counter_store_unavailable', matched_policy_id: 'e2e-down-open' });
    }
    // Every one of the ten was answered by the agent's failure_mode, none by a server.
    const during = (await statusOf()).decisions;
    expect(during.failure_mode - before.failure_mode).to.equal(10);

    serverB = await startServerProcess({ ...serverEnv, RL_HTTP_ADDR: `127.0.0.1:${portB}`, RL_INVALIDATION_TARGETS: agent1.url });
    await eventually(async () => (await check(agent1, { service: 'e2e-down' })).reason === 'within_limit', 100);
    const status = await parseBody(await fetch(`${agent1.url}/rl/v1/agent/status`));
    expect(status.upstream).to.equal(serverB.url);
  });
});
