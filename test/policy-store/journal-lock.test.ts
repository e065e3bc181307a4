import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FilePolicyStore } from '../../src/policy-store/file-policy-store.js';
import { DataDirLock, DataDirLockedError, LOCK_FILE, type LockOwner } from '../../src/policy-store/journal-lock.js';
import { RlError } from '../../src/errors.js';
import { createChange, versionedPolicy } from '../support/policies.js';
import { REPO_ROOT } from '../support/server-process.js';
import { tempDir } from '../support/temp-dir.js';

/** Polls `condition` (every 10 ms, up to 10 s): for what a timer does in the background. */
async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`timed out waiting until ${what}`);
}

describe('data directory lock', function () {
  this.timeout(30_000);
  let dir: string;
  const locks: DataDirLock[] = [];
  const acquire = async (options = {}) => {
    const lock = await DataDirLock.acquire(dir, options);
    locks.push(lock);
    return lock;
  };
  const refused = async (options = {}): Promise<DataDirLockedError> => {
    try {
      await acquire(options);
    } catch (error) {
      expect(error).to.be.instanceOf(DataDirLockedError);
      return error as DataDirLockedError;
    }
    throw new Error('expected the lock to be refused');
  };
  const lockPath = () => join(dir, LOCK_FILE);
  const owner = () => JSON.parse(readFileSync(lockPath(), 'utf8')) as LockOwner;
  const writeOwner = (o: Partial<LockOwner>, ageMs = 0) => {
    writeFileSync(lockPath(), JSON.stringify(o));
    const t = new Date(Date.now() - ageMs);
    utimesSync(lockPath(), t, t);
  };

  tempDir('rl-lock-', { per: 'test', made: (path) => (dir = path), release: async () => { for (const l of locks.splice(0)) await l.release(); } });

  it('is held by one owner at a time, also within one process, and released on close', async () => {
    const lock = await acquire();
    expect(owner().pid).to.equal(process.pid);
    const error = await refused();
    expect(error.message).to.include(`RL_DATA_DIR ${dir}`).and.include(`pid ${process.pid}`);
    await lock.release();
    expect(existsSync(lockPath())).to.equal(false);
    await acquire();
  });

  it('stillMine (the check before every append): held, deleted, replaced by another file', async () => {
    const lock = await acquire();
    expect(lock.stillMine()).to.equal(true);
    unlinkSync(lockPath());
    expect(lock.stillMine()).to.equal(false);
    writeOwner({ pid: process.pid, host: 'another' });
    expect(lock.stillMine()).to.equal(false);
  });

  it('a live process of this namespace holds it; once that process is killed -9 it is free at once', async () => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '-e', `import { DataDirLock } from './src/policy-store/journal-lock.ts'; await DataDirLock.acquire(${JSON.stringify(dir)}); console.log('locked'); setInterval(() => {}, 1000);`],
      { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout!.on('data', (d: Buffer) => d.toString().includes('locked') && resolve());
        child.once('exit', () => reject(new Error('child exited before locking')));
      });
      expect((await refused()).message).to.include(`pid ${child.pid}`);
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
    expect(existsSync(lockPath()), 'kill -9 leaves the file').to.equal(true);
    await acquire();
    expect(owner().pid).to.equal(process.pid);
  });

  it('a lock of this namespace whose pid now belongs to another process (start time differs) is stale', async () => {
    const mine = await acquire();
    const me = owner();
    await mine.release();
    // Our parent is alive, but it is not the process that wrote this lock.
    writeOwner({ ...me, pid: process.ppid, start_ticks: '1' });
    await acquire();
  });

  it('a lock of another host or pid namespace: start-up waits while it is refreshed, takes it once it is not', async () => {
    const quick = { staleMs: 400, refreshMs: 100 };
    const foreign: Partial<LockOwner> = { pid: 1, host: 'other-pod', pid_ns: 'pid:[1]', boot_id: 'x', start_ticks: '5', started_at: 'then' };
    // Kept fresh by its (remote) owner the whole time: refused after waiting staleMs and two refreshes.
    writeOwner(foreign);
    const keeper = setInterval(() => utimesSync(lockPath(), new Date(), new Date()), 50);
    try {
      expect((await refused(quick)).message).to.include('pid 1 on other-pod');
    } finally {
      clearInterval(keeper);
    }
    // Its owner died (a crashed container, say): no more refreshes, so it goes stale and is taken over.
    writeOwner(foreign);
    await acquire(quick);
    expect(owner().pid).to.equal(process.pid);
  });

  it('an unreadable lock (its writer died while writing it) is waited for while refreshed, taken once stale', async () => {
    const quick = { staleMs: 400, refreshMs: 100 };
    writeFileSync(lockPath(), '{"pid":');
    const keeper = setInterval(() => utimesSync(lockPath(), new Date(), new Date()), 50);
    try {
      expect((await refused(quick)).message).to.include('still writing the lock');
    } finally {
      clearInterval(keeper);
    }
    await acquire(quick);
    expect(owner().pid).to.equal(process.pid);
  });

  it('the owner refreshes its lock; when the file is taken from it the store refuses changes', async () => {
    const store = await FilePolicyStore.open(dir, { lock: { refreshMs: 20 } });
    try {
      const before = Date.now() - 60_000;
      utimesSync(lockPath(), new Date(before), new Date(before));
      await until(() => statSync(lockPath()).mtimeMs > before + 30_000, 'the owner refreshed its lock');
      expect((await store.commit(createChange(versionedPolicy('p', 1)))).ok).to.equal(true);

      unlinkSync(lockPath());
      writeOwner({ pid: 1, host: 'other-pod', pid_ns: 'pid:[1]', boot_id: 'x', start_ticks: '5', started_at: 'then' });
      // The very next change is refused (the lock is checked before each append), and so is every later one.
      for (const id of ['q', 'r']) {
        let error: unknown;
        try {
          await store.commit(createChange(versionedPolicy(id, 1)));
        } catch (e) {
          error = e;
        }
        expect(error, id).to.be.instanceOf(RlError);
        expect((error as Error).message).to.include('lock');
      }
      expect(store.get('q')).to.equal(undefined);
    } finally {
      await store.close();
    }
    expect(existsSync(lockPath()), 'close leaves the other owner\'s file alone').to.equal(true);
  });
});
