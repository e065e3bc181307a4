import { revivedAuditEntry, type AuditEntry } from './policy-store.js';
import { emptyState, policyRecord, type PolicyRecord, type StoreState } from './journal-state.js';
import { isRef, parseLine, SnapshotCorruptError, versionOf, type Ref } from './journal-snapshot-parts.js';
import { revivedPolicy, StringPool } from '../policy/stored-policy.js';
import type { Policy } from '../policy/types.js';

/**
 * The first snapshot format (`"snapshot":1`), still read so that a data directory written before the
 * current format (journal-snapshot.ts) opens; its first compaction rewrites it in the current one. Every
 * version and audit entry is loaded into memory, as that format requires.
 *
 *     {"snapshot":1,"rev":R}                               header
 *     {"v":<Policy>}                                       one per version, ascending
 *     {"p":"<policy_id>","head":n,"current":<ref>|null}    the id's head and current policy
 *     {"a":<AuditEntry with old_value/new_value as refs>}  its audit trail, oldest first
 *     {"end":R,"lines":N,"sha256":"<hex of every byte before this line>"}
 *
 * grouped by policy id; a ref is `{"$v":n}` (version n of the same id) or the value itself. The caller
 * has checked the digest.
 */
export function parseSnapshotV1(path: string, data: Buffer, rev: number, headerEnd: number, trailerStart: number, trailer: Record<string, unknown>): StoreState {
  if (typeof trailer.end !== 'number' || typeof trailer.lines !== 'number') throw new SnapshotCorruptError(path, 'no trailer');
  const state = emptyState();
  state.rev = rev;
  const strings = new StringPool();
  const recordOf = (policyId: string): PolicyRecord => {
    let record = state.records.get(policyId);
    if (record === undefined) state.records.set(policyId, (record = policyRecord(0, undefined)));
    return record;
  };
  /** The version `$v` of `policyId`, from its versions read so far (ascending). */
  const resolve = (policyId: string, value: Ref): Policy | null => {
    if (value === null) return null;
    if (!isRef(value)) return revivedPolicy(value, strings);
    const found = versionOf(state.records.get(policyId)?.versions, value.$v);
    if (!found) throw new SnapshotCorruptError(path, `${policyId}: a reference to a version it does not hold`);
    return found;
  };
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
      (recordOf(parsed.policy_id).versions ??= []).push(revivedPolicy(parsed, strings));
    } else if ('p' in value) {
      const policyId = idOf(value.p as string);
      const record = recordOf(policyId);
      record.head = value.head as number;
      record.current = resolve(policyId, value.current as Ref) ?? undefined;
    } else if ('a' in value) {
      const parsed = value.a as AuditEntry;
      parsed.policy_id = idOf(parsed.policy_id);
      const entry = revivedAuditEntry(parsed, resolve(parsed.policy_id, parsed.old_value as Ref), resolve(parsed.policy_id, parsed.new_value as Ref), strings);
      (recordOf(entry.policy_id).audit ??= []).push(entry);
    } else {
      throw new SnapshotCorruptError(path, `line ${lines} is not a snapshot entry`);
    }
  }
  if (lines + 1 !== trailer.lines || trailer.end !== state.rev) throw new SnapshotCorruptError(path, 'the trailer does not match the content');
  return state;
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
