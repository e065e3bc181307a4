import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Processes of the benchmark: children running TypeScript through tsx, pinned to a core with taskset
 * when it exists, and private redis-server processes. Every process started here is recorded and killed
 * by its pid when the benchmark exits, however it exits.
 */

export const BENCH_DIR = fileURLToPath(new URL('../', import.meta.url));
export const REPO_DIR = fileURLToPath(new URL('../../', import.meta.url));

/** Core of servers and in-process measurements; the load generator and Redis get the other one. */
export const SERVER_CORE = 0;
export const LOAD_CORE = 1;

let tasksetAvailable: boolean | undefined;

/** Nothing is pinned from now on (--no-pin). */
export function disablePinning(): void {
  tasksetAvailable = false;
}

export function hasTaskset(): boolean {
  tasksetAvailable ??= spawnSync('taskset', ['-c', '0', 'true'], { stdio: 'ignore' }).status === 0;
  return tasksetAvailable;
}

/** Pins this process (all its threads) to `core`; false when taskset is missing or refused. */
export function pinSelf(core: number): boolean {
  if (!hasTaskset()) return false;
  return spawnSync('taskset', ['-a', '-p', '-c', String(core), String(process.pid)], { stdio: 'ignore' }).status === 0;
}

const live = new Set<ChildProcess>();
let hooked = false;
function track(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
  if (!hooked) {
    hooked = true;
    process.once('exit', killAll);
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => {
        killAll();
        process.exit(130);
      });
    }
  }
}

/** Kills every process this module started that still runs (by pid, one by one). */
export function killAll(): void {
  for (const child of live) {
    try {
      if (child.pid !== undefined) process.kill(child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  live.clear();
}

/**
 * Runs an entry point's `main` (bench/run.ts, bench/profile.ts): an error is printed and sets the exit
 * code; either way every child is killed and the process leaves soon after (autocannon and grpc-js may
 * keep handles open for a moment).
 */
export function runMain(main: () => Promise<void>): void {
  main()
    .catch((error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    })
    .finally(() => {
      killAll();
      setTimeout(() => process.exit(), 100).unref();
    });
}

/**
 * Where children's code comes from: a tsc build of src/ and bench/ (bench/lib/build.ts; what
 * production runs), or, when none is set, the TypeScript sources through tsx.
 */
let buildDir: string | undefined;
export function useBuild(dir: string | undefined): void {
  buildDir = dir;
}

export interface ChildOptions {
  /** Extra node flags (--expose-gc, --cpu-prof, ...). */
  nodeFlags?: string[];
  core?: number;
  env?: NodeJS.ProcessEnv;
}

/**
 * `node [flags] <build>/bench/child/<entry>.js <args>` (or `node [flags] --import tsx
 * bench/child/<entry>.ts <args>` without a build) pinned to `core`, with an IPC channel. The child's
 * stderr is passed through; stdout is ignored (children talk over IPC).
 */
export function spawnChild(entry: string, args: string[], options: ChildOptions = {}): ChildProcess {
  const script = buildDir
    ? [join(buildDir, 'bench', 'child', entry.replace(/\.ts$/, '.js'))]
    : ['--import', 'tsx', join(BENCH_DIR, 'child', entry)];
  const nodeArgs = [...(options.nodeFlags ?? []), ...script, ...args];
  const core = options.core ?? SERVER_CORE;
  const pinned = hasTaskset();
  const command = pinned ? 'taskset' : process.execPath;
  const argv = pinned ? ['-c', String(core), process.execPath, ...nodeArgs] : nodeArgs;
  const child = spawn(command, argv, {
    cwd: REPO_DIR,
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    env: { ...process.env, ...options.env },
  });
  track(child);
  return child;
}

/** The next IPC message of `child` that has `type`, or a rejection when it exits or the time is up. */
export function nextMessage<T = Record<string, unknown>>(child: ChildProcess, type: string, timeoutMs = 120_000): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onMessage = (message: unknown) => {
      const m = message as { type?: string; error?: string };
      if (m?.type === 'error') {
        cleanup();
        reject(new Error(`child failed: ${m.error}`));
      } else if (m?.type === type) {
        cleanup();
        resolve(message as T);
      }
    };
    const onExit = (code: number | null, signal: string | null) => {
      cleanup();
      reject(new Error(`child exited (code ${code}, signal ${signal}) before sending "${type}"`));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`no "${type}" from the child within ${timeoutMs} ms`));
    }, timeoutMs);
    const cleanup = () => {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}

/** Sends `message` and waits for the answer of type `reply`. */
export async function request<T = Record<string, unknown>>(child: ChildProcess, message: Record<string, unknown>, reply: string, timeoutMs?: number): Promise<T> {
  const answer = nextMessage<T>(child, reply, timeoutMs);
  child.send(message);
  return answer;
}

/** Ends a child: asks it to exit (so --cpu-prof profiles are written), kills it after a grace period. */
export async function stopChild(child: ChildProcess, graceMs = 5_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    child.send({ type: 'exit' });
  } catch {
    // channel already closed
  }
  const timer = setTimeout(() => {
    if (child.pid !== undefined && child.exitCode === null) {
      try {
        process.kill(child.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }, graceMs);
  await exited;
  clearTimeout(timer);
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface PrivateRedis {
  port: number;
  addr: string;
  pid: number;
  version: string;
  /** The Unix socket it also listens on (`unixSocket` option). */
  socketPath?: string;
  /** SIGKILL: the port then refuses connections (Redis unreachable). */
  kill(): Promise<void>;
  /** Sends one command with redis-cli and returns its raw output. */
  cli(...args: string[]): string;
}

/**
 * A private redis-server on a free 127.0.0.1 port, no persistence, pinned with the load generator;
 * `unixSocket`: listening on a Unix socket in its temp dir as well.
 */
export async function startPrivateRedis(core = LOAD_CORE, options: { unixSocket?: boolean } = {}): Promise<PrivateRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-redis-'));
  const socketPath = options.unixSocket ? join(dir, 'redis.sock') : undefined;
  const redisArgs = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--loglevel', 'warning'];
  if (socketPath) redisArgs.push('--unixsocket', socketPath, '--unixsocketperm', '700');
  const pinned = hasTaskset();
  const child = spawn(pinned ? 'taskset' : 'redis-server', pinned ? ['-c', String(core), 'redis-server', ...redisArgs] : redisArgs, {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  track(child);
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with code ${child.exitCode}`);
    if (await canConnect(port)) break;
    if (Date.now() > deadline) throw new Error('redis-server did not start within 10 s');
    await sleep(50);
  }
  const cli = (...args: string[]) => {
    const out = spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { encoding: 'utf8' });
    if (out.status !== 0) throw new Error(`redis-cli ${args.join(' ')}: ${out.stderr}`);
    return out.stdout;
  };
  const version = /redis_version:(\S+)/.exec(cli('INFO', 'server'))?.[1] ?? 'unknown';
  return {
    port,
    addr: `redis://127.0.0.1:${port}`,
    pid: child.pid!,
    version,
    socketPath,
    cli,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        process.kill(child.pid!, 'SIGKILL');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Per-command call counts from `INFO commandstats`. */
export function commandStats(redis: PrivateRedis): Map<string, number> {
  const stats = new Map<string, number>();
  for (const line of redis.cli('INFO', 'commandstats').split(/\r?\n/)) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (m) stats.set(m[1], Number(m[2]));
  }
  return stats;
}
