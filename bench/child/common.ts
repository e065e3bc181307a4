import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { setLogLevel } from '../../src/util/log.js';

/**
 * The IPC side every child shares: `{type: 'usage'}` answers with this process's CPU time and memory
 * (so the parent can tell whether the server was the bottleneck), `{type: 'exit'}` exits cleanly (so
 * --cpu-prof writes its profile), `{type: 'profile-start'}` / `{type: 'profile-stop', path}` run V8's CPU
 * profiler (the one behind --cpu-prof) over just the window between them. Failures are reported as
 * `{type: 'error'}` before exiting 1.
 */
/** Garbage collection in this process since the last `usage` answer: pauses explain tail latency. */
const gcStats = { count: 0, total_ms: 0, max_ms: 0, major_count: 0, major_ms: 0 };

export function childMain(main: () => Promise<void>): void {
  setLogLevel('warn');
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gcStats.count++;
      gcStats.total_ms += entry.duration;
      gcStats.max_ms = Math.max(gcStats.max_ms, entry.duration);
      if ((entry as unknown as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
        gcStats.major_count++;
        gcStats.major_ms += entry.duration;
      }
    }
  }).observe({ entryTypes: ['gc'] });
  process.on('message', (message: { type?: string }) => {
    if (message?.type === 'usage') {
      const cpu = process.cpuUsage();
      const memory = process.memoryUsage();
      const hrtime_ms = performance.now();
      const gc = { ...gcStats };
      Object.assign(gcStats, { count: 0, total_ms: 0, max_ms: 0, major_count: 0, major_ms: 0 });
      void (statsSource?.() ?? Promise.resolve(undefined)).then((stats) => send({ type: 'usage', cpu, memory, hrtime_ms, gc, stats }));
    } else if (message?.type === 'profile-start') {
      void startProfile().then(() => send({ type: 'profile-started' }));
    } else if (message?.type === 'profile-stop') {
      void stopProfile((message as { path: string }).path).then(() => send({ type: 'profile-stopped' }));
    } else if (message?.type === 'exit') {
      // Let the IPC channel go, then exit: a clean exit writes --cpu-prof profiles.
      setImmediate(() => process.exit(0));
    }
  });
  process.on('disconnect', () => process.exit(0));
  main().catch((error: unknown) => {
    send({ type: 'error', error: String((error as Error)?.stack ?? error) });
    setTimeout(() => process.exit(1), 100);
  });
}

let statsSource: (() => Promise<Record<string, number>>) | undefined;

/** What the `usage` answer reports besides CPU and memory (the service's own counters, read from its metrics). */
export function reportStats(source: () => Promise<Record<string, number>>): void {
  statsSource = source;
}

export function send(message: Record<string, unknown>): void {
  process.send?.(message);
}

export function argOf(name: string, fallback?: string): string {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0 && i + 1 < process.argv.length) return process.argv[i + 1];
  if (fallback !== undefined) return fallback;
  throw new Error(`missing --${name}`);
}

let session: Session | undefined;

function post(method: string, params?: object): Promise<unknown> {
  return new Promise((resolve, reject) => session!.post(method, params ?? {}, (error, result) => (error ? reject(error) : resolve(result))));
}

/** Starts V8's sampling CPU profiler (the one behind --cpu-prof) in this process, sampling every 200 µs. */
export async function startProfile(): Promise<void> {
  session ??= new Session();
  session.connect();
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 200 });
  await post('Profiler.start');
}

/** Stops the profiler and writes the .cpuprofile (the same format --cpu-prof writes). */
export async function stopProfile(path: string): Promise<void> {
  const { profile } = (await post('Profiler.stop')) as { profile: unknown };
  writeFileSync(path, JSON.stringify(profile));
  await post('Profiler.disable');
  session!.disconnect();
}
