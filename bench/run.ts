/**
 * `npm run bench` — every scenario of issue 6 against its baseline, measured in the same run:
 *
 *   npm run bench                      full run (~7.5 minutes), writes bench/results.json
 *   npm run bench -- --quick           shorter runs, fewer keys (under a minute)
 *   npm run bench -- --smoke           scenario 1 for a fraction of a second (the smoke test)
 *   npm run bench -- --only 1,4        some scenarios only
 *   npm run bench -- --out file.json   write the results elsewhere
 *   npm run bench -- --no-pin          no taskset pinning
 *   npm run bench -- --tsx             children run src/ through tsx instead of a tsc build
 *
 * With RL_BENCH_AUTH_API_KEYS (entries as RL_AUTH_API_KEYS) the HTTP servers under test authenticate API
 * keys, and the HTTP load sends RL_BENCH_API_KEY: e.g. `bench-key:admin:org-0` (the workload's org) for a
 * credential limited to an organisation.
 *
 * Cores (2 on the reference machine): every measured server and every in-process measurement runs in
 * its own child process pinned to core 0; this process (the load generator: autocannon and the grpc-js
 * clients) and the private redis-server are pinned to core 1. Without taskset nothing is pinned (the
 * results say so).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, resolve } from 'node:path';
import { buildForBench } from './lib/build.js';
import { machineInfo, sourceState } from './lib/machine.js';
import { BENCH_DIR, LOAD_CORE, SERVER_CORE, disablePinning, pinSelf, runMain, startPrivateRedis, useBuild, type PrivateRedis } from './lib/proc.js';
import { formatTable } from './lib/report.js';
import { round } from './lib/stats.js';
import { SETTINGS, type Context, type ScenarioResult, type Settings } from './lib/scenario-kit.js';
import { SCENARIOS } from './scenarios.js';

interface Args {
  mode: Settings['mode'];
  only: number[] | undefined;
  out: string;
  /** --no-pin: leave placement to the scheduler (when other work already occupies core 0, say). */
  pin: boolean;
  /** --tsx: run the children's TypeScript through tsx instead of a tsc build (faster to start, less faithful). */
  tsx: boolean;
}

function parseArgs(argv: string[]): Args {
  let mode: Settings['mode'] = 'full';
  let only: number[] | undefined;
  let out = resolve(BENCH_DIR, 'results.json');
  let pin = true;
  let tsx = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--quick') mode = 'quick';
    else if (a === '--smoke') mode = 'smoke';
    else if (a === '--full') mode = 'full';
    else if (a === '--no-pin') pin = false;
    else if (a === '--tsx') tsx = true;
    else if (a === '--only') only = argv[++i].split(',').map(Number);
    else if (a.startsWith('--only=')) only = a.slice(7).split(',').map(Number);
    else if (a === '--out') out = resolve(argv[++i]);
    else if (a.startsWith('--out=')) out = resolve(a.slice(6));
    else if (a === '--help' || a === '-h') {
      console.log('usage: tsx bench/run.ts [--quick | --smoke] [--only 1,2,...] [--out results.json] [--no-pin] [--tsx]');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (only) {
    for (const id of only) if (!SCENARIOS[id]) throw new Error(`no scenario ${id} (1-${Object.keys(SCENARIOS).length})`);
  } else if (mode === 'smoke') only = [1];
  return { mode, only, out, pin, tsx };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const settings = SETTINGS[args.mode];
  const machine = machineInfo();
  const sourceAtStart = sourceState();
  if (!args.pin) disablePinning();
  const pinned = args.pin && pinSelf(LOAD_CORE);
  const pinning = pinned
    ? `taskset: servers and in-process measurements on core ${SERVER_CORE} (one child process each); ` +
      `load generator (this process: autocannon, grpc-js clients) and redis-server on core ${LOAD_CORE}`
    : `not pinned (${args.pin ? 'taskset unavailable' : '--no-pin'}): servers, load generator and Redis share both cores as the scheduler decides`;
  const started = new Date();
  const log = (message: string) => process.stderr.write(`${message}\n`);
  log(`rl bench (${args.mode}) — ${machine.nproc} cores, ${machine.cpu_model}, node ${machine.node}`);
  log(pinning);
  let build: { dir: string; remove(): void } | undefined;
  if (!args.tsx) {
    const t0 = performance.now();
    build = buildForBench();
    useBuild(build.dir);
    log(`compiled src/ and bench/ with tsc in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  }
  const code = args.tsx ? 'TypeScript sources through tsx (esbuild, keepNames)' : 'src/ and bench/ compiled by tsc (as npm run build), run by node';

  let redis: PrivateRedis | undefined;
  let redisStarting: Promise<PrivateRedis> | undefined;
  const ctx: Context = {
    settings,
    redis: () => (redisStarting ??= startPrivateRedis(LOAD_CORE).then((r) => (redis = r))),
    log,
  };

  const ids = args.only ?? Object.keys(SCENARIOS).map(Number);
  const scenarios: ScenarioResult[] = [];
  const failures: { id: number; error: string }[] = [];
  try {
    for (const id of ids) {
      const t0 = performance.now();
      log(`[${id}] ${SCENARIOS[id].key}`);
      const loadBefore = os.loadavg()[0];
      try {
        const result = await SCENARIOS[id].run(ctx);
        // Other work on the machine skews every figure: keep the 1-minute load average beside them.
        result.details.loadavg_1m = { before: round(loadBefore), after: round(os.loadavg()[0]) };
        scenarios.push(result);
      } catch (error) {
        const message = String((error as Error)?.stack ?? error);
        log(`[${id}] FAILED: ${message}`);
        failures.push({ id, error: message });
      }
      log(`[${id}] ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    }
  } finally {
    await redis?.kill();
    build?.remove();
  }

  // Figures belong to one version of src/: say so when it changed while the benchmark ran.
  const sourceChanged = sourceState() !== sourceAtStart;
  if (sourceChanged) log('WARNING: src/ changed while the benchmark ran (commit or working tree); the figures mix versions');
  const results = {
    schema: 1,
    source_changed_during_run: sourceChanged,
    started_at: started.toISOString(),
    duration_s: Math.round((Date.now() - started.getTime()) / 100) / 10,
    mode: args.mode,
    machine: { ...machine, redis_version: redis?.version ?? null },
    pinning,
    code,
    settings,
    scenarios,
    failures,
    all_pass: failures.length === 0 && scenarios.every((s) => s.pass),
  };
  mkdirSync(dirname(args.out), { recursive: true });
  writeFileSync(args.out, JSON.stringify(results, null, 2) + '\n');
  console.log(formatTable(results));
  log(`results written to ${args.out}`);
  if (failures.length > 0) process.exitCode = 1;
}

runMain(main);
