/**
 * Real Redis for tests (README, "Set-up": how the suite finds Redis): never a mock.
 *
 * - `startRedis()`: `REDIS_URL` when set; else Testcontainers when a Docker engine may be there (the
 *   image of docker-compose.yml, or `REDIS_IMAGE`); else, and after ANY Testcontainers failure (no
 *   engine answering, pull refused, no registry, Ryuk unavailable, the container not starting), a
 *   private `redis-server` process on a free port, with one line on stderr saying why.
 *   What CI has: the binary, no Docker engine.
 * - `startPrivateRedis()`: always its own process, so fault tests can stop and restart it (same port);
 *   `{ unixSocket: true }` makes it listen on a Unix socket in its temp dir as well.
 * - `startRedisCluster()`: three masters (`--cluster-enabled yes`) joined by `redis-cli --cluster create`.
 * - `startRedisFailoverCluster()`: three masters and three replicas, short node timeout, nodes crashable.
 * - `startRedisSentinel()`: one master and one sentinel monitoring it.
 * - `startRedisSentinelFailover()`: a master, its replica and three sentinels (quorum 2); the master
 *   crashable, so the sentinels promote the replica.
 * - `startPrivateRedisWithReplica()`: a primary and one replica (`--replicaof`), the replica freezable.
 *
 * Every process runs with `--save "" --appendonly no` in its own temp dir, is killed by `stop()` and,
 * whatever happens, when the test process exits (no orphans). Tests isolate themselves with
 * `randomPrefix()` key prefixes: nothing here ever runs FLUSHALL.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { createConnection, createServer, type AddressInfo } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { parse as parseYaml } from 'yaml';
import { setLogLevel } from '../../src/util/log.js';

export interface RedisHandle {
  url: string;
  host: string;
  port: number;
  /** The Unix socket it also listens on (startPrivateRedis with `unixSocket`). */
  socketPath?: string;
  stop(): Promise<void>;
  restart(): Promise<void>;
}

export interface RedisClusterHandle {
  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,…` (every node, so any survivor can seed the client) */
  addr: string;
  nodes: { host: string; port: number }[];
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  /** Replicas per master (default 0: three masters only). */
  replicasPerMaster?: 0 | 1;
  /** `cluster-node-timeout`, ms (default 5000): how long a silent node takes to be declared failed. */
  nodeTimeoutMs?: number;
  /**
   * `cluster-require-full-coverage` (default true). false: while a master is down the others keep
   * serving their own slots (with true every node answers CLUSTERDOWN until the failover is done).
   */
  requireFullCoverage?: boolean;
}

/** A cluster with replicas, whose nodes a failover test can crash. */
export interface RedisFailoverClusterHandle extends RedisClusterHandle {
  /** The node currently serving `slot` as master, asked of any live node. */
  masterOf(slot: number): Promise<{ host: string; port: number }>;
  /** SIGKILL: the node dies at once, as in a crash (no shutdown, no last words to its replica). */
  crash(port: number): Promise<void>;
  /** The port of the replica of the master on `port`. */
  replicaOf(port: number): Promise<number>;
  /** SIGSTOP / SIGCONT: the node stops reading and answering (a lagging replica), then carries on. */
  freeze(port: number): void;
  thaw(port: number): void;
}

export interface RedisSentinelHandle {
  /** `redis+sentinel://127.0.0.1:<p1>[,127.0.0.1:<p2>…]/<master name>` */
  addr: string;
  stop(): Promise<void>;
}

/** A master with one replica under three sentinels, for failover tests. */
export interface RedisSentinelFailoverHandle extends RedisSentinelHandle {
  masterPort: number;
  replicaPort: number;
  /** The master as the sentinels name it now (asked of any live sentinel). */
  currentMasterPort(): Promise<number>;
  /** SIGKILL the master: it dies at once, as in a crash. */
  crashMaster(): Promise<void>;
}

const HOST = '127.0.0.1';
const READY_TIMEOUT_MS = 10_000;
const CLUSTER_TIMEOUT_MS = 30_000;
const REDIS_SERVER = process.env.REDIS_SERVER_BIN ?? 'redis-server';
const REDIS_CLI = process.env.REDIS_CLI_BIN ?? 'redis-cli';

