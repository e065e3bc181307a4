import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import type { MemoryKeyspace } from '../emulator/keyspace.js';
import { log } from '../../util/log.js';
import { readSnapshot, writeSnapshot } from './snapshot-file.js';
import { COUNTER_SNAPSHOT_FILE, CounterSnapshotUnusableError } from './snapshot-format.js';

/** `/rl/v1/info`'s `counter_snapshot`: the last snapshot written (or restored), its age from when writing began. */
export interface CounterSnapshotStatus {
  /** ms since the last snapshot began to be written: no count it holds is older. null before the first. */
  age_ms: number | null;
  keys: number;
}

/** Slices of the snapshot written on drain, after the last decision. */
const DRAIN_SLICE_MS = 50;

export interface CounterSnapshotsOptions {
  space: MemoryKeyspace;
  /** RL_DATA_DIR. */
  dataDir: string;
  keyPrefix: string;
  /** RL_COUNTER_SNAPSHOT_SECS in ms: from the start of one snapshot to the start of the next. */
  intervalMs: number;
  /** Longest the writer holds the event loop at once (default 0.25 ms: a decision arriving meanwhile waits at most that). */
  sliceMs?: number;
}

/**
 * Memory mode's counters across restarts (docs/operations.md, "Counters across restarts"): restored from
 * RL_DATA_DIR before the server takes traffic, written there every interval in the background and once
 * more on drain. A graceful restart loses nothing; a crash loses what was counted after the last
 * snapshot that completed began, so at most the interval plus the time one snapshot takes to write.
 */
export class CounterSnapshots {
  readonly file: string;
  private last: { startedAt: number; keys: number } | undefined;
  private writing: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly options: CounterSnapshotsOptions) {
    this.file = join(options.dataDir, COUNTER_SNAPSHOT_FILE);
  }

  /**
   * Puts the snapshot's live counters into the key space (still empty: nothing has been decided yet),
   * dropping what expired. A missing file is a first start; an unusable one is named in one log line and
   * set aside, and the server starts with empty counters. Never throws.
   */
  async restore(): Promise<void> {
    const { space, keyPrefix } = this.options;
    try {
      const read = await readSnapshot(this.file, keyPrefix, space.now());
      if (read === undefined) return;
      for (const [key, slot] of read.entries) space.slots.set(key, slot);
      this.last = { startedAt: read.startedAt, keys: read.entries.length };
      log.info('counters restored', { file: this.file, keys: read.entries.length, expired: read.expired, age_ms: space.now() - read.startedAt });
    } catch (error) {
      const why = error instanceof CounterSnapshotUnusableError ? error.message : String(error);
      log.warn(`counter snapshot ${this.file} ignored: ${why}; starting with empty counters`, { file: this.file });
    }
  }

  /** Writes a snapshot every interval from now on (the timer does not keep the process alive). */
  start(): void {
    this.schedule(this.options.intervalMs);
  }

  /** Drain: no more periodic snapshots; the one under way finishes, then a last one is written. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.writing;
    // The listeners are closed: no decision waits for a slice any more, so the last one is written in long ones.
    await this.write(DRAIN_SLICE_MS);
  }

  status(): CounterSnapshotStatus {
    if (this.last === undefined) return { age_ms: null, keys: 0 };
    return { age_ms: Math.max(0, this.options.space.now() - this.last.startedAt), keys: this.last.keys };
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      const started = this.options.space.now();
      this.writing = this.write().finally(() => {
        this.writing = undefined;
        this.schedule(Math.max(0, started + this.options.intervalMs - this.options.space.now()));
      });
    }, delayMs);
    this.timer.unref();
  }

  /** One snapshot; a failure (a full disk, a removed directory) is logged and the next one tries again. */
  private async write(sliceMs = this.options.sliceMs ?? 0.25): Promise<void> {
    const { space, keyPrefix } = this.options;
    try {
      const written = await writeSnapshot(space, this.file, keyPrefix, sliceMs);
      this.last = written;
    } catch (error) {
      log.warn('counter snapshot not written', { file: this.file, error: String(error) });
    }
  }
}

/**
 * RL_COUNTER_SNAPSHOT_SECS=0: no snapshots. One left from before is removed, so that turning them on
 * again later does not bring back counts from before the pause.
 */
export async function removeCounterSnapshot(dataDir: string): Promise<void> {
  const file = join(dataDir, COUNTER_SNAPSHOT_FILE);
  try {
    await fsp.rm(file);
    log.info('counter snapshots are off (RL_COUNTER_SNAPSHOT_SECS=0): removed the snapshot left from before', { file });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') log.warn('counter snapshot left from before not removed', { file, error: String(error) });
  }
}
