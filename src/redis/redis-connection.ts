import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';

/**
 * `RL_COUNTERSTORE_ADDR` (docs/deployment.md "Redis addresses") and the ioredis client built from it.
 *
 *   redis://[user:pass@]host[:port][/db]          one server (port 6379 and db 0 by default)
 *   rediss://[user:pass@]host[:port][/db]         the same over TLS
 *   host[:port]                                   bare: one server, no TLS
 *   redis+cluster://[user:pass@]h1:p1,h2:p2       Redis Cluster seed nodes (rediss+cluster:// for TLS)
 *   redis+sentinel://[user:pass@]h1:p1,h2:p2/master-name[/db]
 *                                                 Sentinel; the credentials are the master's
 *                                                 (rediss+sentinel:// for TLS to the data nodes)
 *   redis+unix://[user:pass@]/path/to/redis.sock[?db=N]
 *                                                 one server on this machine, over its Unix socket
 *
 * Hosts may be names, IPv4 addresses or bracketed IPv6 addresses (`[::1]:6379`). User and password
 * are percent-decoded. Anything else (another scheme, a query string other than a Unix socket's `db`, a
 * bad port or db, an empty host list) is rejected with an Error naming the variable the address came
 * from (RL_COUNTERSTORE_ADDR unless told otherwise). Passwords never appear in messages: use
 * `redactAddress` for logs.
 */

const ADDR_VARIABLE = 'RL_COUNTERSTORE_ADDR';
const DEFAULT_REDIS_PORT = 6379;

export interface HostPort {
  host: string;
  port: number;
}

interface Credentials {
  username?: string;
  password?: string;
}

export type CounterStoreAddress =
  | ({ kind: 'standalone'; tls: boolean; db: number } & HostPort & Credentials)
  | ({ kind: 'cluster'; tls: boolean; nodes: HostPort[] } & Credentials)
  | ({ kind: 'sentinel'; tls: boolean; sentinels: HostPort[]; masterName: string; db: number } & Credentials)
  | ({ kind: 'unix'; tls: false; path: string; db: number } & Credentials);

export class CounterStoreAddressError extends Error {
  constructor(
    /** What is wrong, without the variable's name. */
    readonly problem: string,
    readonly variable = ADDR_VARIABLE,
  ) {
    super(`${variable}: ${problem}`);
    this.name = 'CounterStoreAddressError';
  }
}

const SCHEMES: Record<string, { kind: CounterStoreAddress['kind']; tls: boolean }> = {
  'redis': { kind: 'standalone', tls: false },
  'rediss': { kind: 'standalone', tls: true },
  'redis+cluster': { kind: 'cluster', tls: false },
  'rediss+cluster': { kind: 'cluster', tls: true },
  'redis+sentinel': { kind: 'sentinel', tls: false },
  'rediss+sentinel': { kind: 'sentinel', tls: true },
  'redis+unix': { kind: 'unix', tls: false },
};

/** sun_path holds 108 bytes, the terminating NUL included. */
const MAX_SOCKET_PATH_BYTES = 107;

