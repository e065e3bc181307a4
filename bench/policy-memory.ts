/**
 * What policies cost at scale (issue 23, point 6), through the real code, each phase in a fresh process
 * started with --expose-gc:
 *
 *   npx tsx bench/policy-memory.ts [--policies 100000] [--dir /tmp/x] [--phases file,seed,reopen] [--heap-snapshot]
 *
 *   file     loadPolicyFile of N policies + LiveMatcher: live heap after GC (what scenario 5 builds)
 *   seed     an empty data directory seeded from the file (as the first start of the server)
 *   reopen   FilePolicyStore.open of that directory + PolicyService with a LiveMatcher (the usual restart):
 *            time per phase, live heap after GC
 *   server   startServer on that directory (what scenario 10 reports as the reopen start-up), live heap
 *   compact  another data directory seeded, then its first compaction (a snapshot of every policy):
 *            the event loop's busy time (eventLoopUtilization) and its longest stall meanwhile
 *
 * `--heap-snapshot` adds the largest object classes of the reopened process (count, self bytes).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { loadServerConfig } from '../src/config.js';
import { startServer } from '../src/server.js';
import { LiveMatcher } from '../src/matching/live-matcher.js';
import { loadPolicyFile } from '../src/policy/policy-file.js';
import { PolicyService } from '../src/policy-service/policy-service.js';
import { FilePolicyStore } from '../src/policy-store/file-policy-store.js';
import { setLogLevel } from '../src/util/log.js';
import { generateWorkload } from './lib/workload.js';

const args = process.argv.slice(2);
const argOf = (name: string, dflt: string): string => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const MiB = 2 ** 20;

/** A point in time: wall clock and this process's CPU time (every thread: GC helpers count). */
interface Mark {
  ms: number;
  cpu: NodeJS.CpuUsage;
}

function mark(): Mark {
  return { ms: performance.now(), cpu: process.cpuUsage() };
}

/** Wall and CPU milliseconds from `a` to `b`. */
function between(a: Mark, b: Mark): { ms: number; cpu_ms: number } {
  return { ms: b.ms - a.ms, cpu_ms: (b.cpu.user + b.cpu.system - a.cpu.user - a.cpu.system) / 1000 };
}

function liveHeap(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with --expose-gc');
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
}

/** Self size and count per constructor name in a heap snapshot of this process (largest first). */
async function heapClasses(top = 25): Promise<{ name: string; count: number; mib: number }[]> {
  const session = new Session();
  session.connect();
  let text = '';
  session.on('HeapProfiler.addHeapSnapshotChunk', (m) => (text += m.params.chunk));
  await session.post('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
  session.disconnect();
  const snap = JSON.parse(text) as { snapshot: { meta: { node_fields: string[]; node_types: [string[]] } }; nodes: number[]; strings: string[] };
  const f = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const [iType, iName, iSize, width] = [f.indexOf('type'), f.indexOf('name'), f.indexOf('self_size'), f.length];
  const by = new Map<string, { count: number; bytes: number }>();
  for (let n = 0; n < snap.nodes.length; n += width) {
    const type = types[snap.nodes[n + iType]];
    const name = type === 'object' || type === 'closure' ? `${type} ${snap.strings[snap.nodes[n + iName]]}` : `(${type})`;
    const e = by.get(name) ?? { count: 0, bytes: 0 };
    e.count++;
    e.bytes += snap.nodes[n + iSize];
    by.set(name, e);
  }
  return [...by].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, top).map(([name, e]) => ({ name, count: e.count, mib: Math.round((e.bytes / MiB) * 10) / 10 }));
}