/** A per-test key prefix such as `t:3f9c1a2b7d0e4c55:`; tests isolate by prefix, never by FLUSHALL. */
export function randomPrefix(): string {
  return `t:${randomBytes(8).toString('hex')}:`;
}

// ---------------------------------------------------------------------------------------------------
// startRedis: REDIS_URL, else Testcontainers, else a private process
// ---------------------------------------------------------------------------------------------------

export interface StartRedisOptions {
  /** Where the one line about a Testcontainers failure goes (default: stderr). */
  log?: (line: string) => void;
  /** Bound on the whole Testcontainers attempt, engine probe to ready (default 120 s: a first pull). */
  containerTimeoutMs?: number;
}

export async function startRedis(options: StartRedisOptions = {}): Promise<RedisHandle> {
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv) return externalRedis(fromEnv);
  if (dockerMayBePresent()) {
    const image = containerRedisImage();
    try {
      return await startContainerRedis(image, options.containerTimeoutMs ?? 120_000);
    } catch (err) {
      const why = String((err as Error)?.message ?? err).split('\n')[0];
      (options.log ?? ((line) => process.stderr.write(`${line}\n`)))(
        `test/support/redis: Testcontainers could not run ${image} (${why}); using a private redis-server instead`,
      );
    }
  }
  return startPrivateRedis();
}

/** The Redis image of docker-compose.yml: the one tag compose and the tests run. */
export function composeRedisImage(): string {
  const compose = parseYaml(readFileSync(new URL('../../docker-compose.yml', import.meta.url), 'utf8')) as {
    services?: { redis?: { image?: unknown } };
  };
  const image = compose.services?.redis?.image;
  if (typeof image !== 'string') throw new Error('docker-compose.yml: services.redis.image is missing');
  return image;
}

/** The image Testcontainers runs: `REDIS_IMAGE`, else compose's. */
export function containerRedisImage(): string {
  return process.env.REDIS_IMAGE || composeRedisImage();
}

function externalRedis(url: string): RedisHandle {
  const parsed = new URL(url);
  const port = parsed.port ? Number(parsed.port) : 6379;
  const host = parsed.hostname || HOST;
  return {
    url,
    host,
    port,
    // Not ours to stop: tests isolate by prefix, so a shared server needs no cleanup.
    stop: async () => {},
    restart: async () => {
      throw new Error('restart() is not possible on the Redis given by REDIS_URL; use startPrivateRedis()');
    },
  };
}

/** Looks for a Docker engine cheaply first, so machines without one pay nothing (not even the import). */
function dockerMayBePresent(): boolean {
  if (process.env.DOCKER_HOST || process.env.TESTCONTAINERS_HOST_OVERRIDE) return true;
  const candidates = [
    '/var/run/docker.sock',
    join(homedir(), '.docker', 'run', 'docker.sock'),
    join(homedir(), '.docker', 'desktop', 'docker.sock'),
    join(homedir(), '.testcontainers.properties'),
    process.env.XDG_RUNTIME_DIR ? join(process.env.XDG_RUNTIME_DIR, 'docker.sock') : '',
    process.env.XDG_RUNTIME_DIR ? join(process.env.XDG_RUNTIME_DIR, 'podman', 'podman.sock') : '',
  ];
  return candidates.some((p) => p !== '' && existsSync(p));
}

/** A Redis container; rejects (never hangs past `timeoutMs`) on any failure, leaving nothing running. */
async function startContainerRedis(image: string, timeoutMs: number): Promise<RedisHandle> {
  const tc = await import('testcontainers');
  await withTimeout(tc.getContainerRuntimeClient(), 5_000, 'Docker engine probe');
  const starting = new tc.GenericContainer(image)
    .withCommand(['redis-server', '--save', '', '--appendonly', 'no'])
    .withExposedPorts(6379)
    .withWaitStrategy(tc.Wait.forLogMessage('Ready to accept connections'))
    .start();
  let container: Awaited<typeof starting>;
  try {
    container = await withTimeout(starting, timeoutMs, `starting ${image}`);
  } catch (err) {
    // A start that completes after we gave up must not leave a container behind.
    starting.then((late) => late.stop(), () => {});
    throw err;
  }
  const handle: RedisHandle = {
    url: '',
    host: '',
    port: 0,
    stop: async () => {
      await container.stop();
    },
    restart: async () => {
      // A container restart may map a different host port; the handle is updated in place.
      await container.restart();
      refresh();
      await waitForPing(handle.host, handle.port, READY_TIMEOUT_MS, () => `container ${image}`);
    },
  };
  const refresh = () => {
    handle.host = container.getHost();
    handle.port = container.getMappedPort(6379);
    handle.url = `redis://${handle.host}:${handle.port}`;
  };
  refresh();
  try {
    await waitForPing(handle.host, handle.port, READY_TIMEOUT_MS, () => `container ${image}`);
  } catch (err) {
    await container.stop().catch(() => {});
    throw err;
  }
  return handle;
}

