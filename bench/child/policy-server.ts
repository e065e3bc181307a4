import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { loadServerConfig } from '../../src/config.js';
import { startServer } from '../../src/server.js';
import { argOf, childMain, reportStats, send } from './common.js';

/**
 * The real server (src/server.ts: file policy store, memory counters, policy routes) on a data directory
 * and policy file the parent prepared, for the policy-changes scenario (bench/policy-changes.ts).
 * Answers `{type: 'ready', port, startup_ms, startup_cpu_ms, since_process_start_ms}` (CPU time: every thread); the `usage` answer's stats carry
 * this process's event-loop delay since the previous one (what a change costs everyone waiting).
 * `{type: 'drain'}` shuts it down cleanly (the data directory lock is released), then `{type: 'drained'}`.
 */
childMain(async () => {
  const config = loadServerConfig({
    RL_DATA_DIR: argOf('data-dir'),
    RL_POLICY_FILE: argOf('policy-file'),
    RL_HTTP_ADDR: '127.0.0.1:0',
    RL_GRPC_ADDR: '127.0.0.1:0',
    RL_SHUTDOWN_DELAY_SECS: '0',
    RL_DRAIN_SECS: '1',
  });
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  reportStats(async () => {
    const stats = { loop_delay_p99_ms: loop.percentile(99) / 1e6, loop_delay_max_ms: loop.max / 1e6 };
    loop.reset();
    return stats;
  });
  const started = performance.now();
  const cpu = process.cpuUsage();
  const server = await startServer(config);
  const used = process.cpuUsage(cpu);
  process.on('message', (message: { type?: string }) => {
    if (message?.type === 'drain') void server.drain().then(() => send({ type: 'drained' }));
  });
  send({ type: 'ready', port: server.httpPort, startup_ms: performance.now() - started, startup_cpu_ms: (used.user + used.system) / 1000, since_process_start_ms: performance.now() });
});
