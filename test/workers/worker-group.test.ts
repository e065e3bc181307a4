import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { PROTO_DIR, PROTO_FILES } from '../../src/grpc/protos.js';
import { getSuiteRedis } from '../support/counter-stores.js';
import { randomPrefix } from '../support/redis.js';
import { REPO_ROOT, processAlive, startServerProcess, type ServerProcessHandle } from '../support/server-process.js';
import { tempDir } from '../support/temp-dir.js';
import { healthClient, unary } from '../grpc/helpers.js';
import { check, decisionsByWorker, request, scrape, startGroup, total, waitForLog } from './group.js';

/** Token buckets refilling one token per ~29 minutes: no refill can land while a test counts admissions. */
const slowBucket = (limit: number) => ({ type: 'token_bucket', limit, window: '24h' });

/** A gRPC client on its own connection (grpc-js shares one per target across clients unless told not to). */
function ownConnectionClient(target: string): grpc.Client {
  const definition = protoLoader.loadSync(PROTO_FILES.rateLimit, { keepCase: true, longs: Number, enums: String, defaults: true, includeDirs: [PROTO_DIR] });
  const Client = grpc.makeClientConstructor(definition['rl.v1.RateLimitService'] as grpc.ServiceDefinition, 'rl.v1.RateLimitService');
  return new Client(target, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
}

/** How many answers gave each reason (within_limit, limit_exceeded, counter_store_unavailable...). */
function reasonCounts(answers: { body: { reason: string } }[]): string {
  const counts = new Map<string, number>();
  for (const a of answers) counts.set(a.body.reason, (counts.get(a.body.reason) ?? 0) + 1);
  return JSON.stringify(Object.fromEntries(counts));
}

/** Delta of each worker's decision count between two scrapes. */
function decisionsBetween(before: Map<string, number>, after: Map<string, number>): number[] {
  const a = decisionsByWorker(before);
  return [...decisionsByWorker(after)].sort(([x], [y]) => Number(x) - Number(y)).map(([worker, n]) => n - (a.get(worker) ?? 0));
}

describe('RL_WORKERS=2 in Redis mode (real processes)', function () {
  this.timeout(120_000);
  let group: ServerProcessHandle;
  const dir = tempDir('rl-workers-', { release: () => group?.stop() });
  let grpcPort: number;
  const org = `workers-${Math.random().toString(36).slice(2)}`;

  before(async () => {
    const redis = await getSuiteRedis();
    const policyFile = join(dir.path, 'policies.json');
    writeFileSync(policyFile, JSON.stringify({ policies: [{ policy_id: 'exact', scope: { org_id: `${org}-exact` }, algorithm: slowBucket(50) }] }));
    group = await startGroup({
      RL_WORKERS: '2',
      RL_COUNTERSTORE_ADDR: redis.url,
      RL_KEY_PREFIX: randomPrefix(),
      RL_POLICY_FILE: policyFile,
      RL_DATA_DIR: join(dir.path, 'unused-data'),
      // Exactness is the point here, not timeouts: on a loaded machine 200 concurrent decisions can wait
      // longer than the 100 ms default, and a timed-out decision is answered by failure mode (open).
      RL_COUNTERSTORE_TIMEOUT_MS: '10000',
    });
    grpcPort = Number(group.logs().find((l) => l.message === 'workers ready')!.grpc);
  });

  it('runs two workers listening on the same HTTP and gRPC ports', () => {
    const listening = group.logs().filter((l) => l.message === 'listening');
    expect(listening).to.have.length(2);
    expect(new Set(listening.map((l) => `${l.http}/${l.grpc}`)).size).to.equal(1);
    expect(listening[0]).to.include({ http: group.port, grpc: grpcPort, counters: 'redis' });
    const ready = group.logs().filter((l) => l.message === 'worker ready');
    expect(ready.map((l) => l.worker).sort()).to.deep.equal([1, 2]);
    expect(new Set(ready.map((l) => l.pid)).size).to.equal(2);
  });

  it('together admit exactly the limit: 200 concurrent requests on a limit of 50 → 50 allowed, over both workers', async () => {
    const before = await scrape(group.port);
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => check(group.port, { org_id: `${org}-exact`, user_id: `u${i}` })));
    expect(answers.map((a) => a.status)).to.satisfy((statuses: number[]) => statuses.every((s) => s === 200));
    expect(answers.every((a) => a.body.matched_policy_id === 'exact')).to.equal(true);
    expect(answers.filter((a) => a.body.allowed).length, `reasons: ${reasonCounts(answers)}`).to.equal(50);
    const after = await scrape(group.port);
    expect(total(after, 'rl_counter_store_errors_total') - total(before, 'rl_counter_store_errors_total')).to.equal(0);
    const perWorker = decisionsBetween(before, after);
    expect(perWorker).to.have.length(2);
    expect(perWorker.reduce((a, b) => a + b, 0)).to.equal(200);
    expect(Math.min(...perWorker), `both workers decided: ${perWorker}`).to.be.above(0);
  });

  it('/metrics sums every worker: decisions and histogram counts equal the requests sent, whichever worker is scraped', async () => {
    const before = await scrape(group.port);
    const sent = 31;
    for (let i = 0; i < sent; i++) expect((await check(group.port, { org_id: `${org}-metrics`, user_id: 'u' })).status).to.equal(200);
    // Consecutive scrapes on fresh connections: answered by different workers, and each answers for the group.
    const scrapes = [await scrape(group.port), await scrape(group.port)];
    for (const after of scrapes) {
      expect(total(after, 'rl_decisions_total') - total(before, 'rl_decisions_total')).to.equal(sent);
      expect(after.get('rl_decision_duration_seconds_count')! - before.get('rl_decision_duration_seconds_count')!).to.equal(sent);
      expect(after.get('rl_decision_duration_seconds_bucket{le="+Inf"}')).to.equal(after.get('rl_decision_duration_seconds_count'));
      expect(after.get('rl_policy_cache_misses_total')! - before.get('rl_policy_cache_misses_total')!).to.equal(sent);
      expect(after.get('rl_workers')).to.equal(2);
      const perWorker = decisionsBetween(before, after);
      expect(perWorker.reduce((a, b) => a + b, 0)).to.equal(sent);
      expect(Math.min(...perWorker)).to.be.above(0);
      // One series per metric: the group's, not one per worker.
      expect(after.has('process_start_time_seconds')).to.equal(false);
      expect([...after.keys()].filter((k) => k.startsWith('nodejs_version_info'))).to.have.length(1);
    }
  });

  it('shares the gRPC port: calls on separate connections are answered by both workers', async () => {
    const clients = Array.from({ length: 6 }, () => ownConnectionClient(`127.0.0.1:${grpcPort}`));
    try {
      const before = await scrape(group.port);
      for (const client of clients) {
        const answer = await unary(client, 'CheckLimit', { org_id: `${org}-exact`, user_id: 'grpc' });
        expect(answer.matched_policy_id).to.equal('exact');
      }
      const perWorker = decisionsBetween(before, await scrape(group.port));
      expect(perWorker.reduce((a, b) => a + b, 0)).to.equal(6);
      expect(Math.min(...perWorker), `both workers answered gRPC: ${perWorker}`).to.be.above(0);
    } finally {
      for (const client of clients) client.close();
    }
  });

  it('a policy created, then changed, through one request is applied by every worker', async () => {
    const policyOrg = `${org}-change`;
    const created = await request(group.port, 'POST', '/rl/v1/policies', { policy_id: 'changing', scope: { org_id: policyOrg }, algorithm: slowBucket(1000) });
    expect(created.status).to.equal(201);
    await everyWorkerPeeks(policyOrg, (d) => d.matched_policy_id === 'changing' && d.limit === 1000);
    const updated = await request(group.port, 'PUT', '/rl/v1/policies/changing', {
      policy_id: 'changing',
      scope: { org_id: policyOrg },
      algorithm: slowBucket(5),
      version: 1,
    });
    expect(updated.status, updated.text).to.equal(200);
    await everyWorkerPeeks(policyOrg, (d) => d.limit === 5);
    const before = await scrape(group.port);
    const answers = [];
    for (let i = 0; i < 40; i++) answers.push(await check(group.port, { org_id: policyOrg, user_id: 'same' }));
    // A worker still on limit 1000 would admit more than 5 of these (the counter is shared).
    expect(answers.filter((a) => a.body.allowed).length, `reasons: ${reasonCounts(answers)}`).to.equal(5);
    expect(answers.every((a) => a.body.limit === 5)).to.equal(true);
    const perWorker = decisionsBetween(before, await scrape(group.port));
    expect(Math.min(...perWorker), `both workers decided: ${perWorker}`).to.be.above(0);
  });

  /**
   * Peeks (quantity 0 consumes nothing) on fresh connections until 8 in a row satisfy `holds`: the
   * primary hands consecutive connections to the workers in turn, so each worker answered several.
   */
  async function everyWorkerPeeks(orgId: string, holds: (decision: any) => boolean): Promise<void> {
    let inARow = 0;
    for (let attempt = 0; attempt < 5000 && inARow < 8; attempt++) {
      const answer = await check(group.port, { org_id: orgId, user_id: 'same', quantity: 0 });
      inARow = holds(answer.body) ? inARow + 1 : 0;
      if (inARow === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(inARow, 'the change did not reach every worker').to.equal(8);
  }

  it('restarts a worker that dies, with its backoff in the log, and keeps serving', async () => {
    const victim = group.logs().find((l) => l.message === 'worker ready' && l.worker === 2)!;
    process.kill(Number(victim.pid), 'SIGKILL');
    const exited = await waitForLog(group, (l) => l.message === 'worker exited unexpectedly; restarting it');
    expect(exited).to.include({ worker: 2, pid: victim.pid, signal: 'SIGKILL' });
    expect(exited.restart_in_ms).to.be.a('number').and.above(0);
    const restarted = await waitForLog(group, (l) => l.message === 'worker ready' && l.worker === 2 && l.pid !== victim.pid);
    expect(restarted.http).to.equal(group.port);
    const metrics = await scrape(group.port);
    expect(metrics.get('rl_worker_restarts_total')).to.equal(1);
    expect(metrics.get('rl_workers')).to.equal(2);
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await check(group.port, { org_id: `${org}-exact`, user_id: 'after' }));
    expect(answers.map((a) => a.body.matched_policy_id)).to.deep.equal(['exact', 'exact', 'exact', 'exact']);
  });
});