// ---------------------------------------------------------------------------------------------------
// Private redis-server processes
// ---------------------------------------------------------------------------------------------------

/** A redis-server process we own: its port, temp dir and output log, restartable on the same port. */
class ServerProcess {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();

  constructor(
    readonly name: string,
    readonly port: number,
    readonly dir: string,
    /** Arguments after the config file/port; the common safety flags are added here. */
    private readonly args: string[],
    private readonly configFile?: string,
  ) {}

  get logPath(): string {
    return join(this.dir, 'server.log');
  }

  async start(): Promise<void> {
    if (this.child) return;
    mkdirSync(this.dir, { recursive: true });
    tempDirs.add(this.dir);
    const args = [
      ...(this.configFile ? [this.configFile] : []),
      '--port', String(this.port),
      '--bind', HOST,
      '--save', '',
      '--appendonly', 'no',
      '--dir', this.dir,
      '--daemonize', 'no',
      ...this.args,
    ];
    const out = openSync(this.logPath, 'a');
    let child: ChildProcess;
    try {
      child = spawn(REDIS_SERVER, args, { stdio: ['ignore', out, out], detached: false });
    } finally {
      closeSync(out);
    }
    this.child = child;
    const pid = child.pid;
    if (pid !== undefined) livePids.add(pid);
    let exitInfo: string | undefined;
    this.exited = new Promise<void>((resolve) => {
      const done = (info: string) => {
        exitInfo = info;
        if (pid !== undefined) livePids.delete(pid);
        if (this.child === child) this.child = undefined;
        resolve();
      };
      child.once('error', (err) => done(`could not be started: ${err.message}`));
      child.once('exit', (code, signal) => done(`exited (code ${code}, signal ${signal})`));
    });
    child.unref();
    try {
      await waitForPing(HOST, this.port, READY_TIMEOUT_MS, () => {
        return `${this.name} (${REDIS_SERVER} on port ${this.port})` + (exitInfo ? ` ${exitInfo}` : '');
      }, () => exitInfo !== undefined, () => this.logTail());
    } catch (err) {
      await this.kill();
      throw err;
    }
  }

  /** SIGTERM (no persistence, so shutdown is immediate), SIGKILL if it lingers; resolves once gone. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child) return;
    // Keep the event loop alive until the exit is observed (the child is unref'd while it runs).
    child.ref();
    child.kill('SIGTERM');
    child.kill('SIGCONT'); // a frozen (SIGSTOP) server acts on SIGTERM only once continued
    const timer = setTimeout(() => child.kill('SIGKILL'), 2_000);
    await this.exited;
    clearTimeout(timer);
  }

  /** SIGKILL at once, as in a crash; resolves once gone. */
  async crash(): Promise<void> {
    const child = this.child;
    if (!child) return;
    child.ref();
    child.kill('SIGKILL');
    await this.exited;
  }

  signal(signal: 'SIGSTOP' | 'SIGCONT'): void {
    this.child?.kill(signal);
  }

  async restart(): Promise<void> {
    await this.kill();
    // The port was ours a moment ago; redis-server binds with SO_REUSEADDR. Retry briefly in case the
    // old socket is still being torn down.
    let lastError: unknown;
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        await this.start();
        return;
      } catch (err) {
        lastError = err;
        await sleep(200);
      }
    }
    throw lastError;
  }

  async destroy(): Promise<void> {
    await this.kill();
    removeDir(this.dir);
  }

  logTail(): string {
    try {
      const text = readFileSync(this.logPath, 'utf8');
      return text.split('\n').slice(-15).join('\n');
    } catch {
      return '(no log)';
    }
  }
}

