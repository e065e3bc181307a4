import type { LockOptions } from './journal-lock.js';

/** What a FilePolicyStore is opened with, and what it reports of its files. */

/** The points of a compaction a crash test can stop the process at (see the file comment). */
export type CompactionStep = 'snapshot-started' | 'snapshot-written' | 'snapshot-renamed' | 'snapshot-durable' | 'journal-truncated';


/** Journal bytes below which the journal is never compacted. */
export const COMPACT_MIN_BYTES = 4 * 1024 * 1024;

export interface FilePolicyStoreOptions {
  /** Called instead of the default warning log when a torn tail is dropped at start-up (tests). */
  onTornTail?: (info: { path: string; droppedBytes: number }) => void;
  /** Journal bytes below which no compaction happens (default COMPACT_MIN_BYTES; tests set it low). */
  compactMinBytes?: number;
  /** Called after each compaction step (crash tests kill the process there). */
  onCompactionStep?: (step: CompactionStep) => void;
  /** Data directory lock timings (tests). */
  lock?: Omit<LockOptions, 'onLost'>;
}

/** What the data directory holds now (tests, logs). */
export interface StorageStats {
  snapshotBytes: number;
  journalBytes: number;
  /** Records in the journal, i.e. changes since the last snapshot (replayed at start-up). */
  journalRecords: number;
  /** Compactions this instance has completed. */
  compactions: number;
  /** Journal bytes this instance has appended (what the journal would hold without compaction). */
  appendedBytes: number;
  /** Versions and audit entries held in memory: those after the snapshot (the rest is read from it when asked). */
  historyInMemory: number;
}
