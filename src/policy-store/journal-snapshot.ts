import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { revivedAuditEntry, type AuditEntry } from './policy-store.js';
import { parseSnapshotV1 } from './journal-snapshot-v1.js';
import { isRef, parseLine, SnapshotCorruptError, versionOf, type Ref } from './journal-snapshot-parts.js';
import { hasRecent, policyRecord, type PolicyRecord, type StoreState } from './journal-state.js';
import { revivedPolicy, StringPool } from '../policy/stored-policy.js';
import type { Policy } from '../policy/types.js';

/**
 * The snapshot of a FilePolicyStore: the whole state (every policy id's head, current policy, versions
 * and audit trail) at one revision, written by compaction so the journal can start over.
 *
 * Format 2, one JSON value per line:
 *
 *     {"snapshot":2,"rev":R}                                               header
 *     {"h":"<policy_id>","v":[<Policy|ref>, ...],"a":[<AuditEntry>, ...]}  history: a line per id, its
 *                                                                          versions ascending, its
 *                                                                          audit trail oldest first
 *     {"p":"<policy_id>","head":n,"current":<Policy>|null,"at":A,"len":L}  current: a line per id
 *     {"end":R,"ids":N,"current_at":C,"sha256":"<hex of every byte before this line>"}
 *
 * A ref is `{"$v":n}`: version n of the same id (in the history line, or the current policy) written
 * once instead of again. An id's versions include its current policy (as a ref), and an audit entry's
 * old and new values are refs to versions, so each policy is written about once. `at` and `len` are the
 * byte offset and length (newline excluded) of the id's history line; `current_at` is the offset of the
 * first current line.
 *
 * Start-up (SnapshotReader, journal-snapshot-reader.ts) parses the current lines only, which is what
 * decisions need, while it checks the digest of the whole file, and keeps the file open: an id's history
 * line is read and parsed when someone asks for its versions or audit trail. The first format, which
 * had every version and audit entry parsed at start-up, is still read (journal-snapshot-v1.ts).
 *
 * The file is written under a temporary name, fsynced, then renamed into place (see
 * FilePolicyStore.compact), so a snapshot on disk is always complete; the trailer's digest and counts
 * catch anything else (a truncated copy, bit rot) and make the store refuse to start.
 */

export const SNAPSHOT_FILE = 'policies.snapshot';
export const SNAPSHOT_TEMP_FILE = 'policies.snapshot.tmp';

export { SnapshotCorruptError };

/** An id's versions (ascending) and audit trail (oldest first). */
export interface History {
  versions: Policy[];
  audit: AuditEntry[];
}

/**
 * Where each id's history line lies in a snapshot just written: ids in file order, and for each its
 * offset and length (a plain array: its small integers reach the store's records as such, not boxed).
 */
export interface SnapshotIndex {
  ids: string[];
  ranges: number[];
}

/** Bytes gathered before one write: big enough to be cheap, small enough to yield to other work often. */
const CHUNK_BYTES = 256 * 1024;

const NEWLINE = Buffer.from('\n');

/** The snapshot the state was read from: `line(record)` is a record's history line in it. */
export interface HistorySource {
  path: string;
  line(record: PolicyRecord): Buffer;
}

/**
 * Writes `state` to `path` (created or truncated) and fsyncs it; returns its size in bytes and where each
 * id's history line is. A record's older history is in `source` (its line copied as it is when nothing
 * happened to the id since). `afterHeader` runs once the header is on disk (crash tests stop the process
 * there).
 */