/** Always its own redis-server process; `restart()` keeps the port (and loses the data). */
export async function startPrivateRedis(options: { unixSocket?: boolean } = {}): Promise<RedisHandle> {
  // The socket lives in the server's own temp dir (a short path: sun_path holds 107 bytes).
  const socketIn = (dir: string) => join(dir, 'redis.sock');
  const server = await startServer('redis', (dir) => (options.unixSocket ? ['--unixsocket', socketIn(dir), '--unixsocketperm', '700'] : []));
  return {
    url: `redis://${HOST}:${server.port}`,
    host: HOST,
    port: server.port,
    ...(options.unixSocket ? { socketPath: socketIn(server.dir) } : {}),
    stop: () => server.destroy(),
    restart: () => server.restart(),
  };
}

/** A private Redis for fault tests, with an admin client that keeps reconnecting while the server is down. */
export interface RedisWithAdmin {
  redis: RedisHandle;
  admin: Redis;
}

/**
 * A private Redis with its admin client for the enclosing describe(), started before it and stopped after
 * (logging silenced meanwhile: the fault tests make the store log on purpose).
 */
export function privateRedisWithAdmin(): RedisWithAdmin {
  const handles: Partial<RedisWithAdmin> = {};
  before(async () => {
    setLogLevel('silent');
    handles.redis = await startPrivateRedis();
    handles.admin = new Redis({ host: handles.redis.host, port: handles.redis.port, maxRetriesPerRequest: null, retryStrategy: () => 50 });
    handles.admin.on('error', () => {}); // the fault tests stop this server on purpose
  });
  after(async () => {
    handles.admin?.disconnect();
    await handles.redis?.stop();
    setLogLevel('info');
  });
  return handles as RedisWithAdmin;
}

/** A private primary with one replica (`--replicaof`), whose replica a test can freeze (SIGSTOP) and thaw. */
export interface RedisWithReplicaHandle {
  primary: RedisHandle;
  replicaPort: number;
  freezeReplica(): void;
  thawReplica(): void;
  stop(): Promise<void>;
}

