import type { Policy } from '../policy/types.js';

/** What both snapshot formats share (journal-snapshot.ts, journal-snapshot-v1.ts): the error, a line, a ref. */

export class SnapshotCorruptError extends Error {
  constructor(readonly path: string, problem: string) {
    super(`${path}: the policy snapshot is corrupt (${problem}); refusing to start`);
    this.name = 'SnapshotCorruptError';
  }
}

/** A version written in full, or a reference to version `$v` of the same id (written once, elsewhere). */
export type Ref = { $v: number } | Policy | null;

export function isRef(value: Ref): value is { $v: number } {
  return typeof (value as { $v?: unknown } | null)?.$v === 'number';
}

/** Version `version` in `versions` (ascending; numbered 1, 2, ... without gaps, so it is usually at version - 1). */
export function versionOf(versions: readonly Policy[] | undefined, version: number): Policy | undefined {
  const at = versions?.[version - 1];
  return at?.version === version ? at : versions?.find((p) => p.version === version);
}

/** One line of a snapshot: a JSON object, else the snapshot is corrupt. */
export function parseLine(path: string, text: string): unknown {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null) return value;
  } catch {
    // reported below
  }
  throw new SnapshotCorruptError(path, 'a line is not a JSON object');
}
