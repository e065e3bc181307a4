/**
 * Two regions on one machine, sharing one global limit (docs/distribution.md, "Try it locally").
 *
 *   npm run example:regions                      # or: npx tsx examples/two-regions.ts [--limit N] [--window W]
 *
 * Starts three redis-servers (the global store and one store per region) and one server per region,
 * all on free ports of 127.0.0.1, loads one `"budget": "global"` policy (`one-limit`: `--limit` requests,
 * default 100, per `--window`, default 1h, for `{"resource": "shared"}`), and prints each region's URL,
 * its dashboard, and a curl loop that shows the two regions together admitting exactly the limit.
 * Ctrl-C (SIGINT) or SIGTERM stops the servers, then the redis-servers, and removes the temporary
 * directory: nothing is left running. Needs `redis-server` on PATH (or REDIS_SERVER_BIN=/path/to/it).
 *
 * The children run in their own process groups, so a Ctrl-C in the terminal reaches this script alone,
 * which stops them in order (servers first: they give their region's unspent units back to the global
 * store while it is still up).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { buildDashboard } from '../dashboard/build.js';

const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url));
const HOST = '127.0.0.1';
const REDIS_SERVER = process.env.REDIS_SERVER_BIN ?? 'redis-server';
const REGIONS = ['eu-west', 'us-east'] as const;
/** How long a child may take to start, and to stop before it is killed. */
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;

interface Child {
  name: string;
  process: ChildProcess;
  log: string;
  exited: Promise<void>;
}

const { values: options } = parseArgs({
  options: {
    limit: { type: 'string', default: '100' },
    window: { type: 'string', default: '1h' },
  },
});
const limit = Number(options.limit);
if (!Number.isSafeInteger(limit) || limit < 1) fail(`--limit: a positive integer, got ${JSON.stringify(options.limit)}`);

const dir = mkdtempSync(join(tmpdir(), 'rl-two-regions-'));
const children: Child[] = [];
let stopping = false;

process.on('SIGINT', () => void stop(0));
process.on('SIGTERM', () => void stop(0));
// Last resort if this script dies some other way: no child outlives it.
process.on('exit', () => {
  for (const c of children) if (c.process.exitCode === null && c.process.signalCode === null) c.process.kill('SIGKILL');
});

try {
  await main();
} catch (error) {
  console.error(`two-regions: ${(error as Error).message}`);
  await stop(1);
}

async function main(): Promise<void> {
  // The servers serve the dashboard from dist/dashboard: build it from the sources at hand (a second or two).
  const [stores] = await Promise.all([Promise.all([startRedis('global'), ...REGIONS.map((region) => startRedis(region))]), buildDashboard()]);
  const [globalStore, ...regionStores] = stores;
  const policyFile = join(dir, 'policies.json');
  writeFileSync(
    policyFile,
    JSON.stringify({
      policies: [
        {
          policy_id: 'one-limit',
          name: 'One limit for both regions',
          scope: { resource: 'shared' },
          budget: 'global',
          algorithm: { type: 'fixed_window', limit, window: options.window },
        },
      ],
    }),
  );
  const regionEnv = (i: number) => ({
    RL_REGION: REGIONS[i],
    RL_COUNTERSTORE_ADDR: regionStores[i],
    RL_GLOBAL_COUNTERSTORE_ADDR: globalStore,
    // Set explicitly, so a server on a shared store seeds it (only while it is empty: the first one does).
    RL_POLICY_FILE: policyFile,
    RL_HTTP_ADDR: `${HOST}:0`,
    RL_GRPC_ADDR: `${HOST}:0`,
    RL_SHUTDOWN_DELAY_SECS: '0',
    // Unused with a shared store, but kept out of the working directory.
    RL_DATA_DIR: join(dir, `data-${REGIONS[i]}`),
  });
  // One after the other: the first seeds the global store, the second finds it seeded.
  const urls: string[] = [];
  for (let i = 0; i < REGIONS.length; i++) urls.push(await startServer(REGIONS[i], regionEnv(i)));

  const body = `'{"resource":"shared","user_id":"demo"}'`;
  const rounds = Math.ceil(limit / 2) + 10;
  console.log(
    [
      '',
      `Two regions share one limit (global store ${globalStore}):`,
      ...REGIONS.map((region, i) => `  ${region.padEnd(8)} HTTP ${urls[i]}  dashboard ${urls[i]}/dashboard/  store ${regionStores[i]}`),
      '',
      `Policy one-limit: budget "global", ${limit} requests per ${options.window} for {"resource":"shared"}, both regions together.`,
      '',
      `Watch the limit hold: ${rounds * 2} checks, alternating between the regions; together they admit ${limit}:`,
      '',
      `  for i in $(seq ${rounds}); do for url in ${urls.join(' ')}; do`,
      `    curl -s -X POST "$url/rl/v1/check" -H 'content-type: application/json' -d ${body}; echo`,
      `  done; done | grep -o '"allowed":[a-z]*' | sort | uniq -c`,
      '',
      `Each answer names its region (metadata.region); the dashboards show the decisions as they happen.`,
      `Processes: ${children.map((c) => `${c.name} ${c.process.pid}`).join(', ')}; logs in ${dir}`,
      'Ctrl-C stops everything.',
      '',
    ].join('\n'),
  );
}

