import { promises as fsp } from 'node:fs';
import { frameOf, parseHistory, parseSnapshot, SnapshotCorruptError, SnapshotScan, type History } from './journal-snapshot.js';
import type { PolicyRecord, StoreState } from './journal-state.js';
import { StringPool } from '../policy/stored-policy.js';

/** Bytes read at a time at start-up (two buffers: the next chunk is read while one is parsed). */
const CHUNK_BYTES = 256 * 1024;

/** The last bytes read first, for the trailer (a few hundred bytes in a sound file). */
const TAIL_BYTES = 4096;

/**
 * The snapshot a store opened (journal-snapshot.ts), kept open to read an id's history line when
 * someone asks for it. Closing waits for the reads under way, so a store may swap it for a newer
 * snapshot at any time.
 */
export class SnapshotReader {
  private reads = 0;
  private drained: (() => void) | undefined;

  private constructor(
    readonly path: string,
    private readonly file: fsp.FileHandle,
  ) {}

  /**
   * Opens the snapshot at `path` and loads it: read in chunks, hashed and its current lines parsed as
   * they arrive (the file is never held whole: memory first touched costs more than the parse);
   * undefined when there is none.
   */
  static async load(path: string): Promise<{ reader: SnapshotReader; state: StoreState; bytes: number } | undefined> {
    let file: fsp.FileHandle;
    try {
      file = await fsp.open(path, 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    try {
      const { size } = await file.stat();
      return { reader: new SnapshotReader(path, file), state: await scan(path, file, size), bytes: size };
    } catch (error) {
      await file.close();
      throw error;
    }
  }

  /** Opens the snapshot at `path` for history reads only: the compaction that wrote it knows its index. */
  static async open(path: string): Promise<SnapshotReader> {
    return new SnapshotReader(path, await fsp.open(path, 'r'));
  }

  /** The id's versions and audit trail up to this snapshot (`record`'s part in it, as the record says now). */
  async history(record: PolicyRecord): Promise<History> {
    const { coldAt, coldLength, coldCurrent } = record;
    if (coldLength === 0) return { versions: [], audit: [] };
    this.reads++;
    try {
      const line = await readFully(this.path, this.file, Buffer.allocUnsafe(coldLength), coldAt);
      return parseHistory(this.path, line.toString('utf8'), coldCurrent, new StringPool());
    } finally {
      if (--this.reads === 0) this.drained?.();
    }
  }

  /** Closes the file once the reads under way have finished. */
  async close(): Promise<void> {
    if (this.reads > 0) await new Promise<void>((resolve) => (this.drained = resolve));
    await this.file.close();
  }
}

/** The state of the snapshot in `file` (`size` bytes). */
async function scan(path: string, file: fsp.FileHandle, size: number): Promise<StoreState> {
  const buffers = [Buffer.allocUnsafeSlow(CHUNK_BYTES), Buffer.allocUnsafeSlow(CHUNK_BYTES)];
  const tail = await readFully(path, file, Buffer.allocUnsafe(Math.min(size, TAIL_BYTES)), size - Math.min(size, TAIL_BYTES));
  const first = await readFully(path, file, buffers[0].subarray(0, Math.min(size, CHUNK_BYTES)), 0);
  const frame = frameOf(path, first, tail, size);
  // The first format, or a damaged first line: read whole, the digest judged first.
  if (frame.header?.snapshot !== 2) return parseSnapshot(path, await readFully(path, file, Buffer.allocUnsafe(size), 0));
  const scanner = new SnapshotScan(path, frame);
  const end = frame.trailerStart;
  let chunk = first.subarray(0, Math.min(first.length, end));
  for (let offset = 0, k = 0; ; ) {
    const next = offset + chunk.length;
    // The next chunk is read (off this thread) while this one is parsed.
    const reading = next < end ? readFully(path, file, buffers[++k % 2].subarray(0, Math.min(CHUNK_BYTES, end - next)), next) : undefined;
    scanner.feed(chunk, offset);
    if (reading === undefined) break;
    [chunk, offset] = [await reading, next];
  }
  return scanner.finish();
}

/** Fills `buffer` from `file` at `position`; a file shorter than that is corrupt (it was cut meanwhile). */
async function readFully(path: string, file: fsp.FileHandle, buffer: Buffer, position: number): Promise<Buffer> {
  for (let done = 0; done < buffer.length; ) {
    const { bytesRead } = await file.read(buffer, done, buffer.length - done, position + done);
    if (bytesRead === 0) throw new SnapshotCorruptError(path, 'it ends before the bytes it refers to');
    done += bytesRead;
  }
  return buffer;
}
