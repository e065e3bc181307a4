import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startServerProcess, type ServerProcessHandle } from './server-process.js';
import { tempDir } from './temp-dir.js';

export interface ServerSuite {
  /** The running process; set once the before hook ran. */
  readonly server: ServerProcessHandle;
  /** Its temporary directory: the data dir is `data/` in it, the policy file (if any) `policies.json`. */
  readonly dir: string;
}

export interface ServerSuiteOptions {
  /** Written to `policies.json` and served as RL_POLICY_FILE; without it the server starts with none. */
  policies?: unknown;
  /** More environment, read when the before hook runs (it wins over the defaults above). */
  env?: () => Record<string, string | undefined>;
}

/**
 * One real server process for the enclosing describe(): started in a before hook in a fresh temporary
 * directory, stopped and the directory removed after the block. Call it before the hooks that use it:
 * mocha runs hooks in the order they were registered.
 */
export function serverProcessSuite(prefix: string, options: ServerSuiteOptions = {}): ServerSuite {
  let server: ServerProcessHandle | undefined;
  const dir = tempDir(prefix, { release: () => server?.stop() });
  before(async () => {
    const env: Record<string, string | undefined> = { RL_DATA_DIR: join(dir.path, 'data') };
    if (options.policies !== undefined) {
      env.RL_POLICY_FILE = join(dir.path, 'policies.json');
      writeFileSync(env.RL_POLICY_FILE, JSON.stringify(options.policies));
    }
    server = await startServerProcess({ ...env, ...options.env?.() });
  });
  return {
    get server() {
      if (server === undefined) throw new Error(`serverProcessSuite(${prefix}): read before its hook ran`);
      return server;
    },
    get dir() {
      return dir.path;
    },
  };
}
