import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { getSuiteRedis } from '../support/counter-stores.js';
import { randomPrefix } from '../support/redis.js';
import { startServerProcess, type ServerProcessHandle } from '../support/server-process.js';
import { tempDir } from '../support/temp-dir.js';

/**
 * Two server processes on one Redis: the policy file seeds the empty store once, and a change made
 * through either node is visible on the other, through GET and in decisions, within one second.
 */
describe('two server nodes on one Redis', function () {
  this.timeout(60_000);
  let a: ServerProcessHandle;
  let b: ServerProcessHandle;
  const dir = tempDir('rl-multi-node-', { release: () => Promise.all([a?.stop(), b?.stop()]) });
  const org = `org-${Math.random().toString(36).slice(2)}`;

  before(async () => {
    const redis = await getSuiteRedis();
    const policyFile = join(dir.path, 'policies.json');
    writeFileSync(
      policyFile,
      JSON.stringify({
        policies: [{ policy_id: 'seeded', scope: { org_id: 'seeded-org' }, algorithm: { type: 'fixed_window', limit: 5, window: '1m' } }],
      }),
    );
    const env = {
      RL_COUNTERSTORE_ADDR: redis.url,
      RL_KEY_PREFIX: randomPrefix(),
      RL_POLICY_FILE: policyFile,
      RL_DATA_DIR: join(dir.path, 'unused-data'),
    };
    [a, b] = await Promise.all([startServerProcess(env), startServerProcess(env)]);
  });

  const call = async (node: ServerProcessHandle, method: string, path: string, body?: unknown) => {
    const response = await fetch(`${node.url}/rl/v1${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as any };
  };

  /** Polls until `check` holds; returns the elapsed ms, failing after `withinMs`. */
  const within = async (withinMs: number, what: string, check: () => Promise<boolean>) => {
    const start = Date.now();
    for (;;) {
      if (await check()) return Date.now() - start;
      if (Date.now() - start > withinMs) throw new Error(`not within ${withinMs} ms: ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  const matched = async (node: ServerProcessHandle) => (await call(node, 'POST', '/check', { org_id: org, user_id: 'u1' })).body.matched_policy_id;

  it("/rl/v1/info and /metrics show the counter store master's breaker (one Redis: one master)", async () => {
    const info = await call(a, 'GET', '/info');
    expect(info.body.counter_store_masters).to.deep.equal([{ master: 'master', breaker: 'closed', consecutive_failures: 0, pending_calls: 0 }]);
    const metrics = await (await fetch(`${a.url}/metrics`)).text();
    expect(metrics).to.match(/^rl_counter_store_breaker_state\{master="master"\} 0$/m);
    expect(metrics).to.match(/^rl_counter_store_pending_calls\{master="master"\} 0$/m);
  });

  it('seeds the empty store once from the policy file', async () => {
    const seededFlags = [a, b].map((n) => n.logs().find((l) => l.message === 'listening')?.seeded_from_file);
    expect(seededFlags.filter((f) => f === true)).to.have.length(1);
    for (const node of [a, b]) {
      expect((await call(node, 'GET', '/policies')).body.map((p: { policy_id: string }) => p.policy_id)).to.deep.equal(['seeded']);
    }
    expect((await call(a, 'GET', '/policies/seeded/audit')).body).to.have.length(1);
  });

  it('a create on A is visible on B within 1 s, through GET and in decisions', async () => {
    expect(await matched(b)).to.equal('');
    const created = await call(a, 'POST', '/policies', { policy_id: 'mn', scope: { org_id: org }, algorithm: { type: 'fixed_window', limit: 100, window: '1m' } });
    expect(created.status).to.equal(201);
    await within(1000, 'B serves the policy', async () => (await call(b, 'GET', '/policies/mn')).status === 200);
    await within(1000, 'B decides with the policy', async () => (await matched(b)) === 'mn');
  });

  it('a change on B is visible on A within 1 s, and history is shared', async () => {
    const patched = await call(b, 'PATCH', '/policies/mn', { enabled: false, version: 1 });
    expect(patched.status).to.equal(200);
    await within(1000, 'A serves version 2', async () => (await call(a, 'GET', '/policies/mn')).body.version === 2);
    await within(1000, 'A stops matching the disabled policy', async () => (await matched(a)) === '');
    expect((await call(a, 'GET', '/policies/mn/audit')).body.map((e: { action_type: string }) => e.action_type)).to.deep.equal(['create', 'patch']);
    // Optimistic concurrency spans nodes: version 1 is stale on A too.
    expect((await call(a, 'PUT', '/policies/mn', { policy_id: 'mn', algorithm: { type: 'fixed_window', limit: 1, window: '1m' }, version: 1 })).status).to.equal(409);
  });

  it('rollback and delete on one node reach the other within 1 s', async () => {
    expect((await call(a, 'POST', '/policies/mn/rollback', { version: 1 })).status).to.equal(200);
    await within(1000, 'B matches the restored policy', async () => (await matched(b)) === 'mn');
    expect((await call(b, 'DELETE', '/policies/mn')).status).to.equal(200);
    await within(1000, 'A no longer has it', async () => (await call(a, 'GET', '/policies/mn')).status === 404);
    await within(1000, 'A no longer matches it', async () => (await matched(a)) === '');
    expect((await call(a, 'GET', '/policies/mn/versions')).body.map((v: { version: number }) => v.version)).to.deep.equal([1, 2, 3]);
  });
});
