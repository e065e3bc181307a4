import type { LeaseCounterResult, LeaseOutcome, NamedTake, TakeReclaim } from './counter-store.js';

/**
 * Named takes and gives in the emulator: the port of lua/includes/lease.lua (its rules are written
 * there); change both together. A lease operation reads the counter's take ledger first
 * (`prepareLeaseOp`), which may turn it into a take or give of nothing (late, repeat, reclaimed) or a
 * reclaim into a give of the recorded units; the algorithm runs that; `finishLeaseOp` then records it
 * and completes the answer.
 */

const MAX_TAKES = 256;
const MEMORY_MS = 60_000;

/**
 * One id's entry as the ledger holds it, and as memory-mode snapshots write it (snapshot-format.ts):
 * `a`, `b`, `c` mean what `kind` says (see `entryOf`). Kept in this form so saved counters read back
 * as they were written; the code reads and writes it only through `entryOf` and `storedOf`.
 */
export interface StoredLedgerEntry {
  expireAt: number;
  seq: number;
  kind: 'g' | 'v' | 'r';
  a: number;
  b: number;
  c: number;
  by?: string;
}

/** A take's grant (`g`): its units, their tag, and the tag a reclaim gives them back under. */
export interface GrantEntry {
  kind: 'g';
  units: number;
  tag: number;
  giveTag: number;
}

/** A give (`v`) or a reclaim (`r`: a tombstone when it found nothing, 0 and 0): what went back, what lapsed. */
export interface GiveEntry {
  kind: 'v' | 'r';
  back: number;
  lapsed: number;
  /** A reclaim's reclaimer ('' when unnamed). */
  by?: string;
}

export type LedgerEntry = (GrantEntry | GiveEntry) & { expireAt: number; seq: number };

/** The entry's fields by name. */
export function entryOf(stored: StoredLedgerEntry): LedgerEntry {
  const { expireAt, seq, kind, a, b, c } = stored;
  if (kind === 'g') return { expireAt, seq, kind, units: a, tag: b, giveTag: c };
  return kind === 'r' ? { expireAt, seq, kind, back: a, lapsed: b, by: stored.by ?? '' } : { expireAt, seq, kind, back: a, lapsed: b };
}

/** The entry as stored: the same fields in the same order as ever (a give's `c` is 0; only a reclaim has `by`). */
export function storedOf(entry: LedgerEntry): StoredLedgerEntry {
  const { expireAt, seq } = entry;
  if (entry.kind === 'g') return { expireAt, seq, kind: 'g', a: entry.units, b: entry.tag, c: entry.giveTag };
  const stored: StoredLedgerEntry = { expireAt, seq, kind: entry.kind, a: entry.back, b: entry.lapsed, c: 0 };
  if (entry.kind === 'r') stored.by = entry.by ?? '';
  return stored;
}

/** The ledger of one counter; the slot that holds it expires with its longest-lived entry (`x`). */
export interface TakeLedger {
  entries: Map<string, StoredLedgerEntry>;
  /** Entries written (`n`): the next one's sequence number is one more. */
  written: number;
}

/** Where the store keeps a counter's ledger: read (absent when expired) and write with its expiry. */
export interface LedgerSlot {
  read(): TakeLedger | undefined;
  /** The slot's expire-at so far (`x`), or undefined when absent. */
  expireAt(): number | undefined;
  write(ledger: TakeLedger, expireAt: number): void;
}

/** A lease operation after reading the ledger: what the algorithm runs, and what the answer needs. */
export interface PreparedLeaseOp {
  op: 'take' | 'give';
  units: number;
  /** A give's tag (-1: nothing to give back, to no window). */
  tag: number;
  outcome: LeaseOutcome;
  reclaiming: boolean;
  takeId: string | undefined;
  deadline: number | undefined;
  holdMs: number;
  /** A reclaim's reclaimer ('' when unnamed). */
  by: string;
  /** What a give asks back: what does not go back lapsed. */
  asked: number;
  recorded: LedgerEntry | undefined;
}

export const LEASE_OUTCOMES: readonly LeaseOutcome[] = ['done', 'late', 'repeat', 'reclaimed', 'ahead'];

/** A take id (the ledger's field name) or a reclaimer: a non-empty string, bounded so the ledger stays small. */
export function checkTakeId(takeId: string, what = 'a take id'): void {
  if (typeof takeId !== 'string' || takeId.length === 0 || takeId.length > 128) {
    throw new Error(`${what} must be a string of 1 to 128 characters, got ${JSON.stringify(takeId)}`);
  }
}

