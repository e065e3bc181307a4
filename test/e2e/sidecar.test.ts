/**
 * End to end with real processes: one Redis, two server processes sharing it (policies and counters),
 * and sidecar agents, all started as the deployment would start them.
 *
 *   server A ─┐                     ┌─ agent 1: upstream B, sync every 30 s, in A's and B's
 *             ├── Redis (shared) ───┤           RL_INVALIDATION_TARGETS (with an invalidate token)
 *   server B ─┘                     └─ agent 2: upstream A, sync every 1 s, in nobody's targets
 *
 * Server A's targets also list a target that never answers and one that refuses connections: policy
 * changes through A must not be slowed by them.
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

/** Polls `probe` until it returns true; resolves with the elapsed ms, or throws after `timeoutMs`. */
async function within(timeoutMs: number, probe: () => Promise<boolean>, intervalMs = 20): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await probe()) return Date.now() - started;
    if (Date.now() - started > timeoutMs) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(intervalMs);
  }
}

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

    hung = http.createServer((req) => {
      hungRequests.push(req.url ?? '');
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
          RL_AGENT_SYNC_SECS: '30',
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
      await within(5000, async () => (await status()).last_sync_ok === true);
      expect(await status()).to.include({ last_sync_ok: true, policies: 0, mode: 'forward' });
    }
    expect((await check(agent1, { service: 'nothing' })).reason).to.equal('no_matching_policy');
  });

  it('a policy created on server A changes the agent decisions within 1 s (invalidation, agent upstream is B)', async () => {
    expect((await check(agent1, { service: 'e2e-inv' })).reason).to.equal('no_matching_policy');
    const created = await createPolicy(serverA, policy('e2e-inv'));
    expect(created.status).to.equal(201);
    const elapsed = await within(1000, async () => (await check(agent1, { service: 'e2e-inv' })).matched_policy_id === 'e2e-inv');
    expect(elapsed).to.be.below(1000);
    const status = await parseBody(await fetch(`${agent1.url}/rl/v1/agent/status`));
    expect(status.invalidations).to.be.at.least(1);
    expect(status.sync_interval_secs).to.equal(30);
  });

  it('with the invalidation lost, the change arrives within one sync interval', async () => {
    const created = await createPolicy(serverB, policy('e2e-lost'));
    expect(created.status).to.equal(201);
    // Agent 2 is nobody's target: only its 1 s periodic sync (through server A) can bring the change.
    const elapsed = await within(2000, async () => (await check(agent2, { service: 'e2e-lost' })).matched_policy_id === 'e2e-lost');
    expect(elapsed).to.be.below(1600);
    const status = await parseBody(await fetch(`${agent2.url}/rl/v1/agent/status`));
    expect(status.invalidations).to.equal(0);
  });

  it('two servers together admit exactly the limit across both', async () => {
    const created = await createPolicy(serverA, policy('e2e-shared', { algorithm: { type: 'fixed_window', limit: 10, window: '1h' } }));
    expect(created.status).to.equal(201);
    await within(3000, async () => (await fetch(`${serverB.url}/rl/v1/policies/e2e-shared`, { headers: admin })).status === 200);
    const calls = Array.from({ length: 30 }, (_, i) =>
      postJson(`${(i % 2 === 0 ? serverA : serverB).url}/rl/v1/check`, { service: 'e2e-shared', user_id: 'u' }, admin),
    );
    const answers = await Promise.all(calls);
    expect(answers.every((a) => a.status === 200)).to.equal(true);
    expect(answers.filter((a) => a.body.allowed).length).to.equal(10);
    expect(answers.filter((a) => !a.body.allowed).every((a) => a.body.reason === 'limit_exceeded')).to.equal(true);
  });

  it('a target that hangs or refuses never delays the API response of a policy change', async () => {
    const before = hungRequests.length;
    const timings: number[] = [];
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      const created = await createPolicy(serverA, policy(`e2e-fast-${i}`));
      timings.push(performance.now() - started);
      expect(created.status).to.equal(201);
    }
    let started = performance.now();
    const put = await fetch(`${serverA.url}/rl/v1/policies/e2e-fast-0`, {
      method: 'PUT',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify(policy('e2e-fast-0', { priority: 5 })),
    });
    timings.push(performance.now() - started);
    expect(put.status).to.equal(200);
    started = performance.now();
    const deleted = await fetch(`${serverA.url}/rl/v1/policies/e2e-fast-1`, { method: 'DELETE', headers: admin });
    timings.push(performance.now() - started);
    expect(deleted.status).to.equal(200);
    expect(Math.max(...timings)).to.be.below(500);
    // The hanging target was really notified (it holds the requests), so the speed is not for want of trying.
    await within(2000, async () => hungRequests.length > before);
    expect(hungRequests.every((path) => path === '/rl/v1/agent/invalidate')).to.equal(true);
  });

  it('the agent answers by failure_mode while its server is killed, and recovers when it returns', async () => {
    const created = await createPolicy(serverA, policy('e2e-down', { failure_mode: 'fail_closed' }));
    expect(created.status).to.equal(201);
    const openCreated = await createPolicy(serverA, policy('e2e-down-open'));
    expect(openCreated.status).to.equal(201);
    await within(1000, async () => (await check(agent1, { service: 'e2e-down-open' })).matched_policy_id === 'e2e-down-open');
    await within(1000, async () => (await check(agent1, { service: 'e2e-down' })).matched_policy_id === 'e2e-down');

    await serverB.kill();
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      const closed = await check(agent1, { service: 'e2e-down' });
      const open = await check(agent1, { service: 'e2e-down-open' });
      expect(performance.now() - started).to.be.below(1000);
      expect(closed).to.include({ allowed: false, action: 'deny', reason: 'counter_store_unavailable', matched_policy_id: 'e2e-down' });
      expect(open).to.include({ allowed: true, action: 'allow', reason: 'counter_store_unavailable', matched_policy_id: 'e2e-down-open' });
    }

    serverB = await startServerProcess({ ...serverEnv, RL_HTTP_ADDR: `127.0.0.1:${portB}`, RL_INVALIDATION_TARGETS: agent1.url });
    await within(5000, async () => (await check(agent1, { service: 'e2e-down' })).reason === 'within_limit', 100);
    const status = await parseBody(await fetch(`${agent1.url}/rl/v1/agent/status`));
    expect(status.upstream).to.equal(serverB.url);
  });
});
