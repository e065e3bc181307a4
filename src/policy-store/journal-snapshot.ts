import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { revivedAuditEntry, type AuditEntry } from './policy-store.js';
import { revivedPolicy, StringPool } from '../policy/stored-policy.js';
import type { Policy } from '../policy/types.js';

/**
 * The snapshot of a FilePolicyStore: the whole state (every policy id's head, current policy, versions
 * and audit trail) at one revision, written by compaction so the journal can start over.
 *
 * Format: one JSON value per line, grouped by policy id:
 *
 *     {"snapshot":1,"rev":R}                               header
 *     {"v":<Policy>}                                       one per version, ascending (the version record
 *                                                          is derived from it, as when a change is applied)
 *     {"p":"<policy_id>","head":n,"current":<ref>|null}    the id's head and current policy
 *     {"a":<AuditEntry with old_value/new_value as refs>}  its audit trail, oldest first
 *     {"end":R,"lines":N,"sha256":"<hex of every byte before this line>"}
 *
 * A ref is `{"$v":n}` when the value is exactly (same JSON) version n's snapshot of the same id, else the
 * value itself. A journal record carries a change's policy three times (current, old_value, new_value);
 * here each version is written once, so the snapshot is about a third of the journal it replaces, and
 * the objects it loads are shared the same way.
 *
 * The file is written under a temporary name, fsynced, then renamed into place (see
 * FilePolicyStore.compact), so a snapshot on disk is always complete; the trailer's line count and
 * digest catch anything else (a truncated copy, bit rot) and make the store refuse to start.
 */

export const SNAPSHOT_FILE = 'policies.snapshot';
export const SNAPSHOT_TEMP_FILE = 'policies.snapshot.tmp';

/** Everything a FilePolicyStore holds, at revision `rev`. */
export interface StoreState {
  rev: number;
  heads: Map<string, number>;
  current: Map<string, Policy>;
  /** Every version's policy, ascending; its version record is derived when read (versionRecordOf). */
  history: Map<string, Policy[]>;
  audits: Map<string, AuditEntry[]>;
}

export function emptyState(): StoreState {
  return { rev: 0, heads: new Map(), current: new Map(), history: new Map(), audits: new Map() };
}

export class SnapshotCorruptError extends Error {
  constructor(readonly path: string, problem: string) {
    super(`${path}: the policy snapshot is corrupt (${problem}); refusing to start`);
    this.name = 'SnapshotCorruptError';
  }
}

/** Bytes gathered before one write: big enough to be cheap, small enough to yield to other work often. */
const CHUNK_BYTES = 256 * 1024;

type Ref = { $v: number } | Policy | null;

/**
 * Writes `state` to `path` (created or truncated) and fsyncs it; returns its size in bytes.
 * `afterHeader` runs once the header is on disk (crash tests stop the process there).
 */
export async function writeSnapshot(path: string, state: StoreState, afterHeader?: () => void): Promise<number> {
  const file = await fsp.open(path, 'w', 0o644);
  try {
    const hash = createHash('sha256');
    let bytes = 0;
    let lines = 0;
    let pending: string[] = [];
    let pendingBytes = 0;
    const flush = async () => {
      if (pending.length === 0) return;
      const buffer = Buffer.from(pending.join(''), 'utf8');
      pending = [];
      pendingBytes = 0;
      hash.update(buffer);
      await writeAll(file, buffer);
      bytes += buffer.length;
    };
    const line = async (text: string) => {
      pending.push(text, '\n');
      pendingBytes += text.length + 1;
      lines++;
      if (pendingBytes >= CHUNK_BYTES) await flush();
    };

    await line(JSON.stringify({ snapshot: 1, rev: state.rev }));
    await flush();
    afterHeader?.();
    for (const [policyId, head] of state.heads) {
      // JSON of each version's snapshot, to write refs instead of copies.
      const written = new Map<number, string>();
      for (const version of state.history.get(policyId) ?? []) {
        const json = JSON.stringify(version);
        written.set(version.version, json);
        await line(`{"v":${json}}`);
      }
      const ref = (value: Policy | null): Ref => {
        if (value === null || value === undefined) return null;
        return written.get(value.version) === JSON.stringify(value) ? { $v: value.version } : value;
      };
      await line(JSON.stringify({ p: policyId, head, current: ref(state.current.get(policyId) ?? null) }));
      for (const entry of state.audits.get(policyId) ?? []) {
        await line(JSON.stringify({ a: { ...entry, old_value: ref(entry.old_value), new_value: ref(entry.new_value) } }));
      }
    }
    await flush();
    const trailer = Buffer.from(`${JSON.stringify({ end: state.rev, lines: lines + 1, sha256: hash.digest('hex') })}\n`, 'utf8');
    await writeAll(file, trailer);
    await file.datasync();
    return bytes + trailer.length;
  } finally {
    await file.close();
  }
}

