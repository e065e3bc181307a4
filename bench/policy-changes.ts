import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { httpLoad } from './lib/http-load.js';
import { loadFields } from './lib/load-fields.js';
import { pacedHttpLoad, type PacedLoadResult } from './lib/paced-load.js';
import { LOAD_CORE, nextMessage, request, spawnChild, stopChild } from './lib/proc.js';
import { round } from './lib/stats.js';
import { generateWorkload } from './lib/workload.js';
import type { Check, Context, ScenarioResult, Side } from './lib/scenario-kit.js';

/**
 * Policy changes at scale (issue 15, target 5): the real server (file policy store, memory counters)
 * holding POLICIES policies answers paced decisions over HTTP, first alone (baseline), then while the
 * policy API takes CHANGES_PER_S changes a second (subject: a create, an update and a delete in turn,
 * through POST/PUT/DELETE /rl/v1/policies, each journaled and applied to the matcher, sent by a child
 * process of their own: bench/child/policy-churn.ts). Target: decision
 * p99 <= 2 ms while the changes land. Start-up is reported twice: seeding an empty data directory from
 * the policy file, and reopening the journal it wrote (the usual restart). The same paced decisions on a
 * server holding 10 policies give the tail that the policy count alone costs (details).
 *
 * What one change costs the event loop in-process, and Matcher.match per call, are measured by
 * bench/matcher-changes.ts (npx tsx; BENCHMARKS.md).
 */
const CHANGES_PER_S = 100;

interface Started {
  child: ChildProcess;
  port: number;
  startup_ms: number;
  startup_cpu_ms: number;
  since_process_start_ms: number;
}

/** What bench/child/policy-churn.ts answers: the changes' round trips and how many the API refused. */
interface Churned {
  sent: number;
  failed: number;
  statuses: Record<string, number>;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
  /** The sender's own CPU time a change: it runs on the load generator's core. */
  client_cpu_ms_per_change: number;
}

interface Usage {
  cpu: NodeJS.CpuUsage;
  hrtime_ms: number;
  gc: { max_ms: number; major_count: number };
  stats?: { loop_delay_p99_ms: number; loop_delay_max_ms: number };
}

async function startPolicyServer(dir: string, policyFile: string): Promise<Started> {
  const child = spawnChild('policy-server.ts', ['--data-dir', dir, '--policy-file', policyFile]);
  const ready = await nextMessage<Omit<Started, 'child'>>(child, 'ready', 300_000);
  return { child, ...ready };
}

async function drainPolicyServer(child: ChildProcess): Promise<void> {
  await request(child, { type: 'drain' }, 'drained', 30_000);
  await stopChild(child);
}

/**
 * With RL_BENCH_PROFILE_DIR set, the server's CPU profile of each measured window goes to
 * <dir>/policy-changes-<name>.cpuprofile (summarise with bench/cpuprofile-summary.ts).
 */
const PROFILE_DIR = process.env.RL_BENCH_PROFILE_DIR;

async function paced(child: ChildProcess, run: () => Promise<PacedLoadResult>, profileName: string) {
  if (PROFILE_DIR) await request(child, { type: 'profile-start' }, 'profile-started');
  const before = await request<Usage>(child, { type: 'usage' }, 'usage');
  const result = await run();
  const after = await request<Usage>(child, { type: 'usage' }, 'usage');
  if (PROFILE_DIR) await request(child, { type: 'profile-stop', path: join(PROFILE_DIR, `policy-changes-${profileName}.cpuprofile`) }, 'profile-stopped');
  const cpuUs = after.cpu.user + after.cpu.system - before.cpu.user - before.cpu.system;
  return { result, cpuPct: round((cpuUs / 1000 / (after.hrtime_ms - before.hrtime_ms)) * 100), usage: after };
}