export async function writeSnapshot(
  path: string,
  state: StoreState,
  source: HistorySource,
  afterHeader?: () => void,
): Promise<{ bytes: number; index: SnapshotIndex }> {
  const file = await fsp.open(path, 'w', 0o644);
  try {
    const hash = createHash('sha256');
    let written = 0;
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    const flush = async () => {
      if (pending.length === 0) return;
      const buffer = Buffer.concat(pending, pendingBytes);
      pending = [];
      pendingBytes = 0;
      hash.update(buffer);
      await writeAll(file, buffer);
      written += buffer.length;
    };
    /** Appends one line; returns its offset in the file. */
    const line = async (content: Buffer | string): Promise<number> => {
      const at = written + pendingBytes;
      const buffer = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
      pending.push(buffer, NEWLINE);
      pendingBytes += buffer.length + 1;
      if (pendingBytes >= CHUNK_BYTES) await flush();
      return at;
    };

    await line(JSON.stringify({ snapshot: 2, rev: state.rev }));
    await flush();
    afterHeader?.();
    const ids: string[] = [];
    const ranges: number[] = [];
    const strings = new StringPool();
    for (const [policyId, record] of state.records) {
      ids.push(policyId);
      let text: Buffer | string;
      if (!hasRecent(record)) {
        if (record.coldLength === 0) {
          ranges.push(0, 0);
          continue;
        }
        text = source.line(record);
      } else {
        const older = record.coldLength > 0 ? parseHistory(source.path, source.line(record).toString('utf8'), record.coldCurrent, strings) : undefined;
        text = encodeHistory(policyId, [...(older?.versions ?? []), ...(record.versions ?? [])], [...(older?.audit ?? []), ...(record.audit ?? [])], record.current);
      }
      ranges.push(await line(text), typeof text === 'string' ? Buffer.byteLength(text) : text.length);
    }
    const currentAt = written + pendingBytes;
    let k = 0;
    for (const [policyId, record] of state.records) {
      await line(JSON.stringify({ p: policyId, head: record.head, current: record.current ?? null, at: ranges[2 * k], len: ranges[2 * k + 1] }));
      k++;
    }
    await flush();
    const trailer = Buffer.from(`${JSON.stringify({ end: state.rev, ids: ids.length, current_at: currentAt, sha256: hash.digest('hex') })}\n`, 'utf8');
    await writeAll(file, trailer);
    await file.datasync();
    return { bytes: written + trailer.length, index: { ids, ranges } };
  } finally {
    await file.close();
  }
}

/** An id's history line: every version and audit entry, each policy written once (see the file comment). */
function encodeHistory(policyId: string, versions: readonly Policy[], audit: readonly AuditEntry[], current: Policy | undefined): string {
  // JSON of each policy object met (stores share one object between a version and the audit values that hold it).
  const texts = new Map<Policy, string>();
  const jsonOf = (policy: Policy): string => {
    let text = texts.get(policy);
    if (text === undefined) texts.set(policy, (text = JSON.stringify(policy)));
    return text;
  };
  const byVersion = new Map<number, string>();
  for (const version of versions) byVersion.set(version.version, jsonOf(version));
  const ref = (value: Policy | null): Ref => (value === null || byVersion.get(value.version) !== jsonOf(value) ? value : { $v: value.version });
  const currentJson = current && jsonOf(current);
  const v = versions.map((version) => (version.version === current?.version && jsonOf(version) === currentJson ? `{"$v":${version.version}}` : jsonOf(version)));
  const a = audit.map((entry) => JSON.stringify({ ...entry, old_value: ref(entry.old_value), new_value: ref(entry.new_value) }));
  return `{"h":${JSON.stringify(policyId)},"v":[${v.join(',')}],"a":[${a.join(',')}]}`;
}

/**
 * An id's history line parsed: versions revived (the ref to the current policy is `current`, the object
 * the store holds), audit values the very version objects they refer to.
 */
