import { promises as fsp } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { RlError } from '../errors.js';
import { log } from '../util/log.js';
import { DataDirLock } from './journal-lock.js';
import { CompactionWorker } from './journal-compaction.js';
import { SNAPSHOT_FILE, type History, type SnapshotIndex } from './journal-snapshot.js';
import { SnapshotReader } from './journal-snapshot-reader.js';
import { checkBatch } from './journal-batch.js';
import { encodeRecord, fsyncDir, mkdirDurable, WRITE_THROUGH } from './journal-file.js';
import { applyRecord, type JournalRecord, type PolicyRecord } from './journal-state.js';
import {
  byPolicyId,
  ChangeListeners,
  resortOne,
  versionRecordOf,
  type AuditEntry,
  type ChangeListener,
  type CommitResult,
  type PolicyChange,
  type PolicyHead,
  type PolicyStore,
  type PolicyVersion,
} from './policy-store.js';
import { StringPool } from '../policy/stored-policy.js';
import type { Policy } from '../policy/types.js';
import { COMPACT_MIN_BYTES, type FilePolicyStoreOptions, type StorageStats } from './file-policy-options.js';
import { loadFiles, revivedRecord, seedRecord, type LoadedFiles } from './file-policy-load.js';
import { moveHistoryToSnapshot, writeSnapshot } from './file-policy-compaction.js';

/**
 * Single-node policy storage: a snapshot and an append-only journal in the data directory
 * (RL_DATA_DIR), which one server at a time may use (`policies.lock`, see journal-lock.ts).
 *
 * The journal's format and why it survives a crash: journal-file.ts.
 *
 * In memory: one record per policy id (journal-state.ts) with its head and current policy. Its versions
 * and audit entries up to the snapshot stay in the snapshot file, which the store keeps open and reads
 * an id's history from when asked (`versions`, `audit`); those since are held until the next compaction,
 * after which the store reads the new snapshot instead.
 *
 * Compaction keeps start-up and disk bounded by the state instead of by the number of changes ever
 * made. When the journal has grown to max(compactMinBytes, size of the last snapshot) (the rule of
 * Redis's AOF rewrite: each byte of journal pays for at most one byte of snapshot, and start-up reads
 * at most about twice the snapshot), the whole state is written as a snapshot (journal-snapshot.ts),
 * each step crash-safe:
 *   1. write `policies.snapshot.tmp`, fdatasync it;     a crash leaves a temp file, deleted at start-up
 *      (in a worker thread, from the files: journal-compaction.ts)
 *   2. rename it to `policies.snapshot`;                 old or new snapshot, the journal still whole
 *   3. fsync the directory;                              the new snapshot is durable
 *   4. truncate the journal to 0 and fdatasync it.
 * Start-up reads the snapshot (revision S), then the journal, skipping records up to S: after a crash
 * between 3 and 4 the journal still holds records the snapshot already has. A journal that starts
 * after S + 1 has lost acknowledged changes: corruption, refused. Compaction runs in the writer queue,
 * so no change is appended while it runs; decisions never wait for it (they read memory).
 */

export { encodeRecord, JOURNAL_FILE, JournalCorruptError, parseJournal } from './journal-file.js';
export type { CompactionStep, FilePolicyStoreOptions, StorageStats } from './file-policy-options.js';


export class FilePolicyStore implements PolicyStore {
  readonly path: string;
  private readonly file: fsp.FileHandle;
  private readonly records: Map<string, PolicyRecord>;
  /** The snapshot the records' older history lies in (none before the first compaction). */
  private snapshot: SnapshotReader | undefined;
  private sorted: Policy[] | undefined;
  private rev: number;
  private size: number;
  private journalRecords: number;
  private snapshotBytes: number;
  private compactions = 0;
  private appendedBytes = 0;
  private historyInMemory = 0;
  private compactionQueued = false;
  /** After a failed compaction, the journal size to wait for before trying again. */
  private retryCompactionAt = 0;
  private readonly compactMinBytes: number;
  private queue: Promise<unknown> = Promise.resolve();
  /** Changes waiting for the journal, written together by the next queued write. */
  private waiting: { change: PolicyChange; settle: (result: CommitResult) => void; fail: (error: unknown) => void }[] = [];
  private failed: Error | undefined;
  private closed = false;
  private readonly listeners = new ChangeListeners();
  private readonly compactor = new CompactionWorker();