describe('RL_WORKERS=2: SIGTERM drains the whole group (real processes)', function () {
  this.timeout(120_000);

  it('every worker fails readiness and keeps answering for RL_SHUTDOWN_DELAY_SECS, then all exit and the primary exits 0', async () => {
    const redis = await getSuiteRedis();
    const dir = mkdtempSync(join(tmpdir(), 'rl-workers-drain-'));
    const group = await startGroup({
      RL_WORKERS: '2',
      RL_COUNTERSTORE_ADDR: redis.url,
      RL_KEY_PREFIX: randomPrefix(),
      // A shared counter store is seeded only from a file given explicitly (README "Configuration", `RL_POLICY_FILE`).
      RL_POLICY_FILE: join(REPO_ROOT, 'examples/policies.json'),
      RL_DATA_DIR: dir,
      RL_SHUTDOWN_DELAY_SECS: '5',
      RL_DRAIN_SECS: '5',
    });
    const grpcPort = Number(group.logs().find((l) => l.message === 'workers ready')!.grpc);
    const health = healthClient(`127.0.0.1:${grpcPort}`);
    try {
      for (let i = 0; i < 4; i++) expect((await request(group.port, 'GET', '/readyz')).status).to.equal(200);
      process.kill(group.pid, 'SIGTERM');
      // Fresh connections reach the workers in turn: 4 answers of 503 in a row cover both.
      let inARow = 0;
      for (let attempt = 0; attempt < 2000 && inARow < 4; attempt++) {
        inARow = (await request(group.port, 'GET', '/readyz')).status === 503 ? inARow + 1 : 0;
      }
      expect(inARow, 'every worker fails readiness').to.equal(4);
      for (let i = 0; i < 4; i++) {
        const answer = await check(group.port, { org_id: 'acme', signal_type: 'http', user_id: 'drain' });
        expect(answer.status).to.equal(200);
        expect(answer.body.matched_policy_id).to.equal('acme-api-per-user');
      }
      expect((await unary(health, 'Check', { service: '' })).status).to.equal('NOT_SERVING');
      expect(await group.exited).to.deep.equal({ code: 0, signal: null });
      const logs = group.logs();
      expect(logs.filter((l) => l.message === 'worker stopped').map((l) => [l.worker, l.code])).to.have.deep.members([
        [1, 0],
        [2, 0],
      ]);
      // Two workers and the primary each drained and stopped.
      expect(logs.filter((l) => l.message === 'draining')).to.have.length(3);
      expect(logs.filter((l) => l.message === 'stopped')).to.have.length(3);
      expect(logs.some((l) => l.message === 'worker exited unexpectedly; restarting it')).to.equal(false);
    } finally {
      health.close();
      await group.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('RL_WORKERS=2: a primary killed outright leaves no worker behind (real processes)', function () {
  this.timeout(120_000);

  it('every worker exits once the primary is gone (SIGKILL: no drain, no message)', async () => {
    const redis = await getSuiteRedis();
    const dir = mkdtempSync(join(tmpdir(), 'rl-workers-orphans-'));
    const group = await startGroup({ RL_WORKERS: '2', RL_COUNTERSTORE_ADDR: redis.url, RL_KEY_PREFIX: randomPrefix(), RL_DATA_DIR: dir });
    try {
      const pids = group.logs().filter((l) => l.message === 'worker ready').map((l) => Number(l.pid));
      expect(pids).to.have.length(2);
      await group.kill();
      // node:cluster ends a worker whose IPC channel to the primary closes; wait for it, bounded by count.
      for (let attempt = 0; attempt < 1500 && pids.some(processAlive); attempt++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(pids.filter(processAlive), 'workers still running').to.deep.equal([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('RL_WORKERS refused or failing at start-up (real processes)', function () {
  this.timeout(60_000);

  async function startFailure(env: Record<string, string>): Promise<{ message: string }> {
    try {
      const handle = await startServerProcess(env);
      await handle.kill();
    } catch (error) {
      return { message: (error as Error).message };
    }
    throw new Error('the process started');
  }

  function errorLine(message: string): string {
    const line = message.split('\n').find((l) => l.includes('"level":"error"'));
    expect(line, message).to.be.a('string');
    return JSON.parse(line!).message as string;
  }

  it('memory mode with RL_WORKERS=2 exits 1 naming RL_WORKERS and explaining that counters would split, before forking', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-workers-memory-'));
    try {
      const { message } = await startFailure({ RL_WORKERS: '2', RL_DATA_DIR: dir, RL_COUNTERSTORE_ADDR: '' });
      expect(message).to.include('exited before listening (code 1, signal null)');
      const error = errorLine(message);
      expect(error).to.match(/^cannot start: RL_WORKERS: 2 workers need RL_COUNTERSTORE_ADDR/);
      expect(error).to.include('each worker would keep its own counters');
      expect(error).to.include('every limit would split');
      expect(message).not.to.include('worker starting');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a worker that cannot start stops the group with exit 1 and a one-line reason', async () => {
    // A missing TLS certificate is refused by each worker before it opens any store.
    const { message } = await startFailure({
      RL_WORKERS: '2',
      RL_COUNTERSTORE_ADDR: 'redis://127.0.0.1:1',
      RL_TLS_ENABLED: 'true',
      RL_TLS_CERT_FILE: '/nonexistent/cert.pem',
      RL_TLS_KEY_FILE: '/nonexistent/key.pem',
    });
    expect(message).to.include('exited before listening (code 1, signal null)');
    expect(message).to.include('worker starting');
    expect(message).to.include('RL_TLS_CERT_FILE');
    const lines = message.split('\n').filter((l) => l.includes('"level":"error"')).map((l) => JSON.parse(l).message as string);
    expect(lines.some((l) => /^cannot start: worker [12] \(pid \d+\) exited \(code 1, signal null\) before it was ready/.test(l)), lines.join('\n')).to.equal(true);
  });
});
