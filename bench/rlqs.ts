/**
 * Scenario "RLQS" (BENCHMARKS.md): the same demand from ENVOYS Envoys, once over Envoy's rate limit
 * quota service (each decision local, in the simulated filter of test/support) and once over RLS
 * (ShouldRateLimit, one round trip per decision), against one memory-mode server process. Prints
 * decisions per second per Envoy, the server's CPU per report (RLQS) and per decision (RLS), and what
 * share of the window's limit was used: what the counter consumed (a peek after the run, once every
 * Envoy closed and gave back what it did not spend), beside what the Envoys admitted, which must be the
 * same (`overAdmitted` 0). Decisions count every request, admitted or refused locally. RLS decides one
 * round trip at a time, so its demand may stay below the limit: `demandOverLimit` says whether it did.
 * Run: `npx tsx bench/rlqs.ts`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { envoyClient, unary } from '../test/grpc/helpers.js';
import { SimulatedEnvoy } from '../test/support/envoy-rlqs-client.js';
import { startServerProcess, type ServerProcessHandle } from '../test/support/server-process.js';

const ENVOYS = 4;
const SECONDS = Number(process.env.RLQS_BENCH_SECS ?? 5);
const LIMIT = 50_000;
const IN_FLIGHT = 16;

async function metric(server: ServerProcessHandle, name: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

/** What the window's counter for `user` has consumed: a peek (quantity 0) on the HTTP port. */
async function consumed(server: ServerProcessHandle, user: string): Promise<number> {
  const response = await fetch(`${server.url}/rl/v1/check`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user_id: user, tags: { domain: 'edge' }, quantity: 0 }) });
  const body = (await response.json()) as { remaining: number };
  return LIMIT - body.remaining;
}

async function rlqsRun(server: ServerProcessHandle, grpcPort: number) {
  const envoys = Array.from({ length: ENVOYS }, () => new SimulatedEnvoy({ target: `127.0.0.1:${grpcPort}`, domain: 'edge', reportEveryMs: 100 }));
  const cpu0 = await metric(server, 'process_cpu_seconds_total');
  const reports0 = await metric(server, 'rl_rlqs_reports_total');
  const end = performance.now() + SECONDS * 1000;
  let decisions = 0;
  await Promise.all(
    envoys.map(async (envoy) => {
      while (performance.now() < end) {
        for (let i = 0; i < 200; i++) envoy.request({ user_id: 'rlqs' });
        decisions += 200;
        await new Promise((resolve) => setImmediate(resolve));
      }
    }),
  );
  await Promise.all(envoys.map((envoy) => envoy.close()));
  const cpu = (await metric(server, 'process_cpu_seconds_total')) - cpu0;
  const reports = (await metric(server, 'rl_rlqs_reports_total')) - reports0;
  const admitted = envoys.reduce((sum, envoy) => sum + envoy.admitted, 0);
  const used = await consumed(server, 'rlqs');
  return { decisionsPerSecPerEnvoy: decisions / SECONDS / ENVOYS, cpuUsPerReport: (cpu * 1e6) / reports, reports, admitted, consumed: used, overAdmitted: Math.max(0, admitted - used), limitUse: used / LIMIT, demandOverLimit: decisions > LIMIT, cpuSeconds: cpu };
}

async function rlsRun(server: ServerProcessHandle, grpcPort: number) {
  const clients = Array.from({ length: ENVOYS }, () => envoyClient(`127.0.0.1:${grpcPort}`));
  const cpu0 = await metric(server, 'process_cpu_seconds_total');
  const end = performance.now() + SECONDS * 1000;
  let decisions = 0;
  let admitted = 0;
  const request = { domain: 'edge', descriptors: [{ entries: [{ key: 'user_id', value: 'rls' }] }] };
  await Promise.all(
    clients.flatMap((client) =>
      Array.from({ length: IN_FLIGHT }, async () => {
        while (performance.now() < end) {
          const answer = await unary(client, 'ShouldRateLimit', request);
          decisions++;
          if (answer.overall_code === 'OK') admitted++;
        }
      }),
    ),
  );
  for (const client of clients) client.close();
  const cpu = (await metric(server, 'process_cpu_seconds_total')) - cpu0;
  const used = await consumed(server, 'rls');
  return { decisionsPerSecPerEnvoy: decisions / SECONDS / ENVOYS, cpuUsPerDecision: (cpu * 1e6) / decisions, admitted, consumed: used, overAdmitted: Math.max(0, admitted - used), limitUse: used / LIMIT, demandOverLimit: decisions > LIMIT, cpuSeconds: cpu };
}

const dir = mkdtempSync(join(tmpdir(), 'rlqs-bench-'));
const policyFile = join(dir, 'policies.json');
const policy = (id: string, user: string) => ({ policy_id: id, scope: { user_id: user, tags: { domain: 'edge' } }, algorithm: { type: 'fixed_window', limit: LIMIT, window: '1h' }, lease: { max_hold: '1s' }, failure_mode: 'fail_closed' });
writeFileSync(policyFile, JSON.stringify({ policies: [policy('rlqs', 'rlqs'), policy('rls', 'rls')] }));
const server = await startServerProcess({ RL_DATA_DIR: join(dir, 'data'), RL_POLICY_FILE: policyFile }, { cwd: undefined });
try {
  const grpcPort = Number(server.logs().find((l) => l.message === 'listening')!.grpc);
  const rlqs = await rlqsRun(server, grpcPort);
  const rls = await rlsRun(server, grpcPort);
  console.log(JSON.stringify({ envoys: ENVOYS, seconds: SECONDS, limit: LIMIT, rlqs, rls }, null, 2));
} finally {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