export function parseHistory(path: string, text: string, current: Policy | undefined, strings: StringPool): History {
  const line = parseLine(path, text) as { h?: unknown; v?: unknown; a?: unknown };
  if (typeof line.h !== 'string' || !Array.isArray(line.v) || !Array.isArray(line.a)) throw new SnapshotCorruptError(path, 'a history line is not one');
  const policyId = line.h;
  const versions = (line.v as Ref[]).map((value): Policy => {
    if (value === null || typeof value !== 'object') throw new SnapshotCorruptError(path, `${policyId}: a version is not a policy`);
    if (!isRef(value)) return revivedPolicy(value, strings);
    if (current?.version !== value.$v) throw new SnapshotCorruptError(path, `${policyId}: a reference to a version it does not hold`);
    return current;
  });
  const resolve = (value: Ref): Policy | null => {
    if (value === null) return null;
    if (!isRef(value)) return revivedPolicy(value, strings);
    const found = versionOf(versions, value.$v);
    if (!found) throw new SnapshotCorruptError(path, `${policyId}: a reference to a version it does not hold`);
    return found;
  };
  const audit = (line.a as AuditEntry[]).map((entry) => revivedAuditEntry(entry, resolve(entry.old_value as Ref), resolve(entry.new_value as Ref), strings));
  return { versions, audit };
}

/** Where a snapshot's parts are, from its first and last lines. */
export interface SnapshotFrame {
  /** The header's `snapshot` (the format) and `rev`; undefined when the first line is not a header. */
  header: { snapshot: unknown; rev: number } | undefined;
  headerEnd: number;
  trailer: Record<string, unknown> & { sha256: string };
  trailerStart: number;
}

/**
 * The frame of a snapshot of `size` bytes from its first bytes (`head`, holding the header line) and
 * its last (`tail`, holding the trailer line; both may be the whole file).
 */
export function frameOf(path: string, head: Buffer, tail: Buffer, size: number): SnapshotFrame {
  if (size === 0 || tail[tail.length - 1] !== 0x0a) throw new SnapshotCorruptError(path, 'it does not end with a complete line');
  const inTail = tail.lastIndexOf(0x0a, tail.length - 2) + 1;
  if (inTail === 0 && tail.length < size) throw new SnapshotCorruptError(path, 'no trailer');
  const trailer = parseLine(path, tail.toString('utf8', inTail, tail.length - 1)) as SnapshotFrame['trailer'];
  if (typeof trailer.sha256 !== 'string') throw new SnapshotCorruptError(path, 'no trailer');
  const headerEnd = head.indexOf(0x0a);
  let header: SnapshotFrame['header'];
  try {
    const parsed = headerEnd < 0 ? undefined : (JSON.parse(head.toString('utf8', 0, headerEnd)) as SnapshotFrame['header']);
    if (typeof parsed?.rev === 'number') header = parsed;
  } catch {
    // reported by the caller, after the digest
  }
  return { header, headerEnd, trailer, trailerStart: size - tail.length + inTail };
}

/** The state of the snapshot whose bytes are `data` (the compaction worker reads the whole file). */
export function parseSnapshot(path: string, data: Buffer): StoreState {
  const frame = frameOf(path, data, data, data.length);
  if (frame.header?.snapshot === 2) {
    const scan = new SnapshotScan(path, frame);
    scan.feed(data.subarray(0, frame.trailerStart), 0);
    return scan.finish();
  }
  // Any other first line: a damaged file is reported as such before its header is judged.
  if (createHash('sha256').update(data.subarray(0, frame.trailerStart)).digest('hex') !== frame.trailer.sha256) {
    throw new SnapshotCorruptError(path, 'digest mismatch');
  }
  if (frame.header?.snapshot !== 1) throw new SnapshotCorruptError(path, 'no header');
  return parseSnapshotV1(path, data, frame.header.rev, frame.headerEnd, frame.trailerStart, frame.trailer);
}

