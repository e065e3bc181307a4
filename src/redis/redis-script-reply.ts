import type { CounterResult, LeaseCounterResult } from '../counters/counter-store.js';
import { LEASE_OUTCOMES } from '../counters/parent-take-ledger.js';
import { parseShareReport } from '../counters/shares.js';

/**
 * The script reply: {allowed 1/0, remaining, retry_after_ms, reset_after_ms}, and for a lease operation
 * {units, window tag, window left ms, store now, outcome, lapsed} after it; see lua/includes/lease.lua.
 * A share's report comes last: a lease operation's 11th, a sliding log's 5th (lua/includes/shares_log.lua).
 */
export function parseReply(reply: unknown): CounterResult {
  if (!Array.isArray(reply) || (reply.length !== 4 && reply.length !== 5 && reply.length !== 10 && reply.length !== 11)) {
    throw new Error(`unexpected script reply ${JSON.stringify(reply)}`);
  }
  if (reply.length >= 10) {
    const outcome = LEASE_OUTCOMES[toNumber(reply[8])];
    if (outcome === undefined) throw new Error(`unexpected lease outcome in script reply ${JSON.stringify(reply)}`);
    const lease: LeaseCounterResult = {
      allowed: toNumber(reply[0]) === 1,
      remaining: toNumber(reply[1]),
      retryAfterMs: toNumber(reply[2]),
      resetAfterMs: toNumber(reply[3]),
      units: toNumber(reply[4]),
      windowTag: toNumber(reply[5]),
      windowLeftMs: toNumber(reply[6]),
      storeNow: toNumber(reply[7]),
      outcome,
      lapsed: toNumber(reply[9]),
    };
    // A region's operation on a global budget with shares (lua/includes/shares.lua).
    if (reply.length === 11) lease.shareTaken = parseShareReport(String(reply[10]));
    return lease;
  }
  const answer: CounterResult = {
    allowed: toNumber(reply[0]) === 1,
    remaining: toNumber(reply[1]),
    retryAfterMs: toNumber(reply[2]),
    resetAfterMs: toNumber(reply[3]),
  };
  if (reply.length === 5) answer.shareTaken = parseShareReport(String(reply[4]));
  return answer;
}

/** concurrency_acquire's reply: the four of every script, then whether it took a new slot (1/0). */
export function parseAcquireReply(reply: unknown): CounterResult {
  if (!Array.isArray(reply) || reply.length !== 5) throw new Error(`unexpected acquire reply ${JSON.stringify(reply)}`);
  return {
    allowed: toNumber(reply[0]) === 1,
    remaining: toNumber(reply[1]),
    retryAfterMs: toNumber(reply[2]),
    resetAfterMs: toNumber(reply[3]),
    newSlot: toNumber(reply[4]) === 1,
  };
}

function toNumber(value: unknown): number {
  if (typeof value === 'number') return value;
  if (typeof value === 'string') {
    // Lua's %.17g spells the special values the C way.
    if (value === 'inf') return Infinity;
    if (value === '-inf') return -Infinity;
    if (value === 'nan' || value === '-nan') return NaN;
    const n = Number(value);
    if (value.trim() !== '' && !Number.isNaN(n)) return n;
  }
  throw new Error(`unexpected number ${JSON.stringify(value)} in script reply`);
}