/** A redis-server on a free port, nothing saved to disk; resolves with its URL once it answers PING. */
async function startRedis(name: string): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const child = startChild(`redis-server (${name})`, REDIS_SERVER, ['--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no', '--dir', dir], {});
    try {
      await until(child, () => ping(port));
      return `redis://${HOST}:${port}`;
    } catch (error) {
      // Another process may have taken the port between our look and redis-server's bind: try another.
      if (attempt >= 3 || !readFileSync(child.log, 'utf8').includes('Address already in use')) throw error;
      children.splice(children.indexOf(child), 1);
    }
  }
}

/** One region's server (src/main.ts under tsx); resolves with its HTTP URL from its `listening` log line. */
async function startServer(region: string, env: Record<string, string>): Promise<string> {
  const child = startChild(`rl (${region})`, process.execPath, ['--import', 'tsx', 'src/main.ts'], env);
  let port: number | undefined;
  await until(child, () => {
    port ??= listeningPort(readFileSync(child.log, 'utf8'));
    return Promise.resolve(port !== undefined);
  });
  return `http://${HOST}:${port}`;
}

function listeningPort(log: string): number | undefined {
  for (const line of log.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const entry = JSON.parse(line) as { message?: string; http?: number };
      if (entry.message === 'listening' && typeof entry.http === 'number') return entry.http;
    } catch {
      // a line cut short: the next read has all of it
    }
  }
  return undefined;
}

function startChild(name: string, command: string, args: string[], env: Record<string, string>): Child {
  const log = join(dir, `${name.replace(/[^a-z0-9-]+/g, '-').replace(/-$/, '')}.log`);
  // The child writes its log itself: it goes on while this script waits for anything.
  const fd = openSync(log, 'a');
  const child = spawn(command, args, { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', fd, fd], detached: true });
  closeSync(fd);
  let startError: string | undefined;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', (error) => {
      startError = `could not start ${command}: ${error.message}` + (command === REDIS_SERVER ? ' (install Redis, or set REDIS_SERVER_BIN to its redis-server)' : '');
      appendFileSync(log, `${startError}\n`);
      resolve();
    });
  });
  const entry: Child = { name, process: child, log, exited };
  children.push(entry);
  // A child that stops on its own leaves the recipe broken: stop the rest and say which one.
  void exited.then(() => {
    if (stopping) return;
    if (startError !== undefined) console.error(`two-regions: ${startError}`);
    else console.error(`two-regions: ${name} stopped unexpectedly (exit ${child.exitCode ?? child.signalCode}); last lines of its log:\n${tail(log)}`);
    void stop(1);
  });
  return entry;
}

/** Polls `ready` until it holds; fails if the child exits first or START_TIMEOUT_MS passes. */
async function until(child: Child, ready: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (!(await ready())) {
    if (child.process.exitCode !== null || child.process.signalCode !== null) throw new Error(`${child.name} exited while starting:\n${tail(child.log)}`);
    if (Date.now() > deadline) throw new Error(`${child.name} did not start within ${START_TIMEOUT_MS} ms:\n${tail(child.log)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Stops the servers, then the redis-servers (SIGTERM, SIGKILL after STOP_TIMEOUT_MS), removes the directory, exits. */
async function stop(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  const servers = children.filter((c) => c.name.startsWith('rl '));
  const stores = children.filter((c) => !c.name.startsWith('rl '));
  await Promise.all(servers.map(terminate));
  await Promise.all(stores.map(terminate));
  rmSync(dir, { recursive: true, force: true });
  if (code === 0) console.log('two-regions: stopped, nothing left running.');
  process.exit(code);
}

async function terminate(child: Child): Promise<void> {
  if (child.process.exitCode !== null || child.process.signalCode !== null) return;
  child.process.kill('SIGTERM');
  const timer = setTimeout(() => child.process.kill('SIGKILL'), STOP_TIMEOUT_MS);
  await child.exited;
  clearTimeout(timer);
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** True once a redis-server answers PING on `port`. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, HOST);
    socket.setTimeout(1000);
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => {
      socket.destroy();
      resolve(data.toString().startsWith('+PONG'));
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

function tail(log: string): string {
  try {
    return readFileSync(log, 'utf8').trimEnd().split('\n').slice(-15).join('\n');
  } catch {
    return '(no log)';
  }
}

function fail(message: string): never {
  console.error(`two-regions: ${message}`);
  process.exit(2);
}
