import { createHash } from 'node:crypto';
import { createReadStream, promises as fsp } from 'node:fs';
import { dirname } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { MemoryKeyspace, Slot } from '../emulator/keyspace.js';
import { SnapshotChunk } from './snapshot-chunk.js';
import { CounterSnapshotUnusableError, headerLine, parseHeader, parseSlot, parseTrailer, trailerLine } from './snapshot-format.js';

/**
 * Writing and reading the counter snapshot file (snapshot-format.ts). Writing never holds the event loop
 * for long: the key space is read in slices of at most `sliceMs`, one per turn of the loop, so decisions
 * run between them. Each key is written as it stands when its slice reads it (the Map's
 * iterator sees keys added meanwhile; a key deleted and written again appears twice, the later line
 * the newer). The file is written under a temporary name, fsynced, then renamed: a file in place is
 * always complete.
 */

/** A chunk this large is written out (and its buffer reused); smaller ones keep growing across slices. */
const FLUSH_BYTES = 1 << 20;

export interface WrittenSnapshot {
  keys: number;
  startedAt: number;
}

/** Writes every live key of `space` to `file`, in slices of at most `sliceMs` of the event loop. */
export async function writeSnapshot(space: MemoryKeyspace, file: string, keyPrefix: string, sliceMs: number): Promise<WrittenSnapshot> {
  const temp = `${file}.tmp`;
  const startedAt = space.now();
  const digest = createHash('sha256');
  const handle = await fsp.open(temp, 'w');
  let keys = 0;
  try {
    const write = async (text: string | Buffer) => {
      digest.update(text);
      await (typeof text === 'string' ? handle.write(text) : handle.write(text));
    };
    await write(headerLine(keyPrefix, startedAt));
    const entries = space.slots.entries();
    const chunk = new SnapshotChunk();
    for (;;) {
      const slice = readSlice(entries, chunk, space.now(), sliceMs);
      keys += slice.keys;
      if (slice.done) break;
      // One slice per turn of the event loop, so a decision waits at most one slice; the file is written
      // (off the loop) once a chunk has grown, and the chunk is reused once that write is done.
      if (chunk.length >= FLUSH_BYTES) {
        await write(chunk.bytes);
        chunk.reset();
      } else {
        await nextTurn();
      }
    }
    if (chunk.length > 0) await write(chunk.bytes);
    await handle.write(trailerLine(keys, digest.digest('hex')));
    await handle.sync();
  } catch (error) {
    await handle.close();
    await fsp.rm(temp, { force: true });
    throw error;
  }
  await handle.close();
  await fsp.rename(temp, file);
  await syncDirectory(dirname(file));
  return { keys, startedAt };
}

/** The lines of the next keys added to `chunk`, until `sliceMs` have passed; expired keys are left out. */
function readSlice(entries: Iterator<[string, Slot]>, chunk: SnapshotChunk, now: number, sliceMs: number): { keys: number; done: boolean } {
  const deadline = performance.now() + sliceMs;
  let keys = 0;
  for (let looked = 1; ; looked++) {
    // The clock is read every 32 keys: a read costs about as much as a key's line.
    if ((looked & 31) === 0 && performance.now() > deadline) return { keys, done: false };
    const next = entries.next();
    if (next.done) return { keys, done: true };
    const [key, slot] = next.value;
    if (slot.expireAt > now) {
      chunk.add(key, slot);
      keys++;
    }
  }
}

/** A rename is durable once its directory is synced (where the platform lets a directory be opened). */
async function syncDirectory(dir: string): Promise<void> {
  let handle: fsp.FileHandle | undefined;
  try {
    handle = await fsp.open(dir, 'r');
    await handle.sync();
  } catch {
    // Not every platform syncs a directory; the rename itself is still atomic.
  } finally {
    await handle?.close();
  }
}

export interface ReadSnapshot {
  /** Live keys in file order (a later line for the same key is newer). */
  entries: [string, Slot][];
  /** Keys that had expired by `now` and were left out. */
  expired: number;
  startedAt: number;
}

/**
 * Reads `file` whole before anything is restored: a snapshot is used entirely or not at all. undefined
 * when there is none; CounterSnapshotUnusableError when it is corrupt (digest, count, truncation, a line
 * that is no counter) or of another format version or key prefix.
 */
export async function readSnapshot(file: string, keyPrefix: string, now: number): Promise<ReadSnapshot | undefined> {
  const stream = createReadStream(file, { encoding: 'utf8' });
  const opened = await new Promise<boolean>((resolve, reject) => {
    stream.once('ready', () => resolve(true));
    stream.once('error', (error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? resolve(false) : reject(error)));
  });
  if (!opened) return undefined;
  const lines = createInterface({ input: stream, crlfDelay: Infinity });
  const digest = createHash('sha256');
  const entries: [string, Slot][] = [];
  let header: ReturnType<typeof parseHeader> | undefined;
  let trailer: ReturnType<typeof parseTrailer>;
  let expired = 0;
  let lineNumber = 0;
  try {
    for await (const line of lines) {
      lineNumber++;
      if (trailer !== undefined) throw new CounterSnapshotUnusableError(`line ${lineNumber} follows its trailer`);
      if (header === undefined) {
        header = parseHeader(line, keyPrefix);
      } else {
        trailer = parseTrailer(line);
        if (trailer !== undefined) continue;
        const entry = parseSlot(line, lineNumber);
        if (entry[1].expireAt > now) entries.push(entry);
        else expired++;
      }
      digest.update(`${line}\n`);
    }
  } finally {
    lines.close();
    stream.destroy();
  }
  if (header === undefined) throw new CounterSnapshotUnusableError('it is empty');
  if (trailer === undefined) throw new CounterSnapshotUnusableError(`it ends at line ${lineNumber} without its trailer (truncated)`);
  if (trailer.keys !== lineNumber - 2) throw new CounterSnapshotUnusableError(`its trailer counts ${trailer.keys} keys, the file holds ${lineNumber - 2}`);
  if (trailer.sha256 !== digest.digest('hex')) throw new CounterSnapshotUnusableError('its digest does not match its content');
  return { entries, expired, startedAt: header.started_at };
}