export async function startPrivateRedisWithReplica(): Promise<RedisWithReplicaHandle> {
  const primary = await startServer('primary', []);
  let replica: ServerProcess | undefined;
  const stop = async () => {
    await Promise.all([replica?.destroy(), primary.destroy()]);
  };
  try {
    replica = await startServer('replica', ['--replicaof', HOST, String(primary.port)]);
    const replicaPort = replica.port;
    await waitUntil(READY_TIMEOUT_MS, 'the replica to sync with its primary', async () => {
      const info = String(await command(HOST, replicaPort, ['INFO', 'replication']).catch(() => ''));
      return info.includes('master_link_status:up');
    });
    const frozen = replica;
    return {
      primary: {
        url: `redis://${HOST}:${primary.port}`,
        host: HOST,
        port: primary.port,
        stop,
        restart: () => primary.restart(),
      },
      replicaPort,
      freezeReplica: () => frozen.signal('SIGSTOP'),
      thawReplica: () => frozen.signal('SIGCONT'),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Starts a server on a fresh free port, retrying with another port if the one we got was taken. */
async function startServer(
  name: string,
  args: string[] | ((dir: string) => string[]),
  configFor?: (port: number, dir: string) => string,
): Promise<ServerProcess> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const dir = makeTempDir(name);
    const configFile = configFor?.(port, dir);
    const server = new ServerProcess(name, port, dir, typeof args === 'function' ? args(dir) : args, configFile);
    try {
      await server.start();
      return server;
    } catch (err) {
      lastError = err;
      await server.destroy();
    }
  }
  throw lastError;
}

// ---------------------------------------------------------------------------------------------------
// Cluster: three masters, optionally each with one replica
// ---------------------------------------------------------------------------------------------------

/** Three masters (what the cluster suites use), each freezable. */
export function startRedisCluster(): Promise<RedisFailoverClusterHandle> {
  return startCluster({});
}

/**
 * Three masters and three replicas (one each) with a short node timeout, for failover tests: crash a
 * master and its replica is promoted once the others have declared it failed (about the node timeout).
 * Full coverage is not required (as docs/deployment.md advises), so the other masters serve meanwhile.
 */
export function startRedisFailoverCluster(nodeTimeoutMs = 2000): Promise<RedisFailoverClusterHandle> {
  return startCluster({ replicasPerMaster: 1, nodeTimeoutMs, requireFullCoverage: false });
}

async function startCluster(options: RedisClusterOptions): Promise<RedisFailoverClusterHandle> {
  const replicas = options.replicasPerMaster ?? 0;
  const nodeCount = 3 * (1 + replicas);
  const servers: ServerProcess[] = [];
  const stop = async () => {
    await Promise.all(servers.map((s) => s.destroy()));
  };
  try {
    for (let i = 0; i < nodeCount; i++) {
      // The cluster bus port is chosen explicitly (Redis 7 `cluster-port`) rather than port + 10000,
      // which might be taken or beyond 65535.
      const busPort = await freePort();
      servers.push(
        await startServer(`cluster-node-${i}`, [
          '--cluster-enabled', 'yes',
          '--cluster-port', String(busPort),
          '--cluster-config-file', 'nodes.conf',
          '--cluster-node-timeout', String(options.nodeTimeoutMs ?? 5000),
          '--cluster-require-full-coverage', options.requireFullCoverage === false ? 'no' : 'yes',
        ]),
      );
    }
    const addrs = servers.map((s) => `${HOST}:${s.port}`);
    // All nodes share one host, which redis-cli only warns about; --cluster-yes accepts its layout.
    await run(REDIS_CLI, ['--cluster', 'create', ...addrs, '--cluster-replicas', String(replicas), '--cluster-yes'], CLUSTER_TIMEOUT_MS);
    await waitUntil(CLUSTER_TIMEOUT_MS, `cluster_state:ok on all ${nodeCount} nodes, every replica in sync`, async () => {
      for (const s of servers) {
        const info = await command(HOST, s.port, ['CLUSTER', 'INFO']).catch(() => '');
        if (typeof info !== 'string' || !info.includes('cluster_state:ok') || !info.includes(`cluster_known_nodes:${nodeCount}`)) {
          return false;
        }
        if (replicas > 0) {
          // A replica must be in sync, or its master's crash would leave the slots without a copy.
          const repl = String(await command(HOST, s.port, ['INFO', 'replication']).catch(() => ''));
          if (repl.includes('role:slave') ? !repl.includes('master_link_status:up') : !repl.includes(`connected_slaves:${replicas}`)) {
            return false;
          }
        }
      }
      return true;
    });
    const nodeOn = (port: number) => {
      const server = servers.find((s) => s.port === port);
      if (!server) throw new Error(`port ${port} is not a node of this cluster`);
      return server;
    };
    return {
      addr: `redis+cluster://${addrs.join(',')}`,
      nodes: servers.map((s) => ({ host: HOST, port: s.port })),
      stop,
      masterOf: async (slot) => {
        for (const s of servers) {
          const reply = await command(HOST, s.port, ['CLUSTER', 'SLOTS']).catch(() => undefined);
          if (!Array.isArray(reply)) continue;
          for (const range of reply as unknown as [number, number, [string, number]][]) {
            if (slot >= range[0] && slot <= range[1]) return { host: range[2][0], port: Number(range[2][1]) };
          }
        }
        throw new Error(`no live cluster node knows who serves slot ${slot}`);
      },
      crash: (port) => nodeOn(port).crash(),
      replicaOf: async (port) => {
        for (const s of servers) {
          const info = String(await command(HOST, s.port, ['INFO', 'replication']).catch(() => ''));
          if (info.includes('role:slave') && info.includes(`master_port:${port}\r\n`)) return s.port;
        }
        throw new Error(`no replica of ${port} found`);
      },
      freeze: (port) => nodeOn(port).signal('SIGSTOP'),
      thaw: (port) => nodeOn(port).signal('SIGCONT'),
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------------
// Sentinel: a master, optionally a replica, and one or three sentinels
// ---------------------------------------------------------------------------------------------------

/** One master and one sentinel (what the address and connection suites use). */
export async function startRedisSentinel(): Promise<RedisSentinelHandle> {
  const { addr, stop } = await startSentinelGroup({ replica: false, sentinels: 1, downAfterMs: 5000 });
  return { addr, stop };
}

/**
 * A master, its replica and three sentinels (quorum 2) that declare a silent master down after 1 s:
 * crash the master and the sentinels promote the replica.
 */
export function startRedisSentinelFailover(): Promise<RedisSentinelFailoverHandle> {
  return startSentinelGroup({ replica: true, sentinels: 3, downAfterMs: 1000 });
}

async function startSentinelGroup(options: { replica: boolean; sentinels: 1 | 3; downAfterMs: number }): Promise<RedisSentinelFailoverHandle> {
  const name = `rl${randomBytes(4).toString('hex')}`;
  const servers: ServerProcess[] = [];
  const sentinels: ServerProcess[] = [];
  const stop = async () => {
    // Sentinels first, so they do not react to the master going away.
    for (const s of [...sentinels, ...servers]) await s.destroy();
  };
  try {
    const master = await startServer('sentinel-master', []);
    servers.push(master);
    let replicaPort = 0;
    if (options.replica) {
      const replica = await startServer('sentinel-replica', ['--replicaof', HOST, String(master.port)]);
      servers.push(replica);
      replicaPort = replica.port;
      await waitUntil(READY_TIMEOUT_MS, 'the replica to sync with its master', async () => {
        const info = String(await command(HOST, replicaPort, ['INFO', 'replication']).catch(() => ''));
        return info.includes('master_link_status:up');
      });
    }
    const quorum = Math.floor(options.sentinels / 2) + 1;
    for (let i = 0; i < options.sentinels; i++) {
      // Sentinel rewrites its config file, so it lives in the sentinel's own temp dir.
      const sentinel = await startServer(`sentinel-${i}`, ['--sentinel'], (port, dir) => {
        const file = join(dir, 'sentinel.conf');
        writeFileSync(
          file,
          [
            `port ${port}`,
            `bind ${HOST}`,
            `dir ${dir}`,
            `sentinel monitor ${name} ${HOST} ${master.port} ${quorum}`,
            `sentinel down-after-milliseconds ${name} ${options.downAfterMs}`,
            `sentinel failover-timeout ${name} 10000`,
            `sentinel parallel-syncs ${name} 1`,
            '',
          ].join('\n'),
        );
        return file;
      });
      sentinels.push(sentinel);
    }
    const askSentinels = async (): Promise<number | undefined> => {
      for (const s of sentinels) {
        const reply = await command(HOST, s.port, ['SENTINEL', 'get-master-addr-by-name', name]).catch(() => null);
        if (Array.isArray(reply)) return Number(reply[1]);
      }
      return undefined;
    };
    await waitUntil(READY_TIMEOUT_MS, `every sentinel to know master ${name}, its replica and the other sentinels`, async () => {
      for (const s of sentinels) {
        const reply = await command(HOST, s.port, ['SENTINEL', 'master', name]).catch(() => null);
        if (!Array.isArray(reply)) return false;
        const fields = new Map<string, string>();
        for (let i = 0; i + 1 < reply.length; i += 2) fields.set(String(reply[i]), String(reply[i + 1]));
        if (fields.get('port') !== String(master.port)) return false;
        if (Number(fields.get('num-slaves')) < (options.replica ? 1 : 0)) return false;
        if (Number(fields.get('num-other-sentinels')) < options.sentinels - 1) return false;
      }
      return true;
    });
    return {
      addr: `redis+sentinel://${sentinels.map((s) => `${HOST}:${s.port}`).join(',')}/${name}`,
      stop,
      masterPort: master.port,
      replicaPort,
      currentMasterPort: async () => {
        const port = await askSentinels();
        if (port === undefined) throw new Error(`no sentinel answered for ${name}`);
        return port;
      },
      crashMaster: () => master.crash(),
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------------
// Process hygiene: nothing outlives the test process
// ---------------------------------------------------------------------------------------------------

const livePids = new Set<number>();
const tempDirs = new Set<string>();

function killAllNow(): void {
  for (const pid of livePids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  livePids.clear();
  for (const dir of tempDirs) removeDir(dir);
}

process.on('exit', killAllNow);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  const onSignal = () => {
    killAllNow();
    process.removeListener(signal, onSignal);
    // Without other listeners the default action (terminate) is what the sender wanted.
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  };
  process.on(signal, onSignal);
}

function makeTempDir(name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `rl-test-${name}-`));
  tempDirs.add(dir);
  return dir;
}

function removeDir(dir: string): void {
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch {
    // best effort
  }
  tempDirs.delete(dir);
}

// ---------------------------------------------------------------------------------------------------
// Small helpers: free ports, PING, a minimal RESP client, bounded waits
// ---------------------------------------------------------------------------------------------------

const handedOut = new Set<number>();

/** A port the OS just gave us for port 0 (and that we have not handed out before in this process). */
async function freePort(): Promise<number> {
  for (let i = 0; i < 20; i++) {
    const port = await new Promise<number>((resolve, reject) => {
      const srv = createServer();
      srv.unref();
      srv.once('error', reject);
      srv.listen(0, HOST, () => {
        const { port: p } = srv.address() as AddressInfo;
        srv.close(() => resolve(p));
      });
    });
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error('could not find a free TCP port');
}

async function waitForPing(
  host: string,
  port: number,
  timeoutMs: number,
  describe: () => string,
  gaveUp: () => boolean = () => false,
  log: () => string = () => '',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  let stopped = false;
  while (Date.now() < deadline) {
    if (gaveUp()) {
      stopped = true;
      break;
    }
    try {
      const reply = await command(host, port, ['PING'], 1_000);
      if (reply === 'PONG') return;
      last = `answered ${JSON.stringify(reply)}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await sleep(25);
  }
  const tail = log();
  throw new Error(
    `Redis not ready: ${describe()} ` +
      (stopped ? 'before answering PING' : `did not answer PING within ${timeoutMs} ms (last: ${last})`) +
      (tail ? `\n--- server log ---\n${tail}` : ''),
  );
}

async function waitUntil(timeoutMs: number, what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(50);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

type Resp = string | number | null | Error | Resp[];

/** Sends one command over a fresh connection and returns the decoded reply (errors reject). */
export function command(host: string, port: number, args: string[], timeoutMs = 2_000): Promise<Resp> {
  return new Promise<Resp>((resolve, reject) => {
    const socket = createConnection({ host, port });
    let buf = Buffer.alloc(0);
    const finish = (err: Error | undefined, value?: Resp) => {
      clearTimeout(timer);
      socket.destroy();
      if (err) reject(err);
      else resolve(value as Resp);
    };
    const timer = setTimeout(() => finish(new Error(`no reply from ${host}:${port} within ${timeoutMs} ms`)), timeoutMs);
    socket.once('error', (err) => finish(err));
    socket.on('connect', () => {
      let out = `*${args.length}\r\n`;
      for (const a of args) out += `$${Buffer.byteLength(a)}\r\n${a}\r\n`;
      socket.write(out);
    });
    socket.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      const parsed = parseResp(buf, 0);
      if (!parsed) return;
      if (parsed.value instanceof Error) finish(parsed.value);
      else finish(undefined, parsed.value);
    });
    socket.once('close', () => finish(new Error(`connection to ${host}:${port} closed`)));
  });
}

function parseResp(buf: Buffer, at: number): { value: Resp; next: number } | undefined {
  const eol = buf.indexOf('\r\n', at);
  if (eol < 0) return undefined;
  const type = String.fromCharCode(buf[at]);
  const line = buf.toString('utf8', at + 1, eol);
  const next = eol + 2;
  switch (type) {
    case '+':
      return { value: line, next };
    case '-':
      return { value: new Error(line), next };
    case ':':
      return { value: Number(line), next };
    case '$': {
      const len = Number(line);
      if (len < 0) return { value: null, next };
      if (buf.length < next + len + 2) return undefined;
      return { value: buf.toString('utf8', next, next + len), next: next + len + 2 };
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return { value: null, next };
      const items: Resp[] = [];
      let pos = next;
      for (let i = 0; i < count; i++) {
        const item = parseResp(buf, pos);
        if (!item) return undefined;
        items.push(item.value);
        pos = item.next;
      }
      return { value: items, next: pos };
    }
    default:
      return { value: new Error(`unexpected RESP type ${JSON.stringify(type)}`), next };
  }
}

function run(file: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${file} ${args.join(' ')} failed: ${err.message}\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    timer.unref();
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
