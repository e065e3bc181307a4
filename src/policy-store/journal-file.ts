import { hash } from 'node:crypto';
import { constants as fsConstants, promises as fsp } from 'node:fs';
import { dirname, join } from 'node:path';
import { log } from '../util/log.js';
import type { JournalRecord } from './journal-state.js';

/**
 * The journal file of FilePolicyStore: its name, how a record is encoded and checked, how the file is
 * opened and parsed at start-up, and the durable directory operations it needs.
 *
 * Journal format: `<dataDir>/policies.journal`, one record per line:
 *
 *     <16 hex digits: first 8 bytes of SHA-256 of the JSON text> <space> <JSON text> \n
 *
 * where the JSON is `{"rev": n, "changes": [{"policy_id", "head", "policy": Policy|null, "audit": AuditEntry}]}`.
 * A record is one atomic change: the new current policy (null = deleted), which is also the new
 * version's snapshot, and its audit entry. Seeding writes every file policy in ONE record.
 *
 * Crash safety:
 * - A change is acknowledged only after its record was written completely and durably: the journal is
 *   opened with O_DSYNC (each write returns once its data is on disk, as write + `fdatasync` would),
 *   or, on a platform without O_DSYNC, each append is `fdatasync`ed; the journal file's directory
 *   entry is fsynced when the file is created. So an acknowledged change is on disk whatever happens
 *   to the process afterwards.
 * - Records are appended by one writer at a time (a queue); the changes waiting for it go in one
 *   write, a record each (group commit: journal-batch.ts). So only the LAST write can be incomplete
 *   after `kill -9` or a power cut: cut short, missing its newline, or (on some file systems) padded
 *   with zeros. Its complete records were never acknowledged either; kept, they are changes whose
 *   answer was lost, as after a crash between a write and its reply.
 * - At start-up the journal is read record by record; a trailing region that does not parse as
 *   complete, checksummed records is such a torn write of changes never acknowledged: it is logged,
 *   truncated away (and the truncation fsynced) before anything new is appended. A bad record FOLLOWED by good ones cannot come from a torn append: that is
 *   corruption, and the store refuses to start rather than silently drop acknowledged changes.
 * - Everything (current, versions, audit) is replayed from the same records, so they cannot disagree.
 */

export const JOURNAL_FILE = 'policies.journal';

/**
 * O_DSYNC where the platform has it: each write to the journal returns once its data is on disk, as a
 * write followed by fdatasync would, in one call to the libuv pool instead of two. Elsewhere 0, and
 * every append is fdatasynced.
 */
export const WRITE_THROUGH = fsConstants.O_DSYNC ?? 0;

export class JournalCorruptError extends Error {
  constructor(readonly path: string, readonly line: number, problem: string) {
    super(`${path}: record ${line} is corrupt (${problem}) and later records follow it; refusing to start`);
    this.name = 'JournalCorruptError';
  }
}

// ---------------------------------------------------------------------------------------------------
// Encoding

function checksum(json: string): string {
  // One-shot: no Hash object a record (this runs on every change and every record at start-up).
  return hash('sha256', json, 'hex').slice(0, 16);
}

export function encodeRecord(record: JournalRecord): Buffer {
  const json = JSON.stringify(record);
  return Buffer.from(`${checksum(json)} ${json}\n`, 'utf8');
}

/**
 * Opens the journal for appending after reading the records that follow revision `afterRev` (the
 * snapshot's): a torn last write is cut off, and a compaction stopped before its truncation finished.
 */
