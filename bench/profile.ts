/**
 * CPU profiles of the hot paths (node --cpu-prof), summarised:
 *
 *   npx tsx bench/profile.ts [--seconds 10] [--only engine,http-memory,http-redis,grpc,scaling] [--whole-process] [--tsx] [--layers]
 *
 * engine       DecisionService.check in-process (scenario 4's workload, recorder on)
 * http-memory  the HTTP server in memory mode under autocannon (scenario 1)
 * http-bare    scenario 1's baseline (bare node:http) under the same load, to compare with http-memory
 * http-redis   the HTTP server in Redis mode under autocannon (scenario 2; a private redis-server)
 * http-redis-down  the same after its Redis was killed (scenario 7: every decision by failure_mode)
 * grpc         the gRPC server under the grpc-js load loop (scenario 3)
 * scaling      DecisionService.check with 100,000 policies (scenario 5)
 * http-regions a region's HTTP server on a global budget, the global store behind a 25 ms delay proxy,
 *              paced at 1,000 decisions/s (scenario 13's subject)
 *
 * By default the profile covers the measured window only: V8's sampling profiler (the one behind
 * `node --cpu-prof`) is started over the inspector after the warm-up and stopped before the load ends,
 * so start-up, module loading and idle time do not dilute the percentages. `--whole-process` runs the
 * child under `node --cpu-prof` instead (the whole life of the process).
 *
 * --layers: the HTTP servers decide every check in three layers (scenario 17's subject).
 *
 * Profiles go to bench/profiles/<name>.cpuprofile (git-ignored; open them in Chrome DevTools or
 * speedscope); the summaries are printed. Pinning as in `npm run bench`.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { formatSummary, summarise, type CpuProfile } from './cpuprofile-summary.js';
import { grpcLoad } from './lib/grpc-load.js';
import { httpLoad } from './lib/http-load.js';
import { buildForBench } from './lib/build.js';
import { BENCH_DIR, LOAD_CORE, nextMessage, pinSelf, request, runMain, spawnChild, startPrivateRedis, stopChild, useBuild } from './lib/proc.js';
import { pacedHttpLoad } from './lib/paced-load.js';
import { PACED_CONNECTIONS } from './lib/scenario-kit.js';
import { REGION_HOT_BODY, generateWorkload } from './lib/workload.js';

const PROFILE_DIR = join(BENCH_DIR, 'profiles');
const ALL = ['engine', 'http-memory', 'http-bare', 'http-redis', 'http-redis-down', 'grpc', 'scaling', 'http-regions'];

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
}

/** --cpu-prof into a fresh directory of its own, then the file renamed to <name>.cpuprofile. */
function profileFlags(name: string): { flags: string[]; collect: () => string } {
  const dir = join(PROFILE_DIR, `.${name}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return {
    flags: ['--cpu-prof', '--cpu-prof-dir', dir, '--cpu-prof-interval', '200'],
    collect: () => {
      const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
      if (!file) throw new Error(`no profile written in ${dir}`);
      const target = join(PROFILE_DIR, `${name}.cpuprofile`);
      renameSync(join(dir, file), target);
      rmSync(dir, { recursive: true, force: true });
      return target;
    },
  };
}

async function main(): Promise<void> {
  const seconds = Number(arg('seconds', '10'));
  const wholeProcess = process.argv.includes('--whole-process');
  const only = arg('only', ALL.join(',')).split(',');
  // As in `npm run bench`: the tsc build production runs (and real line numbers), unless --tsx.
  const build = process.argv.includes('--tsx') ? undefined : buildForBench();
  useBuild(build?.dir);
  try {
    await profileAll(seconds, only, wholeProcess);
  } finally {
    build?.remove();
  }
}

async function profileAll(seconds: number, only: string[], wholeProcess: boolean): Promise<void> {
  pinSelf(LOAD_CORE);
  mkdirSync(PROFILE_DIR, { recursive: true });
  const bodies = generateWorkload(10).bodies.slice(0, 100);
  const report = (name: string, file: string, operations?: number) => {
    const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
    console.log(formatSummary(`${name} (${file})`, summarise(profile, 30), operations));
    console.log('');
  };

  for (const name of only) {
    if (!ALL.includes(name)) throw new Error(`unknown profile ${name}; one of ${ALL.join(', ')}`);
    const whole = wholeProcess ? profileFlags(name) : undefined;
    const windowFile = join(PROFILE_DIR, `${name}.cpuprofile`);
    const flags = whole?.flags ?? [];
    process.stderr.write(`profiling ${name} for ~${seconds} s\n`);
    /** Operations (decisions, requests) done while the profile ran, to express costs per operation. */
    let operations: number | undefined;
    if (name === 'engine' || name === 'scaling') {
      const args = name === 'engine' ? ['--mode', 'engine', '--impl', 'rl'] : ['--mode', 'scaling', '--policies', '100000'];
      const child = spawnChild(
        'engine.ts',
        [...args, '--round-ms', String(seconds * 250), '--rounds', '4', '--warmup-ms', '1000', '--latency-calls', '1000', ...(whole ? [] : ['--profile', windowFile])],
        { nodeFlags: flags },
      );
      const result = await nextMessage<{ rounds_ns_per_op: number[] }>(child, 'result', 600_000);
      // The profile covers the timed rounds (4 × seconds/4).
      if (!whole) operations = result.rounds_ns_per_op.reduce((sum, ns) => sum + (seconds * 250 * 1e6) / ns, 0);
      await stopChild(child, 30_000);
    } else if (name === 'http-regions') {
      operations = await profileRegionServer(seconds, flags, whole ? undefined : windowFile);
    } else {
      const redis = name.startsWith('http-redis') ? await startPrivateRedis(LOAD_CORE) : undefined;
      const kind = name === 'grpc' ? 'rl-grpc' : name === 'http-bare' ? 'bare-http' : 'rl-http';
      const layers = process.argv.includes('--layers') ? ['--layers', 'yes'] : [];
      const child = spawnChild('server.ts', ['--kind', kind, ...(redis ? ['--redis', redis.addr] : []), ...layers], { nodeFlags: flags });
      try {
        const { port } = await nextMessage<{ port: number }>(child, 'ready', 60_000);
        const load = async (durationSec: number) =>
          name === 'grpc'
            ? grpcLoad({ port, messages: bodies, channels: 2, concurrency: 16, durationSec, warmupSec: 0 })
            : httpLoad({ port, path: '/rl/v1/check', bodies: bodies.map((b) => JSON.stringify(b)), connections: 10, durationSec, warmupSec: 0 });
        await load(2); // warm-up, not profiled
        if (name === 'http-redis-down') await redis!.kill();
        if (!whole) operations = await profileMiddle(child, seconds, windowFile, load);
        else await load(seconds);
      } finally {
        await stopChild(child, 30_000);
        await redis?.kill();
      }
    }
    report(name, whole ? whole.collect() : windowFile, operations);
  }
}

/**
 * Profiles the middle of a run (started after the load is up, stopped before it ends) into `windowFile`;
 * answers the requests answered meanwhile, estimated from the run's rate.
 */
async function profileMiddle(child: ChildProcess, seconds: number, windowFile: string, load: (durationSec: number) => Promise<{ throughput_rps: number }>) {
  const running = load(seconds + 1);
  await new Promise((resolve) => setTimeout(resolve, 500));
  await request(child, { type: 'profile-start' }, 'profile-started');
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  await request(child, { type: 'profile-stop', path: windowFile }, 'profile-stopped');
  return (await running).throughput_rps * seconds;
}

/** Scenario 13's subject: one region's server, its own store, the global store 25 ms away; paced, not saturated. */
async function profileRegionServer(seconds: number, flags: string[], windowFile: string | undefined): Promise<number | undefined> {
  const RATE = 1000;
  const [global, regional] = await Promise.all([startPrivateRedis(LOAD_CORE), startPrivateRedis(LOAD_CORE)]);
  const proxy = spawnChild('link-proxy.ts', ['--port', String(global.port), '--delay-ms', '25'], { core: LOAD_CORE });
  const { port: proxyPort } = await nextMessage<{ port: number }>(proxy, 'ready', 30_000);
  const child = spawnChild(
    'server.ts',
    ['--kind', 'rl-http', '--redis', regional.addr, '--regions', 'yes', '--region', 'region-a', '--global', `127.0.0.1:${proxyPort}`],
    { nodeFlags: flags },
  );
  try {
    const { port } = await nextMessage<{ port: number }>(child, 'ready', 60_000);
    const load = (durationSec: number) =>
      pacedHttpLoad({ port, path: '/rl/v1/check', bodies: [JSON.stringify(REGION_HOT_BODY)], connections: PACED_CONNECTIONS, rate: RATE, durationSec });
    await load(2); // warm-up, not profiled: the region's pool fills
    if (windowFile) return await profileMiddle(child, seconds, windowFile, load);
    await load(seconds);
    return undefined;
  } finally {
    await stopChild(child, 30_000);
    await stopChild(proxy);
    await Promise.all([global.kill(), regional.kill()]);
  }
}

runMain(main);