  private constructor(
    private readonly lock: DataDirLock,
    { path, file, snapshot, state, records, size, snapshotBytes }: LoadedFiles,
    private readonly options: FilePolicyStoreOptions,
  ) {
    this.path = path;
    this.file = file;
    this.snapshot = snapshot;
    this.records = state.records;
    this.rev = state.rev;
    this.size = size;
    this.journalRecords = records.length;
    this.snapshotBytes = snapshotBytes;
    this.compactMinBytes = options.compactMinBytes ?? COMPACT_MIN_BYTES;
    // A snapshot of the first format holds everything in memory.
    for (const held of this.records.values()) this.historyInMemory += (held.versions?.length ?? 0) + (held.audit?.length ?? 0);
    const strings = new StringPool();
    const currentOf = (policyId: string) => this.records.get(policyId)?.current;
    for (const record of records) this.apply(revivedRecord(record, strings, currentOf));
  }

  /**
   * Locks `dataDir` (creating it if needed), then loads the snapshot and the journal after it, dropping
   * a torn last record.
   */
  static async open(dataDir: string, options: FilePolicyStoreOptions = {}): Promise<FilePolicyStore> {
    const dir = resolve(dataDir);
    await mkdirDurable(dir);
    let store: FilePolicyStore | undefined;
    const lock = await DataDirLock.acquire(dir, { ...options.lock, onLost: (reason) => store?.stopWrites(reason) });
    try {
      const loaded = await loadFiles(dir, options);
      try {
        store = new FilePolicyStore(lock, loaded, options);
      } catch (error) {
        await loaded.snapshot?.close();
        throw error;
      }
      return store;
    } catch (error) {
      await lock.release();
      throw error;
    }
  }

  list(): Policy[] {
    this.sorted ??= this.currentPolicies().sort(byPolicyId);
    return [...this.sorted];
  }

  get(policyId: string): Policy | undefined {
    return this.records.get(policyId)?.current;
  }

  async fetch(policyId: string): Promise<PolicyHead> {
    const record = this.records.get(policyId);
    return { policy: record?.current, head: record?.head ?? 0 };
  }

  async versions(policyId: string): Promise<PolicyVersion[]> {
    return (await this.history(policyId)).versions.map(versionRecordOf);
  }

  async audit(policyId: string): Promise<AuditEntry[]> {
    return (await this.history(policyId)).audit;
  }

  revision(): number {
    return this.rev;
  }

  storageStats(): StorageStats {
    return {
      snapshotBytes: this.snapshotBytes,
      journalBytes: this.size,
      journalRecords: this.journalRecords,
      compactions: this.compactions,
      appendedBytes: this.appendedBytes,
      historyInMemory: this.historyInMemory,
    };
  }

  /** Resolves once every change and compaction queued so far has finished. */
  async settled(): Promise<void> {
    await this.queue.catch(() => undefined);
  }

  onChange(listener: ChangeListener): () => void {
    return this.listeners.add(listener);
  }

  /** Waits with the changes that arrive while the journal is busy; they are written together (journal-batch.ts). */
  commit(change: PolicyChange): Promise<CommitResult> {
    return new Promise((settle, fail) => {
      this.waiting.push({ change, settle, fail });
      if (this.waiting.length > 1) return; // a write of the waiting changes is queued already
      // serial() refuses before running when the store has closed or failed: then no write took them.
      this.serial(() => this.writeWaiting()).catch((error: unknown) => {
        for (const w of this.waiting.splice(0)) w.fail(error);
      });
    });
  }