function side(name: string, m: Awaited<ReturnType<typeof paced>>): Side {
  return {
    name,
    ...loadFields(m.result),
    server_cpu_pct: m.cpuPct,
    server_loop_delay_p99_ms: round(m.usage.stats?.loop_delay_p99_ms ?? NaN),
    server_loop_delay_max_ms: round(m.usage.stats?.loop_delay_max_ms ?? NaN),
    server_gc_max_pause_ms: round(m.usage.gc.max_ms),
    server_gc_major_count: m.usage.gc.major_count,
  };
}

/** The policy count of the comparison server (no changes): the smallest workload. */
const FEW = 10;

async function pacedWithFewPolicies(dir: string, warmupSec: number, rate: number, durationSec: number, distinctBodies: number) {
  const workload = generateWorkload(FEW);
  const policyFile = join(dir, 'few-policies.json');
  writeFileSync(policyFile, JSON.stringify({ policies: workload.policies }));
  const bodies = workload.bodies.slice(0, distinctBodies).map((b) => JSON.stringify(b));
  const server = await startPolicyServer(join(dir, 'few-data'), policyFile);
  try {
    const { port, child } = server;
    if (warmupSec > 0) await httpLoad({ port, path: '/rl/v1/check', bodies, connections: 10, durationSec: warmupSec, warmupSec: 0 });
    await pacedHttpLoad({ port, path: '/rl/v1/check', bodies, rate, connections: 64, durationSec: 2 });
    return await paced(child, () => pacedHttpLoad({ port, path: '/rl/v1/check', bodies, rate, connections: 64, durationSec }), 'few');
  } finally {
    await drainPolicyServer(server.child).catch(() => stopChild(server.child));
  }
}

