import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { SnapshotIndex } from './journal-snapshot.js';

/**
 * Compaction's heavy part, writing the snapshot, runs in a worker thread: at 100,000 policies it
 * serialises tens of megabytes, which on the event loop would stall every decision meanwhile. The worker
 * rebuilds the state from the files (the last snapshot and the journal up to `journalBytes`), exactly as
 * a restart would, writes it to the temporary snapshot and fsyncs it; everything after (rename, fsync
 * of the directory, truncation of the journal) stays with the store, so the crash-safety argument of
 * FilePolicyStore is unchanged.
 */

export interface CompactionJob {
  /** The data directory. */
  dir: string;
  /** Bytes of the journal that hold acknowledged records: the worker reads no further. */
  journalBytes: number;
  /** The store's revision: the state the worker rebuilds must end exactly there. */
  rev: number;
}

/** What the worker posts. */
export type CompactionMessage =
  | { type: 'header-written' }
  | { type: 'done'; bytes: number; index: SnapshotIndex }
  | { type: 'failed'; message: string; stack?: string };

/** A temporary snapshot written: its size, and where each id's history line is in it. */
export interface CompactionResult {
  bytes: number;
  index: SnapshotIndex;
}

/** Built, the worker is the .js next to this one. */
const WORKER_URL = new URL('./journal-compaction-worker.js', import.meta.url);

/**
 * Under tsx (tests, tools: this module is TypeScript source) the worker is the .ts next to it, and a
 * worker thread does not inherit tsx's loader: it registers it first.
 */
function startWorker(): Worker {
  if (!import.meta.url.endsWith('.ts')) return new Worker(WORKER_URL);
  const source = new URL('./journal-compaction-worker.ts', import.meta.url).href;
  // tsx's ESM API (`tsx/esm/api`, whose CommonJS build cannot be imported from here).
  const tsx = pathToFileURL(join(dirname(createRequire(import.meta.url).resolve('tsx/package.json')), 'dist/esm/api/index.mjs')).href;
  const code = `import(${JSON.stringify(tsx)}).then(({ register }) => { register(); return import(${JSON.stringify(source)}); });`;
  return new Worker(code, { eval: true });
}

/** How long a worker waits for the next compaction before it exits (compactions come in bursts, if at all). */
const IDLE_MS = 30_000;

/**
 * Writes temporary snapshots in a worker thread, one job at a time (the store's writer queue runs them
 * one after the other). The thread is started by the first job and ends after IDLE_MS without one.
 */
export class CompactionWorker {
  private worker: Worker | undefined;
  private idle: NodeJS.Timeout | undefined;
  private pending:
    | { resolve: (result: CompactionResult) => void; reject: (error: Error) => void; afterHeader?: () => void; resume: Int32Array; afterHeaderFailed?: Error }
    | undefined;

  /**
   * Writes the temporary snapshot of `job`; resolves with its size and index. `afterHeader` runs on this
   * thread once the header is on disk, while the worker waits for it (crash tests stop the process there);
   * if it throws, the job fails with its error once the worker has finished.
   */
  run(job: CompactionJob, afterHeader?: () => void): Promise<CompactionResult> {
    if (this.pending) return Promise.reject(new Error('a compaction is already running'));
    clearTimeout(this.idle);
    const worker = (this.worker ??= this.start());
    // A running job keeps the process alive (the store waits for it); an idle thread does not.
    worker.ref();
    // The worker blocks on this flag after the header until afterHeader has run.
    const resume = new Int32Array(new SharedArrayBuffer(4));
    return new Promise<CompactionResult>((resolve, reject) => {
      this.pending = { resolve, reject, afterHeader, resume };
      worker.postMessage({ job, resume });
    });
  }

  /** Ends the thread (a running job fails). */
  async close(): Promise<void> {
    clearTimeout(this.idle);
    const worker = this.worker;
    this.worker = undefined;
    if (worker) await worker.terminate();
  }

  private start(): Worker {
    const worker = startWorker();
    worker.on('message', (message: CompactionMessage) => {
      const pending = this.pending;
      if (!pending) return;
      if (message.type === 'header-written') {
        try {
          pending.afterHeader?.();
        } catch (error) {
          // Thrown out of this listener it would be an uncaught exception: the job fails instead.
          pending.afterHeaderFailed = error instanceof Error ? error : new Error(String(error));
        } finally {
          Atomics.store(pending.resume, 0, 1);
          Atomics.notify(pending.resume, 0);
        }
        return;
      }
      this.pending = undefined;
      worker.unref();
      if (pending.afterHeaderFailed) pending.reject(pending.afterHeaderFailed);
      else if (message.type === 'done') pending.resolve({ bytes: message.bytes, index: message.index });
      else pending.reject(workerError(message.message, message.stack));
      this.idle = setTimeout(() => void this.close(), IDLE_MS).unref();
    });
    const gone = (error: Error) => {
      if (this.worker === worker) this.worker = undefined;
      const pending = this.pending;
      this.pending = undefined;
      pending?.reject(error);
    };
    worker.on('error', gone);
    worker.on('exit', (code) => gone(new Error(`the compaction worker exited (code ${code})`)));
    return worker;
  }
}

/** The worker's error as an Error of this thread: its message as the message, its stack kept. */
function workerError(message: string, stack: string | undefined): Error {
  const error = new Error(message);
  if (stack !== undefined) error.stack = stack;
  return error;
}
