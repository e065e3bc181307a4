/**
 * Do memory-counter snapshots cost decision latency at a million live keys? One run, two servers in turn
 * on the same machine, each restoring the same 1M live fixed_window counters from a snapshot this script
 * writes first: `off` with RL_COUNTER_SNAPSHOT_SECS=3600 (no snapshot written while measured), `on` with
 * RL_COUNTER_SNAPSHOT_SECS=1 (one always being written or just done: five times the default's load).
 * Open-loop paced HTTP checks on users among the million; p50/p99/max per server, rounds alternating.
 *
 *   npx tsx bench/counter-snapshots.ts [--keys 1000000] [--rate 2000] [--secs 20] [--rounds 2]
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { MemoryCounterStore } from '../src/counters/memory-store.js';
import { writeSnapshot } from '../src/counters/snapshot/snapshot-file.js';
import { COUNTER_SNAPSHOT_FILE } from '../src/counters/snapshot/snapshot-format.js';
import { DecisionService } from '../src/decision/decision-service.js';
import { LiveMatcher } from '../src/matching/live-matcher.js';
import { makePolicy } from '../test/support/policies.js';
import { startServerProcess } from '../test/support/server-process.js';
import { pacedHttpLoad } from './lib/paced-load.js';

const arg = (name: string, fallback: number) => {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
};
const KEYS = arg('keys', 1_000_000);
const RATE = arg('rate', 2_000);
const SECS = arg('secs', 20);
const ROUNDS = arg('rounds', 2);
// A week's window (epoch-aligned): no key expires during the run.
const POLICY = { policy_id: 'per-user', scope: { user_id: '*' }, algorithm: { type: 'fixed_window', limit: 1_000_000_000, window: '7d' }, action: 'deny' };

async function writeMillion(file: string): Promise<void> {
  const store = new MemoryCounterStore();
  const decisions = new DecisionService({ policies: new LiveMatcher([makePolicy(POLICY)]), counters: store, keyPrefix: 'rl:' });
  for (let i = 0; i < KEYS; i++) await decisions.check({ user_id: `user-${i}`, quantity: 1 + (i % 7), tags: {} });
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const started = performance.now();
  const written = await writeSnapshot(store.keyspace, file, 'rl:', 0.25);
  loop.disable();
  console.log(
    `snapshot of ${written.keys} keys: ${((performance.now() - started) / 1000).toFixed(2)} s to write (slices of 0.25 ms), ` +
      `${(statSync(file).size / 2 ** 20).toFixed(0)} MiB, longest event-loop stall while writing ${(loop.max / 1e6).toFixed(1)} ms`,
  );
  await store.close();
}

async function measure(dir: string, snapshot: string, label: 'off' | 'on'): Promise<string> {
  const dataDir = join(dir, `data-${label}-${Date.now()}`);
  mkdirSync(dataDir);
  copyFileSync(snapshot, join(dataDir, COUNTER_SNAPSHOT_FILE));
  const startedAt = performance.now();
  const server = await startServerProcess(
    { RL_DATA_DIR: dataDir, RL_POLICY_FILE: join(dir, 'policies.json'), RL_COUNTER_SNAPSHOT_SECS: label === 'on' ? '1' : '3600' },
    { timeoutMs: 180_000 },
  );
  const startMs = performance.now() - startedAt;
  try {
    const bodies = Array.from({ length: 4096 }, (_, i) => JSON.stringify({ user_id: `user-${(i * 7919) % KEYS}`, quantity: 1 }));
    const load = { port: server.port, path: '/rl/v1/check', bodies, rate: RATE, connections: 32 };
    await pacedHttpLoad({ ...load, durationSec: 3 });
    const result = await pacedHttpLoad({ ...load, durationSec: SECS });
    const info = (await (await fetch(`${server.url}/rl/v1/info`)).json()) as { counter_snapshot?: { age_ms: number; keys: number } };
    return (
      `${label.padEnd(4)} p50 ${result.p50_ms.toFixed(2)} ms  p99 ${result.p99_ms.toFixed(2)} ms  max ${result.max_ms.toFixed(1)} ms  ` +
      `${result.throughput_rps.toFixed(0)}/s  non2xx ${result.non2xx}  start-up with restore ${(startMs / 1000).toFixed(1)} s  ` +
      `snapshot ${JSON.stringify(info.counter_snapshot)}`
    );
  } finally {
    await server.kill();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-snapshots-'));
  try {
    writeFileSync(join(dir, 'policies.json'), JSON.stringify({ policies: [POLICY] }));
    const snapshot = join(dir, 'million.snapshot');
    await writeMillion(snapshot);
    for (let round = 1; round <= ROUNDS; round++) {
      for (const label of round % 2 === 1 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
        console.log(`round ${round}: ${await measure(dir, snapshot, label)}`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