const HOSTNAME = /^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$/;
const IPV6 = /^[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?$/;
const MASTER_NAME = /^[A-Za-z0-9_.:-]+$/;

/**
 * Parses a counter store address; throws CounterStoreAddressError naming `variable` (the RL_* variable
 * the value came from) and what is wrong.
 */
export function parseCounterStoreAddress(value: string, variable = ADDR_VARIABLE): CounterStoreAddress {
  try {
    return parseAddress(value);
  } catch (error) {
    if (error instanceof CounterStoreAddressError && variable !== error.variable) throw new CounterStoreAddressError(error.problem, variable);
    throw error;
  }
}

function parseAddress(value: string): CounterStoreAddress {
  const addr = value.trim();
  if (addr === '') throw new CounterStoreAddressError('is empty');
  if (/\s/.test(addr)) throw new CounterStoreAddressError('must not contain whitespace');

  const schemeEnd = addr.indexOf('://');
  if (schemeEnd < 0) {
    // Bare host:port. A scheme without "//" (redis:host) is a typo, not a host name.
    if (/^[A-Za-z][A-Za-z0-9+.-]*:[^0-9[]/.test(addr) || addr.includes('/') || addr.includes('@')) {
      throw new CounterStoreAddressError(
        `"${redactAddress(addr)}" is neither host:port nor a redis://, rediss://, redis+cluster://, redis+sentinel:// or redis+unix:// URL`,
      );
    }
    const hp = parseHostPort(addr, 'host:port');
    return { kind: 'standalone', tls: false, db: 0, host: hp.host, port: hp.port };
  }

  const schemeText = addr.slice(0, schemeEnd).toLowerCase();
  const scheme = SCHEMES[schemeText];
  if (!scheme) {
    throw new CounterStoreAddressError(
      `unknown scheme "${schemeText}://" (use redis://, rediss://, redis+cluster://, redis+sentinel://, redis+unix:// or host:port)`,
    );
  }
  let rest = addr.slice(schemeEnd + 3);
  if (scheme.kind === 'unix') return parseUnixAddress(rest);
  if (rest.includes('?') || rest.includes('#')) {
    throw new CounterStoreAddressError('query strings and fragments are not supported');
  }

  // Authority (userinfo@hosts) up to the first "/", path after it.
  const slash = rest.indexOf('/');
  const authority = slash < 0 ? rest : rest.slice(0, slash);
  const path = slash < 0 ? '' : rest.slice(slash + 1);
  rest = authority;
  const at = rest.lastIndexOf('@');
  const credentials = at < 0 ? {} : parseUserInfo(rest.slice(0, at));
  const hostsText = at < 0 ? rest : rest.slice(at + 1);
  if (hostsText === '') throw new CounterStoreAddressError(`${schemeText}:// needs a host`);

  switch (scheme.kind) {
    case 'standalone': {
      if (hostsText.includes(',')) {
        throw new CounterStoreAddressError(
          `${schemeText}:// takes one host; use redis+cluster:// or redis+sentinel:// for several`,
        );
      }
      const hp = parseHostPort(hostsText, 'host');
      const db = path === '' ? 0 : parseDb(path);
      return { kind: 'standalone', tls: scheme.tls, db, host: hp.host, port: hp.port, ...credentials };
    }
    case 'cluster': {
      if (path !== '') {
        throw new CounterStoreAddressError(`${schemeText}:// takes no path (Redis Cluster has only db 0), got "/${path}"`);
      }
      return { kind: 'cluster', tls: scheme.tls, nodes: parseHostList(hostsText, 'cluster node'), ...credentials };
    }
    case 'sentinel': {
      const sentinels = parseHostList(hostsText, 'sentinel');
      const parts = path.split('/');
      if (path === '' || parts[0] === '') {
        throw new CounterStoreAddressError(`${schemeText}:// needs the master name: ${schemeText}://h1:p1,h2:p2/master-name`);
      }
      if (parts.length > 2) throw new CounterStoreAddressError(`unexpected path "/${path}" (expected /master-name[/db])`);
      const masterName = decode(parts[0], 'master name');
      if (!MASTER_NAME.test(masterName)) {
        throw new CounterStoreAddressError(`bad master name "${masterName}" (letters, digits and . _ : - only)`);
      }
      const db = parts.length === 2 ? parseDb(parts[1]) : 0;
      return { kind: 'sentinel', tls: scheme.tls, sentinels, masterName, db, ...credentials };
    }
  }
}

/** `[user:pass@]/absolute/path[?db=N]`, after `redis+unix://`. */
function parseUnixAddress(rest: string): CounterStoreAddress {
  if (rest.includes('#')) throw new CounterStoreAddressError('fragments are not supported');
  const slash = rest.indexOf('/');
  const userinfo = slash < 0 ? rest : rest.slice(0, slash);
  if (slash < 0 || (userinfo !== '' && !userinfo.endsWith('@'))) {
    throw new CounterStoreAddressError('redis+unix:// takes an absolute socket path: redis+unix:///path/to/redis.sock');
  }
  const credentials = userinfo === '' ? {} : parseUserInfo(userinfo.slice(0, -1));
  const question = rest.indexOf('?', slash);
  const path = decode(question < 0 ? rest.slice(slash) : rest.slice(slash, question), 'socket path');
  if (path === '/' || path.endsWith('/')) throw new CounterStoreAddressError(`socket path "${path}" names a directory, not a socket`);
  if (path.includes('\0')) throw new CounterStoreAddressError('the socket path contains a NUL byte');
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) {
    throw new CounterStoreAddressError(`socket path "${path}" is longer than ${MAX_SOCKET_PATH_BYTES} bytes (the limit of a Unix socket address)`);
  }
  let db = 0;
  if (question >= 0) {
    const query = rest.slice(question + 1);
    const m = /^db=([^&]*)$/.exec(query);
    if (!m) throw new CounterStoreAddressError(`unexpected query "?${query}" (redis+unix:// takes only ?db=N)`);
    db = parseDb(m[1], '?db=');
  }
  return { kind: 'unix', tls: false, path, db, ...credentials };
}

/** The address with any password replaced by `***`, for logs and error messages. */
export function redactAddress(addr: string): string {
  const schemeEnd = addr.indexOf('://');
  const start = schemeEnd < 0 ? 0 : schemeEnd + 3;
  const slash = addr.indexOf('/', start);
  const authorityEnd = slash < 0 ? addr.length : slash;
  const at = addr.lastIndexOf('@', authorityEnd - 1);
  if (at < start) return addr;
  const userinfo = addr.slice(start, at);
  const colon = userinfo.indexOf(':');
  const redacted = colon < 0 ? '***' : `${userinfo.slice(0, colon)}:***`;
  return addr.slice(0, start) + redacted + addr.slice(at);
}

/** A one-line description of a parsed address without credentials. */
export function describeAddress(address: CounterStoreAddress): string {
  const list = (hps: HostPort[]) => hps.map(formatHostPort).join(',');
  const auth = address.password !== undefined || address.username !== undefined ? ' (with credentials)' : '';
  const tls = address.tls ? ' over TLS' : '';
  switch (address.kind) {
    case 'standalone':
      return `redis ${formatHostPort(address)} db ${address.db}${tls}${auth}`;
    case 'cluster':
      return `redis cluster ${list(address.nodes)}${tls}${auth}`;
    case 'sentinel':
      return `redis sentinel ${list(address.sentinels)} master ${address.masterName} db ${address.db}${tls}${auth}`;
    case 'unix':
      return `redis unix socket ${address.path} db ${address.db}${auth}`;
  }
}

function formatHostPort(hp: HostPort): string {
  return `${hp.host.includes(':') ? `[${hp.host}]` : hp.host}:${hp.port}`;
}

function parseUserInfo(text: string): Credentials {
  const colon = text.indexOf(':');
  const user = colon < 0 ? text : text.slice(0, colon);
  const out: Credentials = {};
  if (user !== '') out.username = decode(user, 'user name');
  if (colon >= 0) {
    const pass = text.slice(colon + 1);
    if (pass === '') throw new CounterStoreAddressError('the password after ":" is empty');
    out.password = decode(pass, 'password');
  } else if (user !== '') {
    // redis://secret@host is commonly used for a password without a user (Redis < 6 AUTH).
    out.password = out.username;
    delete out.username;
  }
  return out;
}

function decode(text: string, what: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    // Never echo a credential.
    const shown = what === 'password' || what === 'user name' ? '' : ` "${text}"`;
    throw new CounterStoreAddressError(`bad percent-encoding in the ${what}${shown}`);
  }
}

