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
 * One id's entry: a take's grant `g` (units, tag, give tag), a give `v` (back, lapsed) or reclaimed `r`
 * (back, lapsed; a tombstone: 0, 0; and `by`, its reclaimer, '' when unnamed).
 */
export interface LedgerEntry {
  expireAt: number;
  seq: number;
  kind: 'g' | 'v' | 'r';
  a: number;
  b: number;
  c: number;
  by?: string;
}

/** The ledger of one counter; the slot that holds it expires with its longest-lived entry (`x`). */
export interface TakeLedger {
  entries: Map<string, LedgerEntry>;
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
    if (entry !== undefined && entry.expireAt > now) recorded = entry;
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
    if (recorded && recorded.kind === 'g') {
      prepared.units = recorded.a;
      prepared.tag = recorded.c;
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
    writeEntry(slot, p, now, { kind: 'g', a: answer.units, b: answer.windowTag, c: answer.windowTag });
  } else if (p.op === 'take' && p.outcome === 'repeat') {
    const recorded = p.recorded!;
    if (shape === 'bucket') answer.windowLeftMs = Math.max(0, recorded.b - now);
    // Its window has ended.
    else if (recorded.b !== answer.windowTag) answer.windowLeftMs = 0;
    answer.units = recorded.a;
    answer.windowTag = recorded.b;
    answer.allowed = answer.units > 0;
  } else if (p.op === 'give') {
    lapsed = p.asked - answer.units;
    if (p.outcome === 'repeat') {
      answer.units = p.recorded!.a;
      lapsed = p.recorded!.b;
    } else if (p.outcome === 'done' && p.takeId !== undefined) {
      writeEntry(slot, p, now, { kind: p.reclaiming ? 'r' : 'v', a: answer.units, b: lapsed, c: 0 });
    } else if (p.outcome === 'ahead') {
      writeEntry(slot, p, now, { kind: 'r', a: 0, b: 0, c: 0 });
    }
  }
  answer.storeNow = now;
  answer.outcome = p.outcome;
  answer.lapsed = lapsed;
  return answer;
}

/** Writes `p`'s entry (`body`, write_entry's), kept MEMORY_MS past the later of now and its deadline. */
function writeEntry(slot: LedgerSlot, p: PreparedLeaseOp, now: number, body: Pick<LedgerEntry, 'kind' | 'a' | 'b' | 'c'>): void {
  const takeId = p.takeId!;
  const expireAt = Math.max(now, p.deadline ?? now) + MEMORY_MS;
  const ledger = slot.read() ?? { entries: new Map<string, LedgerEntry>(), written: 0 };
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
  ledger.entries.set(takeId, { expireAt, seq, ...body, ...(body.kind === 'r' && { by: p.by }) });
  ledger.written = seq;
  slot.write(ledger, Math.max(x, expireAt));
}
