import { expect } from 'chai';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { JOURNAL_FILE } from '../../src/policy-store/file-policy-store.js';
import { REPO_ROOT, startServerProcess, type ServerProcessHandle } from '../support/server-process.js';
import { tempDir } from '../support/temp-dir.js';

/** One data directory for the block, and the servers started on it (killed, then the directory removed). */
function serversOnOneDataDir(prefix: string) {
  const servers: ServerProcessHandle[] = [];
  const dataDir = tempDir(prefix, { release: async () => { for (const s of servers) await s.kill(); } });
  const env = () => ({ RL_DATA_DIR: dataDir.path, RL_POLICY_FILE: join(REPO_ROOT, 'examples/policies.json') });
  return { dataDir, servers, env };
}

/**
 * Single-node durability: a stream of policy writes, SIGKILL in the middle of it, restart on the same
 * data directory: every write the API acknowledged is there, and the store is consistent.
 */
describe('durability of acknowledged policy changes (single node, kill -9)', function () {
  this.timeout(60_000);
  const { dataDir, servers, env } = serversOnOneDataDir('rl-durability-');

  interface Ack {
    id: string;
    version: number;
    priority: number;
    rollout: number;
  }

  it('finds every acknowledged write after SIGKILL and restart', async () => {
    const first = await startServerProcess(env());
    servers.push(first);
    expect(first.logs().find((l) => l.message === 'listening')).to.include({ seeded_from_file: true });
    const seeded = (await (await fetch(`${first.url}/rl/v1/policies`)).json()) as { policy_id: string }[];
    expect(seeded.length).to.be.greaterThan(0);

    const acks: Ack[] = [];
    let killed = false;
    const send = async (method: string, path: string, body: unknown): Promise<Ack | undefined> => {
      const response = await fetch(`${first.url}/rl/v1${path}`, {
        method,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      if (response.status !== 200 && response.status !== 201) {
        throw new Error(`${method} ${path} -> ${response.status} ${await response.text()}`);
      }
      const p = (await response.json()) as { policy_id: string; version: number; priority: number; rollout_percent: number };
      return { id: p.policy_id, version: p.version, priority: p.priority, rollout: p.rollout_percent };
    };
    const writer = async (w: number) => {
      let i = 0;
      while (!killed) {
        const id = `durable-${w}-${Math.floor(i / 6)}`;
        const base = { policy_id: id, scope: { tenant_id: id }, algorithm: { type: 'fixed_window', limit: 5, window: '1m' } };
        const step = i % 6;
        try {
          const ack =
            step === 0 ? await send('POST', '/policies', { ...base, priority: i })
            : step === 1 || step === 4 ? await send('PUT', `/policies/${id}`, { ...base, priority: i })
            : step === 2 ? await send('PATCH', `/policies/${id}`, { priority: i })
            : step === 3 ? await send('POST', `/policies/${id}/rollout`, { rollout_percent: i % 101 })
            : await send('POST', `/policies/${id}/rollback`, { version: 1 });
          if (ack) acks.push(ack);
        } catch (error) {
          if (killed) return; // the request died with the server: not acknowledged
          throw error;
        }
        i++;
      }
    };
    const writers = [0, 1, 2, 3].map((w) => writer(w));
    // Kill while all four writers have requests in flight.
    const deadline = Date.now() + 10_000;
    while (acks.length < 150 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    killed = true;
    const exit = await first.kill();
    expect(exit.signal).to.equal('SIGKILL');
    await Promise.all(writers);
    expect(acks.length).to.be.greaterThan(100);
    expect(statSync(join(dataDir.path, JOURNAL_FILE)).size).to.be.greaterThan(0);

    const second = await startServerProcess(env());
    servers.push(second);
    // The data directory wins over the policy file once it holds policies.
    expect(second.logs().find((l) => l.message === 'listening')).to.include({ seeded_from_file: false });
    const get = async (path: string) => (await (await fetch(`${second.url}/rl/v1${path}`)).json()) as any;

    const ids = [...new Set(acks.map((a) => a.id))];
    for (const id of ids) {
      const current = await get(`/policies/${id}`);
      const versions = (await get(`/policies/${id}/versions`)) as { version: number; snapshot: { priority: number; rollout_percent: number } }[];
      const audit = (await get(`/policies/${id}/audit`)) as { version: number }[];
      const mine = acks.filter((a) => a.id === id);
      const last = mine[mine.length - 1];
      // At most one more (durable but unacknowledged) change than the last acknowledged one.
      expect(current.version, id).to.be.oneOf([last.version, last.version + 1]);
      expect(versions.map((v) => v.version)).to.deep.equal(Array.from({ length: current.version }, (_, k) => k + 1));
      expect(audit.map((e) => e.version)).to.deep.equal(versions.map((v) => v.version));
      for (const ack of mine) {
        const v = versions[ack.version - 1];
        expect(v.snapshot.priority, `${id} v${ack.version}`).to.equal(ack.priority);
        expect(v.snapshot.rollout_percent, `${id} v${ack.version}`).to.equal(ack.rollout);
      }
    }
    const all = (await get('/policies')) as { policy_id: string }[];
    for (const s of seeded) expect(all.map((p) => p.policy_id)).to.include(s.policy_id);

    // The restarted server takes changes again and exits cleanly on SIGTERM.
    const more = await fetch(`${second.url}/rl/v1/policies/${ids[0]}`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ priority: 12345 }),
    });
    expect(more.status).to.equal(200);
    expect((await second.stop('SIGTERM')).code).to.equal(0);
  });
});

/** One server per data directory: a second one stops at start; a killed one does not keep the directory. */
describe('the single-node data directory is locked (two real server processes)', function () {
  this.timeout(60_000);
  const { dataDir, servers, env } = serversOnOneDataDir('rl-lock-e2e-');

  async function startFails(): Promise<string> {
    try {
      servers.push(await startServerProcess(env()));
    } catch (error) {
      return (error as Error).message;
    }
    throw new Error('the second server started on a data directory in use');
  }

  it('a second server on the same RL_DATA_DIR stops with a message naming it and the holding pid; after kill -9 a new one starts', async () => {
    const first = await startServerProcess(env());
    servers.push(first);
    const message = await startFails();
    expect(message).to.include('exited before listening (code 1');
    expect(message).to.include(`RL_DATA_DIR ${dataDir.path} is in use by another server (pid ${first.pid}`);
    // The first one was not disturbed.
    expect((await fetch(`${first.url}/rl/v1/policies`)).status).to.equal(200);

    await first.kill();
    const next = await startServerProcess(env());
    servers.push(next);
    expect(next.logs().find((l) => l.message === 'listening')).to.include({ seeded_from_file: false });
    // The killed server's lock was found stale and taken over (the control for the last check below).
    expect(next.logs().some((l) => String(l.message).includes('stale data directory lock'))).to.equal(true);
    expect((await fetch(`${next.url}/rl/v1/policies`)).status).to.equal(200);
    // A clean stop removes the lock, and the next server starts without taking anything over.
    expect((await next.stop('SIGTERM')).code).to.equal(0);
    const last = await startServerProcess(env());
    servers.push(last);
    expect(last.logs().some((l) => String(l.message).includes('stale data directory lock'))).to.equal(false);
  });
});
