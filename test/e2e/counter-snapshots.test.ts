import { expect } from 'chai';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { COUNTER_SNAPSHOT_FILE } from '../../src/counters/snapshot/snapshot-format.js';
import { startServerProcess, type ServerProcessHandle } from '../support/server-process.js';
import { hourlyAlgorithms } from '../support/policies.js';
import { tempDir } from '../support/temp-dir.js';

/**
 * Memory-mode counters across restarts, with real server processes on one data directory: SIGTERM then
 * restart keeps every count exactly; SIGKILL keeps what the last snapshot held (seen on /rl/v1/info);
 * a corrupt or foreign snapshot is named in one log line and the server starts with empty counters;
 * RL_COUNTER_SNAPSHOT_SECS=0 keeps nothing.
 */

const LIMIT = 10;
const ALGORITHMS = hourlyAlgorithms(LIMIT);
const POLICIES = [
  ...Object.entries(ALGORITHMS).map(([type, algorithm]) => ({ policy_id: type, scope: { service: type, user_id: '*' }, algorithm, action: 'deny' })),
  { policy_id: 'slots', scope: { service: 'slots', user_id: '*' }, algorithm: { type: 'concurrency', max_concurrency: 2, lease_ttl: 600 }, action: 'deny' },
];

interface Answer {
  allowed: boolean;
  remaining: number;
  reason: string;
}