async function phase(name: string, dir: string, count: number, snapshot: boolean): Promise<Record<string, unknown>> {
  setLogLevel('warn');
  const file = join(dir, 'policies.json');
  const base = liveHeap();
  if (name === 'file') {
    const m0 = mark();
    const policies = loadPolicyFile(file);
    const m1 = mark();
    const matcher = new LiveMatcher(policies);
    const m2 = mark();
    const heap = liveHeap();
    const out = { load: between(m0, m1), matcher: between(m1, m2), heap_mib: (heap - base) / MiB, bytes_per_policy: (heap - base) / count, size: matcher.current().size };
    return snapshot ? { ...out, classes: await heapClasses() } : out;
  }
  if (name === 'seed') {
    const m0 = mark();
    const store = await FilePolicyStore.open(join(dir, 'data'));
    await store.seedIfEmpty(() => loadPolicyFile(file));
    await store.settled();
    const seed = between(m0, mark());
    await store.close();
    return { seed, stats: store.storageStats() };
  }
  if (name === 'compact') {
    const store = await FilePolicyStore.open(join(dir, `compact-data-${process.pid}`));
    // Seeding queues the compaction behind itself; it runs once the seeding record is applied.
    await store.seedIfEmpty(() => loadPolicyFile(file));
    const loop = monitorEventLoopDelay({ resolution: 1 });
    loop.enable();
    const elu = performance.eventLoopUtilization();
    const m0 = mark();
    await store.settled();
    const compaction = between(m0, mark());
    const busy = performance.eventLoopUtilization(elu);
    loop.disable();
    const stats = store.storageStats();
    await store.close();
    return {
      compaction,
      event_loop_busy_ms: busy.active,
      loop_delay_max_ms: loop.max / 1e6,
      loop_delay_p99_ms: loop.percentile(99) / 1e6,
      snapshot_bytes: stats.snapshotBytes,
      compactions: stats.compactions,
    };
  }
  if (name === 'server') {
    const config = loadServerConfig({ RL_DATA_DIR: join(dir, 'data'), RL_POLICY_FILE: file, RL_HTTP_ADDR: '127.0.0.1:0', RL_GRPC_ADDR: '127.0.0.1:0', RL_SHUTDOWN_DELAY_SECS: '0', RL_DRAIN_SECS: '1' });
    const m0 = mark();
    const server = await startServer(config);
    const startup = between(m0, mark());
    const heap = liveHeap();
    await server.drain();
    return { startup, heap_mib: (heap - base) / MiB, bytes_per_policy: (heap - base) / count };
  }
  const m0 = mark();
  const store = await FilePolicyStore.open(join(dir, 'data'));
  const m1 = mark();
  const matcher = new LiveMatcher();
  const service = new PolicyService({ store, matcher });
  const m2 = mark();
  const heap = liveHeap();
  const out = {
    open: between(m0, m1),
    matcher: between(m1, m2),
    startup: between(m0, m2),
    heap_mib: (heap - base) / MiB,
    bytes_per_policy: (heap - base) / count,
    size: matcher.current().size,
    stats: store.storageStats(),
  };
  const result = snapshot ? { ...out, classes: await heapClasses() } : out;
  service.close();
  await store.close();
  return result;
}

if (args[0] === '--phase') {
  const result = await phase(args[1], argOf('dir', ''), Number(argOf('policies', '100000')), args.includes('--heap-snapshot'));
  process.stdout.write(`${JSON.stringify(result)}\n`);
} else {
  const count = Number(argOf('policies', '100000'));
  const own = !args.includes('--dir');
  const dir = own ? mkdtempSync(join(tmpdir(), 'rl-policy-memory-')) : argOf('dir', '');
  try {
    writeFileSync(join(dir, 'policies.json'), JSON.stringify({ policies: generateWorkload(count).policies }));
    const phases = argOf('phases', 'file,seed,reopen').split(',');
    for (const name of phases) {
      const child = spawnSync(process.execPath, ['--expose-gc', ...process.execArgv, fileURLToPath(import.meta.url), '--phase', name, ...args, '--dir', dir], { encoding: 'utf8', maxBuffer: 64 * MiB });
      if (child.status !== 0) throw new Error(`${name} failed: ${child.stderr}`);
      console.log(name, child.stdout.trim());
    }
  } finally {
    if (own) rmSync(dir, { recursive: true, force: true });
  }
}