export async function openJournal(
  dir: string,
  afterRev: number,
  onTornTail: ((info: { path: string; droppedBytes: number }) => void) | undefined,
): Promise<{ path: string; file: fsp.FileHandle; records: JournalRecord[]; size: number }> {
    const path = join(dir, JOURNAL_FILE);
    let created = false;
    let text: Buffer;
    try {
      text = await fsp.readFile(path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      text = Buffer.alloc(0);
      created = true;
    }
    const { records, goodBytes, skipped } = parseJournal(path, text, afterRev);
    const file = await fsp.open(path, fsConstants.O_WRONLY | fsConstants.O_APPEND | fsConstants.O_CREAT | WRITE_THROUGH, 0o644);
    let size = goodBytes;
    try {
      if (records.length === 0 && skipped > 0) {
        // A compaction stopped between its durable snapshot and the truncation: finish it.
        await file.truncate(0);
        await file.datasync();
        size = 0;
      } else if (goodBytes < text.length) {
        const dropped = text.length - goodBytes;
        if (onTornTail) onTornTail({ path, droppedBytes: dropped });
        else log.warn('policy journal: dropping a torn last record (a change that was never acknowledged)', { path, dropped_bytes: dropped });
        await file.truncate(goodBytes);
        await file.datasync();
      }
      if (created) await fsyncDir(dir);
    } catch (error) {
      await file.close();
      throw error;
    }
    return { path, file, records, size };
}

/**
 * Parses the journal: every complete, checksummed record up to the first one that is not. Returns the
 * records after revision `afterRev` (what the snapshot holds), how many up to it were skipped, and the
 * byte length of all good records. Revisions must follow each other, the first at most `afterRev + 1`.
 * A bad region is accepted as a torn tail only when no good record follows it.
 */
export function parseJournal(
  path: string,
  data: Buffer,
  afterRev = 0,
): { records: JournalRecord[]; goodBytes: number; skipped: number } {
  const records: JournalRecord[] = [];
  let skipped = 0;
  let pos = 0;
  let lineNo = 0;
  let expectedRev: number | undefined;
  while (pos < data.length) {
    lineNo++;
    const nl = data.indexOf(0x0a, pos);
    if (nl < 0) break; // no newline: the last append was cut short
    const problem = checkRecord(data.toString('utf8', pos, nl), expectedRev ?? afterRev + 1, expectedRev === undefined);
    if (typeof problem === 'string') {
      // Only a line whose checksum fails can be a torn write; a checksummed one is what was written.
      if (!TORN.has(problem) || hasGoodRecordAfter(data, nl + 1)) throw new JournalCorruptError(path, lineNo, problem);
      break;
    }
    if (problem.rev <= afterRev) skipped++;
    else records.push(problem);
    expectedRev = problem.rev + 1;
    pos = nl + 1;
  }
  return { records, goodBytes: pos, skipped };
}

/** What checkRecord says of a line an interrupted append can leave. */
const TORN = new Set(['no checksum', 'checksum mismatch']);

function hasGoodRecordAfter(data: Buffer, from: number): boolean {
  let pos = from;
  while (pos < data.length) {
    const nl = data.indexOf(0x0a, pos);
    if (nl < 0) return false;
    const line = data.toString('utf8', pos, nl);
    const space = line.indexOf(' ');
    if (space === 16 && checksum(line.slice(17)) === line.slice(0, 16)) return true;
    pos = nl + 1;
  }
  return false;
}

/**
 * The decoded record, or a description of what is wrong with the line. Its rev must be `expectedRev`,
 * or, for the first record (`first`), anything from 1 to `expectedRev` (the snapshot may hold it).
 */
function checkRecord(line: string, expectedRev: number, first: boolean): JournalRecord | string {
  if (line.length < 18 || line[16] !== ' ') return 'no checksum';
  const json = line.slice(17);
  if (checksum(json) !== line.slice(0, 16)) return 'checksum mismatch';
  let record: unknown;
  try {
    record = JSON.parse(json);
  } catch {
    return 'invalid JSON';
  }
  const r = record as JournalRecord;
  const revOk = first ? Number.isSafeInteger(r?.rev) && r.rev >= 1 && r.rev <= expectedRev : r?.rev === expectedRev;
  if (typeof r !== 'object' || r === null || !revOk || !Array.isArray(r.changes)) {
    return first && expectedRev > 1
      ? `not a journal record with a rev from 1 to ${expectedRev} (the snapshot ends at ${expectedRev - 1})`
      : `not a journal record with rev ${expectedRev}`;
  }
  for (const c of r.changes) {
    if (typeof c?.policy_id !== 'string' || typeof c.head !== 'number' || typeof c.audit !== 'object' || c.audit === null) {
      return 'malformed change';
    }
  }
  return r;
}

// ---------------------------------------------------------------------------------------------------
// Directories

export async function mkdirDurable(dir: string): Promise<void> {
  try {
    await fsp.access(dir);
    return;
  } catch {
    // create below
  }
  const parent = dirname(dir);
  if (parent !== dir) await mkdirDurable(parent);
  try {
    await fsp.mkdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return;
  }
  await fsyncDir(parent);
}

export async function fsyncDir(dir: string): Promise<void> {
  let handle: fsp.FileHandle | undefined;
  try {
    handle = await fsp.open(dir, fsConstants.O_RDONLY);
    await handle.sync();
  } catch (error) {
    // Some platforms cannot fsync a directory (EISDIR/EINVAL/EPERM); the file data itself is synced.
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'EISDIR' && code !== 'EINVAL' && code !== 'EPERM') throw error;
  } finally {
    await handle?.close();
  }
}
