import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onLogLines } from '../test/support/log-lines.js';
import { httpLoad, type HttpLoadResult } from './lib/http-load.js';
import { loadFields } from './lib/load-fields.js';
import { LOAD_CORE, REPO_DIR, SERVER_CORE, hasTaskset } from './lib/proc.js';
import { round } from './lib/stats.js';
import { generateWorkload } from './lib/workload.js';
import type { Context, ScenarioResult, Side } from './lib/scenario-kit.js';

/**
 * Capacity with RL_WORKERS=1 and RL_WORKERS=2 (issue 15, target 4): the real server (src/main.ts through
 * tsx, the cluster primary included) in Redis mode, the bench's policy set seeded from a policy file,
 * the same bodies and connections as the HTTP scenarios, measured alternately.
 *
 * Cores (2 on the reference machine): the load generator and Redis stay on core 1 (run.ts). One worker
 * is pinned to core 0, like every other measured server. Two workers (and their primary) may run on
 * both cores, so the second worker shares core 1 with the load generator and Redis: the ratio is what a
 * second process buys on this machine, not what a second free core would. Server CPU is read from
 * /proc for the primary and every worker (10 ms ticks).
 */
export async function workersCapacity(ctx: Context, id: number): Promise<ScenarioResult> {
  const redis = await ctx.redis();
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-workers-'));
  const policyFile = join(dir, 'policies.json');
  const workload = generateWorkload(10);
  writeFileSync(policyFile, JSON.stringify({ policies: workload.policies }));
  const bodies = workload.bodies.slice(0, ctx.settings.http.distinctBodies).map((b) => JSON.stringify(b));
  const { http } = ctx.settings;
  const groups: Group[] = [];
  try {
    groups.push(await startGroup(1, `${SERVER_CORE}`, redis.addr, policyFile));
    groups.push(await startGroup(2, `${SERVER_CORE},${LOAD_CORE}`, redis.addr, policyFile));
    const [one, two] = groups;
    const load = (group: Group, durationSec: number) => httpLoad({ port: group.port, path: '/rl/v1/check', bodies, connections: http.connections, durationSec, warmupSec: 0 });
    if (http.warmupSec > 0) for (const group of groups) await load(group, http.warmupSec);
    ctx.log(`  rl HTTP (Redis) with RL_WORKERS=1 and RL_WORKERS=2, alternately (${http.rounds} rounds)`);
    const runs: Record<1 | 2, Run[]> = { 1: [], 2: [] };
    for (let r = 0; r < http.rounds; r++) {
      runs[1].push(await measure(one, () => load(one, http.durationSec)));
      runs[2].push(await measure(two, () => load(two, http.durationSec)));
    }
    const baseline = side('rl HTTP /rl/v1/check, Redis, RL_WORKERS=1 (core 0)', runs[1]);
    const subject = side('rl HTTP /rl/v1/check, Redis, RL_WORKERS=2 (cores 0 and 1, shared with load generator and Redis)', runs[2]);
    const ratio = subject.throughput_per_s! / baseline.throughput_per_s!;
    return {
      id,
      key: 'workers_capacity',
      name: 'HTTP check, Redis mode, 1 and 2 workers',
      subject,
      baseline,
      ratio: round(ratio),
      ratio_meaning: 'throughput(2 workers) / throughput(1 worker), median rounds of alternating runs; higher is better',
      target: 'none: reported (issue 15 target 4 asks for the figure; exact limits across workers are tested in test/workers)',
      checks: [],
      pass: true,
      notes: [
        hasTaskset()
          ? 'One worker on core 0; two workers and their primary on cores 0 and 1, sharing core 1 with the load generator and Redis.'
          : 'Not pinned (no taskset): every process shares both cores as the scheduler decides.',
        'The primary accepts every connection and hands it to the next worker; with keep-alive connections that cost is paid once per connection.',
      ],
      details: {
        cpu_us_per_request_1: baseline.server_cpu_us_per_request,
        cpu_us_per_request_2: subject.server_cpu_us_per_request,
      },
    };
  } finally {
    await Promise.all(groups.map((group) => group.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
}

interface Group {
  port: number;
  /** The primary (when RL_WORKERS > 1) and every worker. */
  pids: number[];
  stop(): Promise<void>;
}

interface Run {
  result: HttpLoadResult;
  server_cpu_pct: number;
  server_cpu_us_per_request: number;
}

/** `node --import tsx src/main.ts` with RL_WORKERS=`workers`, on `cores`; resolves once every worker listens. */
function startGroup(workers: number, cores: string, redisAddr: string, policyFile: string): Promise<Group> {
  const node = [process.execPath, '--import', 'tsx', join(REPO_DIR, 'src/main.ts')];
  const [command, ...args] = hasTaskset() ? ['taskset', '-c', cores, ...node] : node;
  const child = spawn(command, args, {
    cwd: REPO_DIR,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: {
      ...process.env,
      RL_WORKERS: String(workers),
      RL_COUNTERSTORE_ADDR: redisAddr,
      RL_KEY_PREFIX: `bench-workers-${workers}:`,
      RL_POLICY_FILE: policyFile,
      RL_HTTP_ADDR: '127.0.0.1:0',
      RL_GRPC_ADDR: '127.0.0.1:0',
      RL_SHUTDOWN_DELAY_SECS: '0',
    },
  });
  const killOnExit = () => child.pid !== undefined && child.exitCode === null && process.kill(child.pid, 'SIGKILL');
  process.once('exit', killOnExit);
  const stop = () => stopGroup(child, killOnExit);
  return new Promise((resolve, reject) => {
    const pids = workers > 1 ? [child.pid!] : [];
    onLogLines(child.stderr!, (line, entry) => {
      if (entry === undefined) return;
      if (entry.level === 'error' || entry.level === 'warn') process.stderr.write(`${line}\n`);
      if (entry.message === 'worker ready') pids.push(Number(entry.pid));
      if (workers === 1 && entry.message === 'listening') resolve({ port: Number(entry.http), pids: [child.pid!], stop });
      if (workers > 1 && entry.message === 'workers ready') resolve({ port: Number(entry.http), pids, stop });
    });
    child.once('exit', (code) => reject(new Error(`RL_WORKERS=${workers} server exited (code ${code}) before it was ready`)));
  });
}

async function stopGroup(child: ChildProcess, killOnExit: () => void): Promise<void> {
  process.off('exit', killOnExit);
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  await exited;
  clearTimeout(timer);
}

async function measure(group: Group, run: () => Promise<HttpLoadResult>): Promise<Run> {
  const before = cpuMs(group.pids);
  const result = await run();
  const cpu = cpuMs(group.pids) - before;
  return {
    result,
    server_cpu_pct: round((cpu / (result.duration_s * 1000)) * 100),
    server_cpu_us_per_request: round((cpu * 1000) / Math.max(1, result.requests)),
  };
}

/** The median round by throughput, with every round's throughput beside it. */
function side(name: string, runs: Run[]): Side {
  const median = [...runs].sort((a, b) => a.result.throughput_rps - b.result.throughput_rps)[Math.floor((runs.length - 1) / 2)];
  return {
    name,
    ...loadFields(median.result),
    server_cpu_pct: median.server_cpu_pct,
    server_cpu_us_per_request: median.server_cpu_us_per_request,
    rounds_throughput_per_s: runs.map((run) => round(run.result.throughput_rps)),
  };
}

const TICKS_PER_SECOND = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** User + system CPU of these processes so far, in ms (/proc/<pid>/stat utime and stime). */
function cpuMs(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks += Number(fields[11]) + Number(fields[12]);
  }
  return (ticks * 1000) / TICKS_PER_SECOND;
}
