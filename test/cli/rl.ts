/**
 * Runs the REAL `rl` binary: `dist/cli/main.js`, built once per test process the way `npm run build`
 * builds it (the SDK workspace, then the server and CLI with tsconfig.build.json, then the postbuild
 * chmod), and spawned directly as an executable, so the shebang and the exec bit are exercised too.
 *
 * `RL_CLI_FROM_SOURCE=1` runs `node --import tsx src/cli/main.ts` instead (a quicker loop while
 * editing the CLI; the suite itself always runs the built binary).
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT, startServerProcess, type ServerProcessHandle } from '../support/server-process.js';

const run = promisify(execFile);

export const RL_BINARY = join(REPO_ROOT, 'dist/cli/main.js');
const fromSource = process.env.RL_CLI_FROM_SOURCE === '1';

let built: Promise<void> | undefined;

/** Builds the CLI once (about 20-40 s on a busy machine); later calls share the same build. */
export function buildCli(): Promise<void> {
  if (fromSource) return Promise.resolve();
  built ??= (async () => {
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    await run(npm, ['run', 'build', '-w', 'sdk'], { cwd: REPO_ROOT });
    await run(process.execPath, [join(REPO_ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: REPO_ROOT });
    await run(npm, ['run', 'postbuild'], { cwd: REPO_ROOT });
  })();
  return built;
}

export interface RlResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * `rl ...args` with a clean environment: only PATH and HOME are inherited (no RL_* of the developer's
 * shell), plus `env`. Resolves when the process exits, whatever its status.
 */
export function rl(args: string[], env: Record<string, string> = {}): Promise<RlResult> {
  return spawnRl(args, env).closed;
}

/** A running `rl` (also for commands that run until stopped, such as `top`), with the same clean environment. */
export function spawnRl(args: string[], env: Record<string, string> = {}) {
  const [command, argv] = fromSource ? [process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'src/cli/main.ts'), ...args]] : [RL_BINARY, args];
  const child = spawn(command, argv, { cwd: REPO_ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  const waiters: (() => void)[] = [];
  child.stdout!.setEncoding('utf8').on('data', (c: string) => {
    stdout += c;
    for (const w of [...waiters]) w();
  });
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const closed = new Promise<RlResult>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
  /** Resolves once stdout satisfies `ready`; rejects if the process ends first. */
  const waitForStdout = (ready: (stdout: string) => boolean): Promise<void> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        if (!ready(stdout)) return;
        waiters.splice(waiters.indexOf(check), 1);
        resolve();
      };
      waiters.push(check);
      check();
      void closed.then((r) => reject(new Error(`rl ${args.join(' ')} exited (${r.code}) first\nstdout: ${r.stdout}\nstderr: ${r.stderr}`)));
    });
  return { child, closed, waitForStdout };
}

/** `rl ... --json` and the parsed stdout; fails the test with stderr when stdout is not JSON. */
export async function rlJson<T = unknown>(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; body: T; stderr: string }> {
  const result = await rl([...args, '--json'], env);
  try {
    return { code: result.code, body: JSON.parse(result.stdout) as T, stderr: result.stderr };
  } catch {
    throw new Error(`rl ${args.join(' ')} --json printed no JSON (exit ${result.code})\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
  }
}

const tempDirs: string[] = [];

/** A fresh temp directory with `files` (name → content) written into it; removed by removeTempDirs(). */
export function policyDir(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'rl-cli-'));
  tempDirs.push(dir);
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  return dir;
}

export function removeTempDirs(): void {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

export interface CliServer {
  /** The running server; set once the before hook ran. */
  readonly server: ServerProcessHandle;
}

/**
 * The built CLI and one real server for the enclosing describe(): its policy file holds `seed` (a
 * policy file's text), its data dir is fresh, `env` is added to its environment. The server is stopped
 * and every policyDir() removed after the block.
 */
export function cliServerSuite(seed: string, env: Record<string, string> = {}): CliServer {
  let server: ServerProcessHandle | undefined;
  before(async () => {
    await buildCli();
    // Made here, not when the file loads: another file's after() removes the temp dirs made before it.
    const dataDir = policyDir({});
    const seedFile = join(policyDir({ 'seed.json': seed }), 'seed.json');
    server = await startServerProcess({ RL_DATA_DIR: dataDir, RL_POLICY_FILE: seedFile, ...env });
  });
  after(async () => {
    await server?.stop();
    removeTempDirs();
  });
  return {
    get server() {
      if (server === undefined) throw new Error('cliServerSuite: server read before its hook ran');
      return server;
    },
  };
}