function parseHostList(text: string, what: string): HostPort[] {
  const items = text.split(',');
  if (items.some((item) => item === '')) throw new CounterStoreAddressError(`empty ${what} address in "${text}"`);
  const seen = new Set<string>();
  const out: HostPort[] = [];
  for (const item of items) {
    const hp = parseHostPort(item, what);
    const id = formatHostPort(hp);
    if (seen.has(id)) throw new CounterStoreAddressError(`${what} ${id} is listed twice`);
    seen.add(id);
    out.push(hp);
  }
  return out;
}

function parseHostPort(text: string, what: string): HostPort {
  let host: string;
  let portText: string | undefined;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) throw new CounterStoreAddressError(`unclosed "[" in ${what} "${text}"`);
    host = text.slice(1, close);
    const after = text.slice(close + 1);
    if (after !== '') {
      if (!after.startsWith(':')) throw new CounterStoreAddressError(`unexpected "${after}" after "[${host}]"`);
      portText = after.slice(1);
    }
    if (!IPV6.test(host) || !host.includes(':')) {
      throw new CounterStoreAddressError(`bad IPv6 address "[${host}]" in ${what} "${text}"`);
    }
  } else {
    const colon = text.lastIndexOf(':');
    if (colon >= 0 && text.indexOf(':') !== colon) {
      throw new CounterStoreAddressError(`IPv6 address "${text}" must be in brackets: [${text}]:${DEFAULT_REDIS_PORT}`);
    }
    host = colon < 0 ? text : text.slice(0, colon);
    portText = colon < 0 ? undefined : text.slice(colon + 1);
    if (host === '') throw new CounterStoreAddressError(`missing host in ${what} "${text}"`);
    if (!HOSTNAME.test(host)) throw new CounterStoreAddressError(`bad host "${host}" in ${what} "${text}"`);
  }
  let port = DEFAULT_REDIS_PORT;
  if (portText !== undefined) {
    if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535) {
      throw new CounterStoreAddressError(`bad port "${portText}" in ${what} "${text}" (1-65535)`);
    }
    port = Number(portText);
  }
  return { host, port };
}

/** A db number, as written after `form`: a path's `/`, or a Unix socket address's `?db=`. */
function parseDb(text: string, form = '/'): number {
  if (!/^[0-9]{1,5}$/.test(text)) {
    throw new CounterStoreAddressError(`bad database "${form}${text}" (a number such as ${form}0)`);
  }
  return Number(text);
}