  /** Checks and writes every waiting change in one durable write; answers each (never throws). */
  private async writeWaiting(): Promise<void> {
    const batch = this.waiting.splice(0);
    const { records, answers } = checkBatch(batch.map((w) => w.change), this.rev, (id) => this.records.get(id));
    if (records.length > 0) {
      try {
        await this.append(records.map((r) => r.record));
      } catch (error) {
        batch.forEach((w, i) => (answers[i].ok ? w.fail(error) : w.settle(answers[i])));
        return;
      }
    }
    for (const r of records) {
      this.apply(r.record);
      this.emit(r.policyId, r.policy, r.existed);
    }
    batch.forEach((w, i) => w.settle(answers[i]));
    this.compactIfDue();
  }

  seedIfEmpty(load: () => Policy[] | Promise<Policy[]>): Promise<boolean> {
    return this.serial(async () => {
      if (this.rev > 0 || this.records.size > 0) return false;
      const policies = await load();
      if (policies.length === 0) return false;
      const record = seedRecord(policies);
      await this.append([record]);
      this.apply(record);
      this.listeners.emit({ policy_id: '', change: 'reloaded', version: 0, revision: this.rev, local: true }, logListenerError);
      this.compactIfDue();
      return true;
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue.catch(() => undefined);
    await this.compactor.close();
    await this.file.close();
    await this.snapshot?.close();
    await this.lock.release();
  }

  // -------------------------------------------------------------------------------------------------

  /** Throws (and refuses every later change) when another process has taken the data directory. */
  private async checkLock(): Promise<void> {
    if (this.lock.stillMine()) return;
    this.stopWrites('the data directory lock was removed or taken over by another server');
    throw new RlError('unavailable', `policy store is unavailable: ${this.failed!.message}`);
  }

  /** Refuses every later change (the data directory lock was lost: another server may write). */
  private stopWrites(reason: string): void {
    this.failed ??= new Error(reason);
  }

  private compactIfDue(): void {
    if (this.compactionQueued) return;
    if (this.size < Math.max(this.compactMinBytes, this.snapshotBytes, this.retryCompactionAt)) return;
    this.compactionQueued = true;
    // Queued behind the change that triggered it (whose caller is answered first), ahead of later ones.
    this.serial(() => this.compact()).catch((error: unknown) => {
      if (this.closed) return; // closing right after the change that asked for it: next start, then
      log.error('policy store: compaction failed; the journal is intact and keeps every change', { path: this.path, error: String(error) });
    });
  }

  /** Snapshot, then an empty journal; the steps and why each is safe are in the file comment. */
  private async compact(): Promise<void> {
    this.compactionQueued = false;
    const step = this.options.onCompactionStep ?? (() => undefined);
    let written: { bytes: number; index: SnapshotIndex };
    try {
      written = await writeSnapshot(this.compactor, { dir: dirname(this.path), journalBytes: this.size, rev: this.rev }, step);
    } catch (error) {
      this.retryCompactionAt = this.size * 2;
      throw error;
    }
    const { bytes, index } = written;
    step('snapshot-renamed');
    await fsyncDir(dirname(this.path));
    step('snapshot-durable');
    await this.adopt(index);
    await this.checkLock();
    try {
      await this.file.truncate(0);
      await this.file.datasync();
    } catch (error) {
      // The snapshot holds everything; the old records left in the journal are skipped at start-up.
      this.retryCompactionAt = this.size * 2;
      throw error;
    }
    this.size = 0;
    this.journalRecords = 0;
    this.snapshotBytes = bytes;
    this.retryCompactionAt = 0;
    this.compactions++;
    step('journal-truncated');
    log.info('policy store: journal compacted', { path: this.path, snapshot_bytes: bytes, revision: this.rev });
  }

  /**
   * Reads history from the snapshot just written from now on, dropping what memory held since the last
   * one: every record's history is in it (nothing was appended while it was written), at `index`.
   */
  private async adopt(index: SnapshotIndex): Promise<void> {
    const opened = await SnapshotReader.open(join(dirname(this.path), SNAPSHOT_FILE));
    if (!moveHistoryToSnapshot(this.records, index)) {
      await opened.close();
      log.error('policy store: the new snapshot does not list the ids the store holds; history stays where it was', { path: this.path });
      return;
    }
    this.historyInMemory = 0;
    const previous = this.snapshot;
    this.snapshot = opened;
    await previous?.close();
  }

  /**
   * The id's versions and audit trail: the part in the snapshot read from it, the rest from memory, both
   * as they are at the call (a compaction that ends meanwhile moves them, not changes them).
   */
  private async history(policyId: string): Promise<History> {
    const record = this.records.get(policyId);
    if (record === undefined) return { versions: [], audit: [] };
    const versions = record.versions?.slice() ?? [];
    const audit = record.audit?.slice() ?? [];
    if (record.coldLength === 0) return { versions, audit };
    if (this.closed) throw new RlError('unavailable', 'policy store is closed');
    const older = await this.snapshot!.history(record);
    return { versions: [...older.versions, ...versions], audit: [...older.audit, ...audit] };
  }

  /** The current policies, in record order. */
  private currentPolicies(): Policy[] {
    const policies: Policy[] = [];
    for (const record of this.records.values()) if (record.current !== undefined) policies.push(record.current);
    return policies;
  }

  private serial<T>(task: () => Promise<T>): Promise<T> {
    const run = this.queue.then(() => {
      if (this.closed) throw new RlError('unavailable', 'policy store is closed');
      if (this.failed) throw new RlError('unavailable', `policy store is unavailable: ${this.failed.message}`);
      return task();
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Writes the records completely and durably in one write (WRITE_THROUGH, else fdatasync); on failure restores the previous length. */
  private async append(records: JournalRecord[]): Promise<void> {
    await this.checkLock();
    const line = records.length === 1 ? encodeRecord(records[0]) : Buffer.concat(records.map(encodeRecord));
    try {
      let offset = 0;
      while (offset < line.length) {
        const { bytesWritten } = await this.file.write(line, offset, line.length - offset);
        offset += bytesWritten;
      }
      if (!WRITE_THROUGH) await this.file.datasync();
      this.size += line.length;
      this.appendedBytes += line.length;
      this.journalRecords += records.length;
    } catch (error) {
      // The record may be partly on disk. Cut it off so the next append does not follow garbage; if
      // even that fails, stop accepting changes (the torn tail is then dropped at the next start).
      try {
        await this.file.truncate(this.size);
        await this.file.datasync();
      } catch (truncateError) {
        this.failed = truncateError as Error;
      }
      log.error('policy journal: write failed', { path: this.path, error: String(error) });
      throw new RlError('unavailable', 'policy store write failed; the change was not saved');
    }
  }

  private apply(record: JournalRecord): void {
    applyRecord({ rev: this.rev, records: this.records }, record);
    for (const c of record.changes) this.historyInMemory += c.policy ? 2 : 1;
    this.rev = record.rev;
    if (this.sorted === undefined) return;
    // One change (a commit) is placed; a record of many (seeding) sorts again when next listed.
    if (record.changes.length === 1) resortOne(this.sorted, record.changes[0].policy_id, this.records.get(record.changes[0].policy_id)?.current);
    else this.sorted = undefined;
  }

  private emit(policyId: string, policy: Policy | null, existed: boolean): void {
    const change = policy ? (existed ? 'updated' : 'created') : 'deleted';
    this.listeners.emit({ policy_id: policyId, change, version: policy?.version ?? 0, revision: this.rev, local: true }, logListenerError);
  }
}

function logListenerError(error: unknown): void {
  log.error('policy change listener failed', { error: String((error as Error)?.stack ?? error) });
}