export function prepareLeaseOp(
  op: 'take' | 'give' | 'reclaim', units: number, args: NamedTake & Partial<TakeReclaim> & { tag?: number }, now: number, slot: LedgerSlot,
): PreparedLeaseOp {
  const reclaiming = op === 'reclaim';
  const takeId = args.takeId;
  if (takeId !== undefined) checkTakeId(takeId);
  else if (reclaiming) throw new Error('a reclaim needs an id');
  if (args.by !== undefined) checkTakeId(args.by, 'a reclaimer');
  let recorded: LedgerEntry | undefined;
  if (takeId !== undefined) {
    const entry = slot.read()?.entries.get(takeId);
    if (entry !== undefined && entry.expireAt > now) recorded = entryOf(entry);
  }
  const prepared: PreparedLeaseOp = {
    op: reclaiming ? 'give' : op, units, tag: args.tag ?? 0, outcome: 'done', reclaiming, takeId,
    deadline: args.deadline, holdMs: args.holdMs ?? 0, by: args.by ?? '', asked: 0, recorded,
  };
  if (!reclaiming && recorded) {
    // Asked again (its own kind of entry), or settled without it: nothing more is taken or given back.
    prepared.outcome = recorded.kind === (op === 'take' ? 'g' : 'v') ? 'repeat' : 'reclaimed';
  } else if (!reclaiming && args.deadline !== undefined && now > args.deadline) {
    prepared.outcome = 'late';
  } else if (reclaiming) {
    if (recorded?.kind === 'g') {
      prepared.units = recorded.units;
      prepared.tag = recorded.giveTag;
    } else if (recorded?.kind === 'r' && (recorded.by ?? '') !== prepared.by) {
      // Settled by another reclaimer, who counts it.
      prepared.outcome = 'reclaimed';
    } else {
      // A give's, or settled before: nothing more to give back.
      prepared.outcome = recorded ? 'repeat' : 'ahead';
    }
  }
  if (prepared.outcome !== 'done') {
    // The state answers as a take, or a give to no window, of nothing.
    prepared.units = 0;
    prepared.tag = -1;
  }
  if (prepared.op === 'give') prepared.asked = prepared.units;
  return prepared;
}

/** Records what the operation did and completes the algorithm's answer (lease_reply). */
export function finishLeaseOp(
  p: PreparedLeaseOp, answer: LeaseCounterResult, now: number, shape: 'window' | 'bucket', slot: LedgerSlot,
): LeaseCounterResult {
  let lapsed = 0;
  if (p.op === 'take' && shape === 'bucket') {
    // The one place a bucket's back-by instant is made: its units go back, and are spent, within the hold.
    answer.windowTag = now + p.holdMs;
    answer.windowLeftMs = p.holdMs;
  }
  if (p.op === 'take' && p.outcome === 'done' && p.takeId !== undefined) {
    writeEntry(slot, p, { kind: 'g', units: answer.units, tag: answer.windowTag, giveTag: answer.windowTag }, now);
  } else if (p.op === 'take' && p.outcome === 'repeat') {
    // A take asked again finds its own kind of entry.
    const recorded = p.recorded as GrantEntry;
    if (shape === 'bucket') answer.windowLeftMs = Math.max(0, recorded.tag - now);
    // Its window has ended.
    else if (recorded.tag !== answer.windowTag) answer.windowLeftMs = 0;
    answer.units = recorded.units;
    answer.windowTag = recorded.tag;
    answer.allowed = answer.units > 0;
  } else if (p.op === 'give') {
    lapsed = p.asked - answer.units;
    if (p.outcome === 'repeat') {
      // A give asked again, or a reclaim after a give or its own: a give's kind of entry.
      const recorded = p.recorded as GiveEntry;
      answer.units = recorded.back;
      lapsed = recorded.lapsed;
    } else if (p.outcome === 'done' && p.takeId !== undefined) {
      writeEntry(slot, p, { kind: p.reclaiming ? 'r' : 'v', back: answer.units, lapsed, by: p.by }, now);
    } else if (p.outcome === 'ahead') {
      writeEntry(slot, p, { kind: 'r', back: 0, lapsed: 0, by: p.by }, now);
    }
  }
  answer.storeNow = now;
  answer.outcome = p.outcome;
  answer.lapsed = lapsed;
  return answer;
}

/** Writes `p`'s entry, kept MEMORY_MS past the later of now and its deadline. */
function writeEntry(slot: LedgerSlot, p: PreparedLeaseOp, entry: GrantEntry | GiveEntry, now: number): void {
  const takeId = p.takeId!;
  const expireAt = Math.max(now, p.deadline ?? now) + MEMORY_MS;
  const ledger = slot.read() ?? { entries: new Map<string, StoredLedgerEntry>(), written: 0 };
  const x = slot.expireAt() ?? expireAt;
  const seq = ledger.written + 1;
  if (!ledger.entries.has(takeId) && ledger.entries.size >= MAX_TAKES) {
    // Full: the expired go, then, if still full, the least recently written.
    let live = 0;
    let oldest: string | undefined;
    let oldestSeq = Infinity;
    for (const [id, entry] of ledger.entries) {
      if (entry.expireAt <= now) {
        ledger.entries.delete(id);
      } else {
        live++;
        if (entry.seq < oldestSeq) {
          oldest = id;
          oldestSeq = entry.seq;
        }
      }
    }
    if (live >= MAX_TAKES) ledger.entries.delete(oldest!);
  }
  ledger.entries.set(takeId, storedOf({ ...entry, expireAt, seq }));
  ledger.written = seq;
  slot.write(ledger, Math.max(x, expireAt));
}