/** The snapshot at `path` and its bytes, whole (the compaction worker); undefined when there is none. */
export async function readSnapshot(path: string): Promise<{ state: StoreState; bytes: number; data: Buffer } | undefined> {
  let data: Buffer;
  try {
    data = await fsp.readFile(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  return { state: parseSnapshot(path, data), bytes: data.length, data };
}

/** Current-section text parsed at a time: below V8's large-object size, so each piece is a short-lived young string. */
const PARSE_BYTES = 64 * 1024;

/**
 * A format-2 snapshot read in order, chunk by chunk: every byte before the trailer is hashed, the
 * current lines are parsed into records as they arrive. A problem found in the content is reported
 * once the digest is known to match (a damaged file is reported as damaged).
 */
export class SnapshotScan {
  private readonly hash = createHash('sha256');
  private readonly state: StoreState;
  private readonly currentAt: number;
  private readonly strings = new StringPool();
  /** The start of a current line that the last chunk cut. */
  private carry: Buffer | undefined;
  private problem: string | undefined;

  constructor(
    private readonly path: string,
    private readonly frame: SnapshotFrame,
  ) {
    const { header, headerEnd, trailer, trailerStart } = frame;
    const currentAt = trailer.current_at;
    if (typeof trailer.ids !== 'number' || typeof currentAt !== 'number' || currentAt <= headerEnd || currentAt > trailerStart || trailer.end !== header?.rev) {
      throw new SnapshotCorruptError(path, 'the trailer does not match the content');
    }
    this.currentAt = currentAt;
    this.state = { rev: header!.rev, records: new Map() };
  }

  /** The file's bytes from `offset`, following the previous chunk; nothing past the trailer's start. */
  feed(chunk: Buffer, offset: number): void {
    this.hash.update(chunk);
    const from = this.currentAt - offset;
    if (from >= chunk.length || this.problem !== undefined) return;
    let lines = from > 0 ? chunk.subarray(from) : chunk;
    if (this.carry !== undefined) {
      // The line the last chunk cut, completed alone (the rest of this chunk is parsed where it is).
      const rest = lines.indexOf(0x0a) + 1;
      if (rest === 0) {
        this.carry = Buffer.concat([this.carry, lines]);
        return;
      }
      const line = Buffer.concat([this.carry, lines.subarray(0, rest - 1)]);
      this.carry = undefined;
      this.parsePiece(line.toString('utf8'));
      lines = lines.subarray(rest);
    }
    const end = lines.lastIndexOf(0x0a) + 1;
    // Copied: the caller reuses its chunk buffers.
    if (end < lines.length) this.carry = Buffer.from(lines.subarray(end));
    for (let start = 0; start < end && this.problem === undefined; ) {
      const pieceEnd = start + PARSE_BYTES < end ? lines.indexOf(0x0a, start + PARSE_BYTES) + 1 : end;
      this.parsePiece(lines.toString('utf8', start, pieceEnd - 1));
      start = pieceEnd;
    }
  }

  /** The state, once every byte up to the trailer was fed. */
  finish(): StoreState {
    if (this.hash.digest('hex') !== this.frame.trailer.sha256) throw new SnapshotCorruptError(this.path, 'digest mismatch');
    if (this.problem !== undefined) throw new SnapshotCorruptError(this.path, this.problem);
    if (this.carry !== undefined || this.state.records.size !== this.frame.trailer.ids) {
      throw new SnapshotCorruptError(this.path, 'the trailer does not match the content');
    }
    return this.state;
  }

  /** Whole current lines (newline-separated, no last newline), parsed in one call. */
  private parsePiece(text: string): void {
    let entries: unknown[];
    try {
      entries = JSON.parse(`[${text.replaceAll('\n', ',')}]`) as unknown[];
    } catch {
      this.problem = 'a line is not a JSON object';
      return;
    }
    for (const entry of entries as { p?: unknown; head?: unknown; current?: Policy | null; at?: unknown; len?: unknown }[]) {
      const { p: policyId, head, current, at, len } = entry ?? {};
      if (typeof policyId !== 'string' || typeof head !== 'number' || typeof at !== 'number' || typeof len !== 'number' || at + len > this.currentAt || typeof current !== 'object') {
        this.problem = 'a current line is not one';
        return;
      }
      if (current !== null) current.policy_id = policyId; // one string for both
      this.state.records.set(policyId, policyRecord(head, current === null ? undefined : revivedPolicy(current, this.strings), at, len));
    }
  }
}

async function writeAll(file: fsp.FileHandle, buffer: Buffer): Promise<void> {
  let offset = 0;
  while (offset < buffer.length) {
    const { bytesWritten } = await file.write(buffer, offset, buffer.length - offset);
    offset += bytesWritten;
  }
}
