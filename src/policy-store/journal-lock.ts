import { hostname } from 'node:os';
import { constants as fsConstants, promises as fsp, statSync } from 'node:fs';
import { join } from 'node:path';
import { log } from '../util/log.js';

/**
 * One server per data directory: `<dataDir>/policies.lock`, created exclusively (O_CREAT|O_EXCL) and
 * holding its owner's identity, its mtime refreshed every few seconds while the owner lives.
 *
 * Why a lock file and not fs-level locking: Node has no flock/fcntl locks without a native addon. A
 * plain pid file gets stuck after `kill -9`, or in a container where the restarted server has the same
 * pid (1) as the dead one, or is fooled when two containers with separate pid namespaces share a volume.
 * So a lock found on disk is stale when:
 * - its owner ran in this pid namespace since this boot (same host name, /proc pid namespace and boot
 *   id) and that process is gone: no such pid, a zombie, a different process under a reused pid (its
 *   start time differs), or this very process (a restarted container reuses pid 1). This is exact, so
 *   a server restarted after kill -9 takes its directory back at once;
 * - otherwise (another host or namespace: its pid means nothing here) when its mtime is older than
 *   `staleMs`: the owner stopped refreshing it. A restarted container is such a case (a new pid
 *   namespace), so for a lock judged this way start-up waits, up to `staleMs` and two refreshes, for it
 *   to go stale before giving up: a crashed container's restart starts late, not never.
 * Taking over deletes the stale file and creates a new one exclusively. Two servers taking over the same
 * stale lock at the same moment could both succeed (one deleting the other's new file); the store
 * checks the lock is still its own before every append and before truncating the journal, so the one
 * that lost it refuses to write. The owner checks on every refresh that the file is still its own; when
 * it is not (deleted by hand, or taken over after this process was frozen past `staleMs`), `onLost`
 * is called and the store stops accepting changes.
 */

export const LOCK_FILE = 'policies.lock';

export interface LockOwner {
  pid: number;
  host: string;
  /** /proc/self/ns/pid link text ('' where there is no /proc). */
  pid_ns: string;
  /** /proc/sys/kernel/random/boot_id ('' where there is none). */
  boot_id: string;
  /** Start time of the process in clock ticks since boot (/proc/<pid>/stat field 22; '' without /proc). */
  start_ticks: string;
  started_at: string;
}

export interface LockOptions {
  /** How often the owner refreshes the lock's mtime (default 5 s). */
  refreshMs?: number;
  /** A lock of another namespace not refreshed for this long is stale (default 30 s). */
  staleMs?: number;
  /** Called once when the lock file is no longer this process's (see the file comment). */
  onLost?: (reason: string) => void;
}

export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly owner: Partial<LockOwner> | undefined,
  ) {
    const who = owner?.pid !== undefined ? `pid ${owner.pid}${owner.host ? ` on ${owner.host}` : ''}${owner.started_at ? `, since ${owner.started_at}` : ''}` : 'a process that is still writing the lock';
    super(
      `RL_DATA_DIR ${dataDir} is in use by another server (${who}; lock file ${join(dataDir, LOCK_FILE)}). ` +
        'Stop that server or give this one its own RL_DATA_DIR.',
    );
    this.name = 'DataDirLockedError';
  }
}

/** Directories this process holds, so a second open in the same process is refused too. */
const heldHere = new Set<string>();

export class DataDirLock {
  private timer: NodeJS.Timeout | undefined;
  private released = false;

  private constructor(
    readonly dir: string,
    private readonly path: string,
    private readonly handle: fsp.FileHandle,
    private readonly ino: number,
    options: LockOptions,
  ) {
    heldHere.add(dir);
    const refreshMs = options.refreshMs ?? 5000;
    this.timer = setInterval(() => void this.refresh(options.onLost), refreshMs);
    this.timer.unref();
  }

  /** Takes the lock of `dir` (an absolute, existing directory) or throws DataDirLockedError. */
  static async acquire(dir: string, options: LockOptions = {}): Promise<DataDirLock> {
    const path = join(dir, LOCK_FILE);
    const staleMs = options.staleMs ?? 30_000;
    const refreshMs = options.refreshMs ?? 5000;
    if (heldHere.has(dir)) throw new DataDirLockedError(dir, await currentOwner());
    const me = await currentOwner();
    const waitUntil = Date.now() + staleMs + 2 * refreshMs;
    let waiting = false;
    for (let attempt = 0; attempt < 3; attempt++) {
      let handle: fsp.FileHandle;
      try {
        handle = await fsp.open(path, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL, 0o644);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        const found = await readOwner(path);
        if (found === undefined) continue; // gone meanwhile: try again
        const verdict = await judge(found, me, staleMs);
        if (verdict === 'held') throw new DataDirLockedError(dir, found.owner);
        if (verdict === 'refreshed') {
          if (Date.now() >= waitUntil) throw new DataDirLockedError(dir, found.owner);
          if (!waiting) {
            waiting = true;
            log.warn('policy store: the data directory lock is held from another host or pid namespace; waiting for it to be released or go stale', {
              path,
              owner: found.owner ?? 'unreadable',
              stale_after_ms: staleMs,
            });
          }
          await new Promise((resolve) => setTimeout(resolve, Math.min(1000, refreshMs)));
          attempt--; // waiting is not an attempt
          continue;
        }
        log.warn('policy store: taking over a stale data directory lock', { path, owner: found.owner ?? 'unreadable' });
        await fsp.unlink(path).catch((e: NodeJS.ErrnoException) => {
          if (e.code !== 'ENOENT') throw e;
        });
        continue;
      }
      try {
        await handle.writeFile(`${JSON.stringify(me)}\n`);
        await handle.datasync();
        const { ino } = await handle.stat();
        return new DataDirLock(dir, path, handle, ino, options);
      } catch (error) {
        await handle.close();
        await fsp.unlink(path).catch(() => undefined);
        throw error;
      }
    }
    throw new DataDirLockedError(dir, (await readOwner(path))?.owner);
  }

