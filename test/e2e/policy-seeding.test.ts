import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FilePolicyStore } from '../../src/policy-store/file-policy-store.js';
import type { PolicyStore } from '../../src/policy-store/policy-store.js';
import { RedisPolicyStore } from '../../src/policy-store/redis-policy-store.js';
import type { Policy } from '../../src/policy/types.js';
import { getSuiteRedis } from '../support/counter-stores.js';
import { createChange, makePolicy } from '../support/policies.js';
import { randomPrefix } from '../support/redis.js';
import { startServerProcess, type ServerProcessHandle } from '../support/server-process.js';
import { tempDir } from '../support/temp-dir.js';

/**
 * Start-up as real processes: what seeds the policy store (README "Configuration", `RL_POLICY_FILE`), and a store written
 * before policies were strict still starts (the unknown key is dropped with a warning).
 */

const DEMO_POLICY_COUNT = 16;
const HOW_TO_LOAD = /load them with RL_POLICY_FILE=<file> or `rl apply -f <file>`/;

describe('policy seeding at start-up (real processes)', function () {
  this.timeout(120_000);
  let dir: string;
  const servers: ServerProcessHandle[] = [];
  const start = async (env: Record<string, string>) => {
    const server = await startServerProcess(env);
    servers.push(server);
    return server;
  };
  const listening = (server: ServerProcessHandle) => server.logs().find((l) => l.message === 'listening')!;
  const policyIds = async (server: ServerProcessHandle): Promise<string[]> =>
    ((await (await fetch(`${server.url}/rl/v1/policies`)).json()) as Policy[]).map((p) => p.policy_id);
  const howToLoadLines = (server: ServerProcessHandle) => server.logs().filter((l) => HOW_TO_LOAD.test(String(l.message)));

  tempDir('rl-seeding-', { per: 'test', made: (path) => (dir = path), release: async () => { for (const s of servers.splice(0)) await s.stop(); } });

  it('memory mode without RL_POLICY_FILE seeds the demo policies', async () => {
    const server = await start({ RL_DATA_DIR: join(dir, 'data'), RL_POLICY_FILE: '', RL_COUNTERSTORE_ADDR: '' });
    expect(listening(server)).to.include({ counters: 'memory', policies: DEMO_POLICY_COUNT, seeded_from_file: true });
    expect(await policyIds(server)).to.include('global-http-per-ip');
    expect(howToLoadLines(server)).to.deep.equal([]);
  });

  it('Redis mode without RL_POLICY_FILE seeds nothing and says once how to load policies', async () => {
    const redis = await getSuiteRedis();
    const server = await start({ RL_COUNTERSTORE_ADDR: redis.url, RL_KEY_PREFIX: randomPrefix(), RL_POLICY_FILE: '', RL_DATA_DIR: join(dir, 'unused') });
    expect(listening(server)).to.include({ counters: 'redis', policies: 0, seeded_from_file: false });
    expect(await policyIds(server)).to.deep.equal([]);
    expect(howToLoadLines(server)).to.have.length(1);
  });

  it('Redis mode with RL_POLICY_FILE seeds an empty store only', async () => {
    const redis = await getSuiteRedis();
    const prefix = randomPrefix();
    const file = (name: string, id: string) => {
      const path = join(dir, name);
      writeFileSync(path, JSON.stringify([{ policy_id: id, algorithm: { type: 'fixed_window', limit: 5, window: '1m' } }]));
      return path;
    };
    const first = await start({ RL_COUNTERSTORE_ADDR: redis.url, RL_KEY_PREFIX: prefix, RL_POLICY_FILE: file('first.json', 'first'), RL_DATA_DIR: join(dir, 'unused') });
    expect(listening(first)).to.include({ policies: 1, seeded_from_file: true });
    // A second server on the same store, with another file: the store holds policies, so nothing is seeded.
    const second = await start({ RL_COUNTERSTORE_ADDR: redis.url, RL_KEY_PREFIX: prefix, RL_POLICY_FILE: file('second.json', 'second'), RL_DATA_DIR: join(dir, 'unused') });
    expect(listening(second)).to.include({ policies: 1, seeded_from_file: false });
    expect(await policyIds(second)).to.deep.equal(['first']);
    expect(howToLoadLines(first).concat(howToLoadLines(second))).to.deep.equal([]);
  });
});

