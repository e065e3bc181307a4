import { FixedWindowSlot, type Slot, type StateSlot } from '../emulator/keyspace.js';

/**
 * The file memory-mode counters are saved in (docs/operations.md, "Counters across restarts"), one JSON
 * value per line:
 *
 *     {"format":"rl-counter-snapshot","version":1,"key_prefix":"rl:","started_at":T}   header
 *     [0,"<key>",windowNumber,windowMs,used]                                          a fixed_window slot
 *     [1,"<key>",expireAt,<state>]                                                    any other slot
 *     {"end":true,"keys":N,"sha256":"<hex of every byte before this line>"}           trailer
 *
 * States are the emulator's own objects; their Maps are written as `{"$map":[[k,v],...]}`. Numbers
 * round-trip exactly (JSON writes the shortest exact form), so a restored counter answers bit for bit as
 * before. `started_at` is when writing began: no count in the file is older than that.
 */

export const SNAPSHOT_FORMAT = 'rl-counter-snapshot';
export const SNAPSHOT_VERSION = 1;
export const COUNTER_SNAPSHOT_FILE = 'counters.snapshot';

export interface SnapshotHeader {
  format: typeof SNAPSHOT_FORMAT;
  version: number;
  key_prefix: string;
  started_at: number;
}

export interface SnapshotTrailer {
  end: true;
  keys: number;
  sha256: string;
}

/** A snapshot that cannot be restored: corrupt, or written by another format version or key prefix. */
export class CounterSnapshotUnusableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CounterSnapshotUnusableError';
  }
}

export function headerLine(keyPrefix: string, startedAt: number): string {
  const header: SnapshotHeader = { format: SNAPSHOT_FORMAT, version: SNAPSHOT_VERSION, key_prefix: keyPrefix, started_at: startedAt };
  return `${JSON.stringify(header)}\n`;
}

export function trailerLine(keys: number, sha256: string): string {
  const trailer: SnapshotTrailer = { end: true, keys, sha256 };
  return `${JSON.stringify(trailer)}\n`;
}

/** One key's line. fixed_window, the most common slot by far, is written without JSON.stringify of an object. */
export function slotLine(key: string, slot: Slot): string {
  if (slot instanceof FixedWindowSlot) return `[0,${JSON.stringify(key)},${slot.windowNumber},${slot.windowMs},${slot.used}]\n`;
  return `[1,${JSON.stringify(key)},${slot.expireAt},${JSON.stringify((slot as StateSlot<unknown>).state, mapsAsPairs)}]\n`;
}

/** The header, checked against what this server would write; throws CounterSnapshotUnusableError naming the mismatch. */
export function parseHeader(line: string, keyPrefix: string): SnapshotHeader {
  const header = parseJson(line, 'header') as Partial<SnapshotHeader> | null;
  if (header === null || typeof header !== 'object' || header.format !== SNAPSHOT_FORMAT) throw unusable('its first line is not a counter snapshot header');
  if (header.version !== SNAPSHOT_VERSION) throw unusable(`it is format version ${String(header.version)}, this server reads ${SNAPSHOT_VERSION}`);
  if (header.key_prefix !== keyPrefix) throw unusable(`it holds the counters of key prefix ${JSON.stringify(header.key_prefix)}, this server's is ${JSON.stringify(keyPrefix)}`);
  if (!isFiniteNumber(header.started_at)) throw unusable('its header has no started_at');
  return header as SnapshotHeader;
}

/** A trailer line, or undefined when the line is a key's. */
export function parseTrailer(line: string): SnapshotTrailer | undefined {
  if (!line.startsWith('{')) return undefined;
  const trailer = parseJson(line, 'trailer') as Partial<SnapshotTrailer> | null;
  if (trailer?.end !== true || !isFiniteNumber(trailer.keys) || typeof trailer.sha256 !== 'string') throw unusable('its trailer is malformed');
  return trailer as SnapshotTrailer;
}

/** A key's line as [key, slot]; throws CounterSnapshotUnusableError when it is not one. */
export function parseSlot(line: string, lineNumber: number): [string, Slot] {
  const value = parseJson(line, `line ${lineNumber}`) as unknown[];
  const bad = () => unusable(`line ${lineNumber} is not a counter`);
  if (!Array.isArray(value) || typeof value[1] !== 'string') throw bad();
  const [tag, key] = value as [number, string];
  if (tag === 0 && value.length === 5 && value.slice(2).every(isFiniteNumber)) {
    const [, , windowNumber, windowMs, used] = value as number[];
    return [key, new FixedWindowSlot(windowNumber, windowMs, used)];
  }
  if (tag === 1 && value.length === 4 && isFiniteNumber(value[2]) && value[3] !== null && typeof value[3] === 'object') {
    const slot: StateSlot<unknown> = { expireAt: value[2], state: revivedMaps(value[3]) };
    return [key, slot];
  }
  throw bad();
}

function mapsAsPairs(_key: string, value: unknown): unknown {
  return value instanceof Map ? { $map: [...value] } : value;
}

/** Turns every `{"$map": [...]}` back into a Map, in place. */
function revivedMaps(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = revivedMaps(value[i]);
    return value;
  }
  const record = value as Record<string, unknown>;
  const pairs = record.$map;
  if (Array.isArray(pairs) && Object.keys(record).length === 1) {
    return new Map(pairs.map((pair) => (Array.isArray(pair) && pair.length === 2 ? [pair[0], revivedMaps(pair[1])] : unusableThrown('a map entry is malformed'))));
  }
  for (const key of Object.keys(record)) record[key] = revivedMaps(record[key]);
  return record;
}

function parseJson(line: string, what: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    throw unusable(`its ${what} is not JSON`);
  }
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

function unusable(why: string): CounterSnapshotUnusableError {
  return new CounterSnapshotUnusableError(why);
}

function unusableThrown(why: string): never {
  throw unusable(why);
}
