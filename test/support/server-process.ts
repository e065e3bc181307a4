/**
 * The real server as a child process (`node --import tsx src/main.ts`), for end-to-end tests that need
 * signals, restarts or several nodes. The HTTP port is learnt from the start-up log line
 * `{"message":"listening","http":PORT,...}` on stderr (RL_HTTP_ADDR defaults to 127.0.0.1:0 here, and
 * RL_GRPC_ADDR to 127.0.0.1:0, so parallel processes never collide).
 *
 * Every child is SIGKILLed when the test process exits, whatever happens.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { onLogLines } from './log-lines.js';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ServerProcessHandle {
  pid: number;
  /** The HTTP port from the `listening` log line (field `portField`, default `http`). */
  port: number;
  /** `http://127.0.0.1:PORT` */
  url: string;
  /** Every log line parsed so far (non-JSON lines as `{message: line}`). */
  logs(): Record<string, unknown>[];
  /** Everything written to stderr so far. */
  stderr(): string;
  /** Sends `signal` (default SIGTERM) and resolves when the process has exited (SIGKILL after `timeoutMs`). */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<ExitInfo>;
  /** SIGKILL, resolved once the process is gone. */
  kill(): Promise<ExitInfo>;
  /** Resolves when the process exits, for whatever reason. */
  exited: Promise<ExitInfo>;
}

export interface StartOptions {
  /** How long to wait for the `listening` line (default 20 s). */
  timeoutMs?: number;
  /** Working directory (default the repository root). */
  cwd?: string;
  /** The entry point relative to the repository root (default `src/main.ts`). */
  entry?: string;
  /** The field of the `listening` log line that holds the HTTP port (default `http`). */
  portField?: string;
}

/** Whether a process with this pid exists (signal 0 checks without sending anything). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
});

/** Starts the server with `env` added to this process's environment; resolves once it listens. */
export async function startServerProcess(env: Record<string, string | undefined> = {}, options: StartOptions = {}): Promise<ServerProcessHandle> {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const child = spawn(process.execPath, ['--import', 'tsx', options.entry ?? 'src/main.ts'], {
    cwd: options.cwd ?? REPO_ROOT,
    // No shutdown delay unless a test asks for one: most tests stop servers and want them gone at once.
    env: { ...process.env, RL_HTTP_ADDR: '127.0.0.1:0', RL_GRPC_ADDR: '127.0.0.1:0', RL_SHUTDOWN_DELAY_SECS: '0', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  live.add(child);
  let stderr = '';
  const logs: Record<string, unknown>[] = [];
  const exited = new Promise<ExitInfo>((resolve) => {
    child.once('exit', (code, signal) => {
      live.delete(child);
      resolve({ code, signal });
    });
  });
  const listening = new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not log "listening" within ${timeoutMs} ms\n${tail(stderr)}`)), timeoutMs);
    onLogLines(child.stderr!, (line, json) => {
      const entry = json ?? { message: line };
      logs.push(entry);
      const port = entry[options.portField ?? 'http'];
      if (entry.message === 'listening' && typeof port === 'number') {
        clearTimeout(timer);
        resolve(port);
      }
    });
    child.stderr!.on('data', (chunk: string) => (stderr += chunk));
    void exited.then((info) => {
      clearTimeout(timer);
      reject(new Error(`server exited before listening (code ${info.code}, signal ${info.signal})\n${tail(stderr)}`));
    });
  });
  let port: number;
  try {
    port = await listening;
  } catch (error) {
    child.kill('SIGKILL');
    await exited;
    throw error;
  }
  const stop = async (signal: NodeJS.Signals = 'SIGTERM', stopTimeoutMs = 15_000): Promise<ExitInfo> => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), stopTimeoutMs);
    const info = await exited;
    clearTimeout(timer);
    return info;
  };
  return {
    pid: child.pid!,
    port,
    url: `http://127.0.0.1:${port}`,
    logs: () => [...logs],
    stderr: () => stderr,
    stop,
    kill: () => stop('SIGKILL'),
    exited,
  };
}

function tail(text: string, lines = 30): string {
  return text.split('\n').slice(-lines).join('\n');
}

export interface RegionNode {
  region: string;
  /** The region's own counter store and the global one (or a link proxy in front of it). */
  counters: string;
  global: string;
  prefix: string;
  policyFile: string;
  dataDir: string;
}

/**
 * The environment of one region's server in the multi-region tests. A loaded machine: deadlines far
 * above any round trip, so the failure mode never answers and a test sees the lease logic alone.
 */
export function regionNodeEnv(node: RegionNode): Record<string, string> {
  return {
    RL_REGION: node.region,
    RL_COUNTERSTORE_ADDR: node.counters,
    RL_GLOBAL_COUNTERSTORE_ADDR: node.global,
    RL_KEY_PREFIX: node.prefix,
    RL_POLICY_FILE: node.policyFile,
    RL_DATA_DIR: node.dataDir,
    RL_COUNTERSTORE_TIMEOUT_MS: '3000',
    RL_GLOBAL_COUNTERSTORE_TIMEOUT_MS: '5000',
    RL_LEASE_MAX_WAIT_MS: '10000',
  };
}