  /** Deletes the lock file (when it is still this process's) and stops refreshing it. */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    clearInterval(this.timer);
    heldHere.delete(this.dir);
    try {
      if (this.stillMine()) await fsp.unlink(this.path);
    } finally {
      await this.handle.close();
    }
  }

  private async refresh(onLost: LockOptions['onLost']): Promise<void> {
    if (this.released) return;
    try {
      if (!this.stillMine()) {
        clearInterval(this.timer);
        log.error('policy store: the data directory lock is no longer this process\'s; refusing further changes', { path: this.path });
        onLost?.('the data directory lock was removed or taken over by another server');
        return;
      }
      const now = new Date();
      await this.handle.utimes(now, now);
    } catch (error) {
      log.warn('policy store: could not refresh the data directory lock', { path: this.path, error: String(error) });
    }
  }

  /**
   * Whether the lock file is still this process's: one stat, synchronous, as it is checked before every
   * journal append. The stat of a file in the data directory is answered from the kernel's inode cache;
   * sent to the libuv pool instead, it would cost each append a thread hop.
   */
  stillMine(): boolean {
    try {
      return statSync(this.path, { throwIfNoEntry: false })?.ino === this.ino;
    } catch {
      return false;
    }
  }
}

interface FoundLock {
  owner: LockOwner | undefined;
  mtimeMs: number;
}

async function readOwner(path: string): Promise<FoundLock | undefined> {
  let text: string;
  let mtimeMs: number;
  try {
    [text, { mtimeMs }] = await Promise.all([fsp.readFile(path, 'utf8'), fsp.stat(path)]);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  try {
    const owner = JSON.parse(text) as LockOwner;
    return { owner: typeof owner?.pid === 'number' ? owner : undefined, mtimeMs };
  } catch {
    return { owner: undefined, mtimeMs }; // being written right now, or its writer died mid-write
  }
}

/**
 * `stale`: take it over; `held`: its owner lives in this namespace; `refreshed`: its owner cannot be
 * checked from here and refreshed it within `staleMs`.
 */
async function judge(found: FoundLock, me: LockOwner, staleMs: number): Promise<'stale' | 'held' | 'refreshed'> {
  const owner = found.owner;
  const sameNamespace = owner !== undefined && owner.host === me.host && owner.pid_ns === me.pid_ns && owner.boot_id === me.boot_id;
  if (sameNamespace) {
    if (owner.pid === me.pid) return 'stale'; // not held in this process (checked first): a previous life
    const alive = me.start_ticks === '' ? signalable(owner.pid) : await processAlive(owner.pid, owner.start_ticks);
    return alive ? 'held' : 'stale';
  }
  return Date.now() - found.mtimeMs > staleMs ? 'stale' : 'refreshed';
}

/** Without /proc: whether a process with this pid exists (EPERM: it does, under another user). */
function signalable(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function processAlive(pid: number, startTicks: string): Promise<boolean> {
  const stat = await procStat(pid);
  if (stat === undefined) return false;
  return stat.state !== 'Z' && stat.state !== 'X' && (startTicks === '' || stat.startTicks === startTicks);
}

async function procStat(pid: number): Promise<{ state: string; startTicks: string } | undefined> {
  let text: string;
  try {
    text = await fsp.readFile(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0] ?? '', startTicks: fields[19] ?? '' };
}

async function currentOwner(): Promise<LockOwner> {
  const [pidNs, bootId, stat] = await Promise.all([
    fsp.readlink('/proc/self/ns/pid').catch(() => ''),
    fsp.readFile('/proc/sys/kernel/random/boot_id', 'utf8').then((t) => t.trim(), () => ''),
    procStat(process.pid),
  ]);
  return {
    pid: process.pid,
    host: hostname(),
    pid_ns: pidNs,
    boot_id: bootId,
    start_ticks: stat?.startTicks ?? '',
    started_at: new Date().toISOString(),
  };
}