describe('a bad RL_POLICY_FILE stops start-up, naming the file, the policy and the field (real processes)', function () {
  this.timeout(60_000);
  let dir: string;
  tempDir('rl-strict-file-', { per: 'test', made: (path) => (dir = path) });

  /** The error line of a server that exits before listening. */
  async function startFailure(file: string, text: string): Promise<string> {
    const path = join(dir, file);
    writeFileSync(path, text);
    const started = await startServerProcess({ RL_DATA_DIR: join(dir, 'data'), RL_POLICY_FILE: path, RL_COUNTERSTORE_ADDR: '' }).then(
      async (handle) => {
        await handle.kill();
        return undefined;
      },
      (error: Error) => error.message,
    );
    expect(started, 'the server started').to.be.a('string');
    expect(started).to.include('exited before listening (code 1, signal null)');
    const line = started!.split('\n').find((l) => l.includes('"level":"error"'));
    expect(line, started).to.be.a('string');
    return JSON.parse(line!).message as string;
  }

  it('an unknown field, with the nearest known one', async () => {
    const message = await startFailure('policies.yaml', 'policy_id: typo\nacton: delay\nalgorithm: {type: fixed_window, limit: 5, window: 1m}\n');
    expect(message).to.equal(`cannot start: RL_POLICY_FILE: ${join(dir, 'policies.yaml')}: policy "typo" (index 0): acton: unknown field; did you mean \`action\`?`);
  });

  it('a JSON syntax error: file, line, column, the line and a caret', async () => {
    const message = await startFailure('policies.json', '{"policies": [\n  {"policy_id": "a", "algorithm": {"type": "fixed_window",}}\n]}\n');
    expect(message).to.equal(
      `cannot start: RL_POLICY_FILE: ${join(dir, 'policies.json')}:2:59: invalid JSON: expected a property name in double quotes, got "}"\n` +
        `    {"policy_id": "a", "algorithm": {"type": "fixed_window",}}\n  ${' '.repeat(58)}^`,
    );
  });
});

describe('a policy store written before policies were strict still starts (real processes)', function () {
  this.timeout(120_000);
  let dir: string;
  let server: ServerProcessHandle | undefined;

  tempDir('rl-strict-upgrade-', { per: 'test', made: (path) => (dir = path), release: async () => { await server?.stop(); server = undefined; } });

  /** A stored policy carrying keys this version does not know, at the top level and in its algorithm and scope. */
  function withUnknownKeys(): Policy {
    const policy = makePolicy({ policy_id: 'old', scope: { service: 'old' }, algorithm: { type: 'fixed_window', limit: 2, window: '1h' } });
    return { ...policy, retired_field: 'x', scope: { ...policy.scope, zone: 'z' }, algorithm: { ...policy.algorithm, burts: 3 } } as unknown as Policy;
  }

  async function seedStore(store: PolicyStore): Promise<void> {
    try {
      expect(await store.commit(createChange(withUnknownKeys()))).to.deep.include({ ok: true });
    } finally {
      await store.close();
    }
  }

  async function expectServedWithoutUnknownKeys(handle: ServerProcessHandle): Promise<void> {
    const stored = (await (await fetch(`${handle.url}/rl/v1/policies/old`)).json()) as Record<string, unknown>;
    expect(stored).to.not.have.property('retired_field');
    expect(stored.scope).to.deep.equal({ service: 'old' });
    expect(stored.algorithm).to.deep.equal({ type: 'fixed_window', limit: 2, window: '1h' });
    const warned = handle.logs().filter((l) => l.level === 'warn' && String(l.message).includes('dropping a field'));
    expect(warned.map((l) => [l.policy_id, l.field])).to.have.deep.members([
      ['old', 'retired_field'],
      ['old', 'scope.zone'],
      ['old', 'algorithm.burts'],
    ]);
    // The policy is still enforced, and can be written back as read.
    const check = async () => (await (await fetch(`${handle.url}/rl/v1/check`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"service":"old"}' })).json()) as { allowed: boolean };
    expect([(await check()).allowed, (await check()).allowed, (await check()).allowed]).to.deep.equal([true, true, false]);
    const put = await fetch(`${handle.url}/rl/v1/policies/old`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(stored) });
    expect(put.status).to.equal(200);
  }

  it('a data directory', async () => {
    const dataDir = join(dir, 'data');
    await seedStore(await FilePolicyStore.open(dataDir));
    server = await startServerProcess({ RL_DATA_DIR: dataDir, RL_COUNTERSTORE_ADDR: '' });
    await expectServedWithoutUnknownKeys(server);
  });

  it('a Redis policy store', async () => {
    const redis = await getSuiteRedis();
    const prefix = randomPrefix();
    await seedStore(await RedisPolicyStore.open({ addr: redis.url, keyPrefix: prefix }));
    server = await startServerProcess({ RL_COUNTERSTORE_ADDR: redis.url, RL_KEY_PREFIX: prefix, RL_DATA_DIR: join(dir, 'unused') });
    await expectServedWithoutUnknownKeys(server);
  });
});