/** The state in the snapshot at `path` and its size; undefined when there is no snapshot. */
export async function readSnapshot(path: string): Promise<{ state: StoreState; bytes: number } | undefined> {
  let data: Buffer;
  try {
    data = await fsp.readFile(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  if (data.length === 0 || data[data.length - 1] !== 0x0a) throw new SnapshotCorruptError(path, 'it does not end with a complete line');
  const trailerStart = data.lastIndexOf(0x0a, data.length - 2) + 1;
  const trailer = parseLine(path, data.toString('utf8', trailerStart, data.length - 1)) as { end?: unknown; lines?: unknown; sha256?: unknown };
  if (typeof trailer.end !== 'number' || typeof trailer.lines !== 'number' || typeof trailer.sha256 !== 'string') {
    throw new SnapshotCorruptError(path, 'no trailer');
  }
  if (createHash('sha256').update(data.subarray(0, trailerStart)).digest('hex') !== trailer.sha256) {
    throw new SnapshotCorruptError(path, 'digest mismatch');
  }

  const state = emptyState();
  const strings = new StringPool();
  /** The version `$v` of `policyId`, from its versions read so far (ascending). */
  const resolve = (policyId: string, value: Ref): Policy | null => {
    if (value === null) return null;
    if (typeof (value as { $v?: unknown }).$v !== 'number') return revivedPolicy(value as Policy, strings);
    const found = versionOf(state.history.get(policyId), (value as { $v: number }).$v);
    if (!found) throw new SnapshotCorruptError(path, `${policyId}: a reference to a version it does not hold`);
    return found;
  };
  const headerEnd = data.indexOf(0x0a);
  const header = parseLine(path, data.toString('utf8', 0, headerEnd)) as Record<string, unknown>;
  if (header.snapshot !== 1 || typeof header.rev !== 'number') throw new SnapshotCorruptError(path, 'no header');
  state.rev = header.rev;
  const entries = headerEnd + 1 < trailerStart ? parseLines(path, data, headerEnd + 1, trailerStart) : [];
  // The lines of one policy id follow each other: its id is kept as one string.
  let lastId = '';
  const idOf = (id: string): string => (id === lastId ? lastId : (lastId = id));
  let lines = 1;
  for (const value of entries) {
    lines++;
    if ('v' in value) {
      const parsed = value.v as Policy;
      parsed.policy_id = idOf(parsed.policy_id);
      push(state.history, parsed.policy_id, revivedPolicy(parsed, strings));
    } else if ('p' in value) {
      const policyId = idOf(value.p as string);
      state.heads.set(policyId, value.head as number);
      const current = resolve(policyId, value.current as Ref);
      if (current) state.current.set(policyId, current);
    } else if ('a' in value) {
      const parsed = value.a as AuditEntry;
      parsed.policy_id = idOf(parsed.policy_id);
      const entry = revivedAuditEntry(parsed, resolve(parsed.policy_id, parsed.old_value as Ref), resolve(parsed.policy_id, parsed.new_value as Ref), strings);
      push(state.audits, entry.policy_id, entry);
    } else {
      throw new SnapshotCorruptError(path, `line ${lines} is not a snapshot entry`);
    }
  }
  if (lines + 1 !== trailer.lines || trailer.end !== state.rev) throw new SnapshotCorruptError(path, 'the trailer does not match the content');
  return { state, bytes: data.length };
}

/**
 * The JSON lines of data[start, end) (each ends with a newline), parsed in one call: one array instead
 * of a string and a parse per line (JSON.stringify escapes newlines inside strings, so every raw newline
 * ends a line). A line that is not a JSON object is found line by line.
 */
function parseLines(path: string, data: Buffer, start: number, end: number): Record<string, unknown>[] {
  let values: unknown[] | undefined;
  try {
    values = JSON.parse(`[${data.toString('utf8', start, end - 1).replaceAll('\n', ',')}]`) as unknown[];
  } catch {
    // reported below
  }
  if (values !== undefined && values.every((v) => typeof v === 'object' && v !== null && !Array.isArray(v))) return values as Record<string, unknown>[];
  for (let pos = start; pos < end; ) {
    const nl = data.indexOf(0x0a, pos);
    parseLine(path, data.toString('utf8', pos, nl));
    pos = nl + 1;
  }
  throw new SnapshotCorruptError(path, 'a line is not a JSON object');
}

/** Version `version` in `versions` (ascending; numbered 1, 2, ... without gaps, so it is usually at version - 1). */
function versionOf(versions: readonly Policy[] | undefined, version: number): Policy | undefined {
  const at = versions?.[version - 1];
  return at?.version === version ? at : versions?.find((p) => p.version === version);
}

function parseLine(path: string, text: string): unknown {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null) return value;
  } catch {
    // reported below
  }
  throw new SnapshotCorruptError(path, 'a line is not a JSON object');
}

function push<T>(map: Map<string, T[]>, key: string, value: T): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

async function writeAll(file: fsp.FileHandle, buffer: Buffer): Promise<void> {
  let offset = 0;
  while (offset < buffer.length) {
    const { bytesWritten } = await file.write(buffer, offset, buffer.length - offset);
    offset += bytesWritten;
  }
}