async function post(server: ServerProcessHandle, operation: string, body: Record<string, unknown>): Promise<Answer> {
  const response = await fetch(`${server.url}/rl/v1/${operation}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(response.status, await response.clone().text()).to.equal(200);
  return (await response.json()) as Answer;
}

const check = (server: ServerProcessHandle, service: string, quantity: number, user = 'u1') => post(server, 'check', { service, user_id: user, quantity });
const remaining = async (server: ServerProcessHandle, service: string, user = 'u1') => (await check(server, service, 0, user)).remaining;

async function snapshotInfo(server: ServerProcessHandle): Promise<{ age_ms: number | null; keys: number } | undefined> {
  const info = (await (await fetch(`${server.url}/rl/v1/info`)).json()) as { counter_snapshot?: { age_ms: number | null; keys: number } };
  return info.counter_snapshot;
}

const ignoredLines = (server: ServerProcessHandle) => server.logs().filter((l) => String(l.message).startsWith('counter snapshot '));

describe('memory counters across restarts (real processes)', function () {
  this.timeout(120_000);
  let dir: string;
  let dataDir: string;
  const running: ServerProcessHandle[] = [];
  tempDir('rl-counter-snapshots-', {
    per: 'test',
    made: (path) => (dir = path),
    release: async () => {
      for (const server of running.splice(0)) await server.kill();
    },
  });

  beforeEach(() => {
    dataDir = join(dir, 'data');
    writeFileSync(join(dir, 'policies.json'), JSON.stringify({ policies: POLICIES }));
  });

  const start = async (env: Record<string, string> = {}) => {
    const server = await startServerProcess({ RL_DATA_DIR: dataDir, RL_POLICY_FILE: join(dir, 'policies.json'), ...env });
    running.push(server);
    return server;
  };
  const snapshotFile = () => join(dataDir, COUNTER_SNAPSHOT_FILE);

  it('SIGTERM then restart: every counter of every algorithm, and a held concurrency slot, exactly as they were', async () => {
    // No periodic snapshot within the test: what survives is what the drain wrote.
    const first = await start({ RL_COUNTER_SNAPSHOT_SECS: '3600' });
    const before: Record<string, number> = {};
    for (const type of Object.keys(ALGORITHMS)) {
      for (let i = 0; i < 3; i++) expect((await check(first, type, 1)).allowed).to.equal(true);
      expect((await check(first, type, 2, 'u2')).allowed).to.equal(true);
      before[type] = await remaining(first, type);
      expect(before[type], type).to.equal(LIMIT - 3);
    }
    expect(await post(first, 'acquire', { service: 'slots', user_id: 'u1', request_id: 'held' })).to.include({ allowed: true, remaining: 1 });
    expect(await snapshotInfo(first)).to.deep.equal({ age_ms: null, keys: 0 });
    expect(await first.stop('SIGTERM')).to.deep.equal({ code: 0, signal: null });

    const second = await start({ RL_COUNTER_SNAPSHOT_SECS: '3600' });
    const restored = second.logs().find((l) => l.message === 'counters restored');
    // Six algorithms × two users, and the slot.
    expect(restored).to.include({ keys: 13, expired: 0 });
    expect((await snapshotInfo(second))?.keys).to.equal(13);
    for (const type of Object.keys(ALGORITHMS)) {
      expect(await remaining(second, type), type).to.equal(before[type]);
      expect(await remaining(second, type, 'u2'), type).to.equal(LIMIT - 2);
      expect((await check(second, type, LIMIT - 3)).allowed, type).to.equal(true);
      expect((await check(second, type, 1)).allowed, type).to.equal(false);
    }
    expect(await post(second, 'acquire', { service: 'slots', user_id: 'u1', request_id: 'other' })).to.include({ allowed: true, remaining: 0 });
    expect(await post(second, 'acquire', { service: 'slots', user_id: 'u1', request_id: 'third' })).to.include({ allowed: false });
    expect(await post(second, 'release', { service: 'slots', user_id: 'u1', request_id: 'held' })).to.include({ allowed: true, reason: 'lease_released' });
  });

  it('SIGKILL loses at most what came after the last snapshot: counts it held come back', async () => {
    const first = await start({ RL_COUNTER_SNAPSHOT_SECS: '1' });
    expect((await check(first, 'quota', 4)).allowed).to.equal(true);
    // A snapshot that holds the quota's key began after those 4 units were counted (one atomic check).
    let info = await snapshotInfo(first);
    while (info === undefined || info.keys < 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      info = await snapshotInfo(first);
    }
    expect(info.age_ms).to.be.a('number');
    expect((await check(first, 'quota', 3)).allowed).to.equal(true);
    expect(await first.kill()).to.include({ signal: 'SIGKILL' });

    const second = await start({ RL_COUNTER_SNAPSHOT_SECS: '1' });
    const left = await remaining(second, 'quota');
    // The 4 units the snapshot held are kept; the 3 after it may or may not have been written before the kill.
    expect(left).to.be.oneOf([LIMIT - 4, LIMIT - 7]);
    expect(ignoredLines(second)).to.deep.equal([]);
  });

  // Truncated, altered and other-version files: test/counters/counter-snapshots.test.ts, without a process each.
  it('a corrupt or foreign snapshot is named in one log line, and start-up goes on with empty counters', async () => {
    const first = await start({ RL_COUNTER_SNAPSHOT_SECS: '3600' });
    for (const type of Object.keys(ALGORITHMS)) expect((await check(first, type, 5)).allowed).to.equal(true);
    await first.stop('SIGTERM');
    const valid = readFileSync(snapshotFile(), 'utf8');
    const variants: [string, string, Record<string, string>, RegExp][] = [
      ['garbage', 'not a snapshot\u0000\u0001', {}, /not JSON/],
      ['foreign prefix', valid, { RL_KEY_PREFIX: 'elsewhere:' }, /key prefix "rl:"/],
    ];
    for (const [name, content, env, why] of variants) {
      writeFileSync(snapshotFile(), content);
      const server = await start({ RL_COUNTER_SNAPSHOT_SECS: '3600', ...env });
      const named = ignoredLines(server);
      expect(named, name).to.have.length(1);
      expect(named[0], name).to.include({ level: 'warn', file: snapshotFile() });
      expect(String(named[0].message), name).to.match(why).and.include('starting with empty counters');
      expect((await fetch(`${server.url}/readyz`)).status, name).to.equal(200);
      for (const type of Object.keys(ALGORITHMS)) expect(await remaining(server, type), `${name}: ${type}`).to.equal(LIMIT);
      await server.kill();
    }
  });

  it('RL_COUNTER_SNAPSHOT_SECS=0: nothing kept across a restart, and a snapshot left from before is removed', async () => {
    const first = await start({ RL_COUNTER_SNAPSHOT_SECS: '3600' });
    expect((await check(first, 'fixed_window', 6)).allowed).to.equal(true);
    await first.stop('SIGTERM');
    expect(existsSync(snapshotFile())).to.equal(true);

    const off = await start({ RL_COUNTER_SNAPSHOT_SECS: '0' });
    expect(existsSync(snapshotFile())).to.equal(false);
    expect(await snapshotInfo(off)).to.equal(undefined);
    expect(await remaining(off, 'fixed_window')).to.equal(LIMIT);
    expect((await check(off, 'fixed_window', 2)).allowed).to.equal(true);
    await off.stop('SIGTERM');
    expect(existsSync(snapshotFile())).to.equal(false);

    const on = await start({ RL_COUNTER_SNAPSHOT_SECS: '3600' });
    expect(await remaining(on, 'fixed_window')).to.equal(LIMIT);
  });
});