export async function policyChanges(ctx: Context, id: number): Promise<ScenarioResult> {
  const { settings } = ctx;
  const count = settings.mode === 'smoke' ? 1_000 : 100_000;
  const rate = settings.mode === 'smoke' ? 500 : 5_000;
  const durationSec = Math.max(2, settings.http.pacedDurationSec);
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-policy-changes-'));
  const policyFile = join(dir, 'policies.json');
  let workload: ReturnType<typeof generateWorkload> | undefined = generateWorkload(count);
  writeFileSync(policyFile, JSON.stringify({ policies: workload.policies }));
  const bodies = workload.bodies.slice(0, settings.http.distinctBodies).map((b) => JSON.stringify(b));
  // The changes draw from a sample: the whole set would only make this process's GC pauses longer.
  const policies = workload.policies.filter((_, i) => i % 100 === 0) as unknown as Record<string, unknown>[];
  workload = undefined;
  let server: Started | undefined;
  let churner: ChildProcess | undefined;
  try {
    ctx.log(`  start-up with ${count} policies: seeding an empty data directory, then reopening it`);
    const seeded = await startPolicyServer(join(dir, 'data'), policyFile);
    await drainPolicyServer(seeded.child);
    server = await startPolicyServer(join(dir, 'data'), policyFile);
    const { port, child } = server;
    const load = () => pacedHttpLoad({ port, path: '/rl/v1/check', bodies, rate, connections: 64, durationSec });
    if (settings.http.warmupSec > 0) await httpLoad({ port, path: '/rl/v1/check', bodies, connections: settings.http.connections, durationSec: settings.http.warmupSec, warmupSec: 0 });
    ctx.log(`  ${rate} decisions/s paced for ${durationSec} s, alone, then with ${CHANGES_PER_S} policy changes/s`);
    const sampleFile = join(dir, 'sample.json');
    writeFileSync(sampleFile, JSON.stringify(policies));
    churner = spawnChild('policy-churn.ts', ['--port', String(port), '--policies', sampleFile], { core: LOAD_CORE });
    await nextMessage(churner, 'ready', 60_000);
    // Changes thrown away: the first change after seeding compacts the seeded journal (100,000 policies
    // into a snapshot, once; the next compaction waits until the journal has grown as large again).
    await request(churner, { type: 'churn', perSecond: CHANGES_PER_S, durationSec: 1 }, 'churned', 120_000);
    // A paced run thrown away: the server just built 100,000 policies, its heap and JIT settle first.
    await pacedHttpLoad({ port, path: '/rl/v1/check', bodies, rate, connections: 64, durationSec: 2 });
    const alone = await paced(child, load, 'alone');
    // The same paced decisions, no changes, on a server holding the few policies of the smallest workload:
    // what holding COUNT policies costs the decision tail (issue 23: within 1.3x).
    const few = await pacedWithFewPolicies(dir, settings.http.warmupSec, rate, durationSec, settings.http.distinctBodies);
    let changes: Churned | undefined;
    const during = await paced(child, async () => {
      const [result, churned] = await Promise.all([load(), request<Churned>(churner!, { type: 'churn', perSecond: CHANGES_PER_S, durationSec }, 'churned', 120_000)]);
      changes = churned;
      return result;
    }, 'changes');
    const subject = side(`decisions while ${CHANGES_PER_S} policy changes/s land (${count} policies)`, during);
    const baseline = side(`decisions, no policy changes (${count} policies)`, alone);
    const checks: Check[] = [];
    const p99 = during.result.p99_ms;
    checks.push({ target: 'decision p99 while changes land', value: round(p99), unit: 'ms', op: '<=', limit: 2, pass: p99 <= 2 });
    const landed = changes!.sent - changes!.failed;
    checks.push({ target: 'changes the API accepted', value: landed, unit: '', op: '>=', limit: changes!.sent, pass: landed >= changes!.sent });
    return {
      id,
      key: 'policy_changes',
      name: `Policy changes at scale (${count} policies, ${CHANGES_PER_S} changes/s)`,
      subject,
      baseline,
      ratio: baseline.p99_ms ? round(p99 / baseline.p99_ms) : null,
      ratio_meaning: 'decision p99 with changes / without; lower is better',
      target: `decision p99 <= 2 ms at ${rate}/s while ${CHANGES_PER_S} policy changes/s land`,
      checks,
      pass: checks.every((c) => c.pass),
      notes: [
        'Each change is journaled (fsync) and applied to the live matcher alone (Matcher.apply: one compile, two splices); a full rebuild per change took ~1.4 s at 100,000 policies before.',
        'Start-up: seeding writes every policy to the journal first; reopening replays the journal (or its snapshot) and builds the matcher once.',
        'Before measuring, 100 changes are sent and thrown away: the first change after seeding triggers the one compaction of the seeded journal (a snapshot of every policy), which is not what a change costs in steady state.',
      ],
      details: {
        policies: count,
        startup_seed_ms: round(seeded.startup_ms),
        startup_seed_since_process_start_ms: round(seeded.since_process_start_ms),
        startup_reopen_ms: round(server.startup_ms),
        // CPU time of start-up (every thread, GC helpers included): what a shared machine leaves comparable.
        startup_seed_cpu_ms: round(seeded.startup_cpu_ms),
        startup_reopen_cpu_ms: round(server.startup_cpu_ms),
        startup_reopen_since_process_start_ms: round(server.since_process_start_ms),
        changes: changes!,
        decisions_with_few_policies: { policies: FEW, ...side(`decisions, no policy changes (${FEW} policies)`, few) },
        p99_ratio_count_to_few: few.result.p99_ms ? round(alone.result.p99_ms / few.result.p99_ms) : null,
        // Extra server CPU while changes land, over the changes a second: what one change costs the server.
        server_cpu_ms_per_change: round(((during.cpuPct - alone.cpuPct) / 100) * (1000 / CHANGES_PER_S)),
      },
    };
  } finally {
    if (churner) await stopChild(churner);
    if (server) await drainPolicyServer(server.child).catch(() => stopChild(server!.child));
    rmSync(dir, { recursive: true, force: true });
  }
}