// ---------------------------------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------------------------------

export interface RedisClientOptions {
  /** Per-command timeout, ms (default 100). A timed-out command is rejected, never replayed. */
  commandTimeoutMs?: number;
  /**
   * false: ioredis starts no timer per command, for a caller that bounds each command itself
   * (RedisCounterStore: one deadline per batch). commandTimeoutMs still bounds Sentinel queries and
   * cluster slot refreshes. Default true.
   */
  perCommandTimeout?: boolean;
  /** TCP connect timeout, ms (default 1000). */
  connectTimeoutMs?: number;
  /** Batch commands issued in the same tick into one write (default true). */
  enableAutoPipelining?: boolean;
  /** CLIENT SETNAME, to spot the service in CLIENT LIST (default `rl-counter-store`). */
  connectionName?: string;
}

export const DEFAULT_COMMAND_TIMEOUT_MS = 100;
/** How often a Cluster client asks for the slot map anyway. */
const SLOTS_REFRESH_INTERVAL_MS = 5000;

/** Reconnect delay after the n-th failed attempt: 50, 100, … ms, at most 500 ms; never gives up. */
export function reconnectDelayMs(attempt: number): number {
  return Math.min(50 * Math.max(1, attempt), 500);
}

/**
 * The ioredis client for an address. Fail-fast settings throughout: no offline queue (a command
 * while disconnected fails at once), no retries of a command (maxRetriesPerRequest 0, no resend of
 * unanswered commands after a reconnect, and in a cluster no retry after a closed connection), a
 * command timeout, and a bounded reconnect backoff so the client recovers by itself.
 *
 * The caller owns the client; attach an `error` listener (RedisCounterStore does).
 */
export function createRedisClient(address: CounterStoreAddress | string, options: RedisClientOptions = {}): Redis | Cluster {
  const parsed = typeof address === 'string' ? parseCounterStoreAddress(address) : address;
  const commandTimeout = options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
  if (!(commandTimeout > 0) || !Number.isFinite(commandTimeout)) {
    throw new Error(`commandTimeoutMs must be a positive number, got ${commandTimeout}`);
  }
  const base: RedisOptions = {
    commandTimeout: options.perCommandTimeout === false ? undefined : commandTimeout,
    connectTimeout: options.connectTimeoutMs ?? 1000,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    retryStrategy: reconnectDelayMs,
    enableAutoPipelining: options.enableAutoPipelining ?? true,
    connectionName: options.connectionName ?? 'rl-counter-store',
    username: parsed.username,
    password: parsed.password,
  };
  switch (parsed.kind) {
    case 'standalone':
      return new Redis({
        ...base,
        host: parsed.host,
        port: parsed.port,
        db: parsed.db,
        ...(parsed.tls ? { tls: { servername: parsed.host } } : {}),
      });
    case 'unix':
      return new Redis({ ...base, path: parsed.path, db: parsed.db });
    case 'sentinel':
      return new Redis({
        ...base,
        sentinels: parsed.sentinels.map(({ host, port }) => ({ host, port })),
        name: parsed.masterName,
        role: 'master',
        db: parsed.db,
        sentinelRetryStrategy: reconnectDelayMs,
        sentinelCommandTimeout: Math.max(commandTimeout, 500),
        // Subscribe to +switch-master, so a failover is followed at once instead of at the next error.
        failoverDetector: true,
        ...(parsed.tls ? { tls: {}, enableTLSForSentinelMode: true } : {}),
      });
    case 'cluster': {
      // Node connections: ioredis itself fixes retryStrategy (none: the cluster refreshes its slots
      // instead) and enableOfflineQueue (on, while a node connects) for them, and does not accept
      // either here; the cluster-level options below are the ones that bound each command.
      const { enableAutoPipelining, retryStrategy: _retry, enableOfflineQueue: _queue, ...redisOptions } = base;
      const clusterOptions: ClusterOptions = {
        enableOfflineQueue: false,
        enableAutoPipelining,
        clusterRetryStrategy: reconnectDelayMs,
        // A command whose connection closed may have run: never send it again (it would count twice).
        retryDelayOnFailover: 0,
        slotsRefreshTimeout: Math.max(commandTimeout, 1000),
        // ioredis refreshes its slot map only on MOVED and lost connections unless asked: a resharding
        // or failover behind an open breaker (which sends nothing) would otherwise go unseen.
        slotsRefreshInterval: SLOTS_REFRESH_INTERVAL_MS,
        redisOptions: { ...redisOptions, ...(parsed.tls ? { tls: {} } : {}) },
      };
      return new Cluster(
        parsed.nodes.map(({ host, port }) => ({ host, port })),
        clusterOptions,
      );
    }
  }
}
