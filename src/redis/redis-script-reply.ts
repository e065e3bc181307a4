import type { CounterResult, LeaseCounterResult } from '../counters/counter-store.js';
import { LEASE_OUTCOMES } from '../counters/parent-take-ledger.js';
import { parseShareReport } from '../counters/shares.js';
import { CONCURRENCY_ACQUIRE, FIXED_WINDOW, LEASE_REPLY, SLIDING_WINDOW_LOG, fieldPositions } from './counter-script-protocols.js';

/**
 * Field positions and reply lengths, from the declared replies (counter-script-protocols.ts): every rate
 * script's decision, a lease operation's (lua/includes/lease.lua) and an acquire's. A share's report
 * comes last: a lease operation's, a sliding log's (lua/includes/shares_log.lua).
 */
const LEASE = fieldPositions(LEASE_REPLY.reply);
const ACQUIRE = fieldPositions(CONCURRENCY_ACQUIRE.reply);
const DECISION_LENGTH = Object.keys(FIXED_WINDOW.reply).length;
const LOG_SHARES = fieldPositions(SLIDING_WINDOW_LOG.reply).shares;
const LEASE_LENGTH = LEASE.shares;
const ACQUIRE_LENGTH = Object.keys(CONCURRENCY_ACQUIRE.reply).length;

/** A rate script's (or concurrency_release's) reply, or a lease operation's, as one result object. */
export function parseReply(reply: unknown): CounterResult {
  if (!Array.isArray(reply) || (reply.length !== DECISION_LENGTH && reply.length !== LOG_SHARES + 1 && reply.length !== LEASE_LENGTH && reply.length !== LEASE_LENGTH + 1)) {
    throw new Error(`unexpected script reply ${JSON.stringify(reply)}`);
  }
  if (reply.length >= LEASE_LENGTH) {
    const outcome = LEASE_OUTCOMES[toNumber(reply[LEASE.outcome])];
    if (outcome === undefined) throw new Error(`unexpected lease outcome in script reply ${JSON.stringify(reply)}`);
    const lease: LeaseCounterResult = {
      allowed: toNumber(reply[LEASE.allowed]) === 1,
      remaining: toNumber(reply[LEASE.remaining]),
      retryAfterMs: toNumber(reply[LEASE.retryAfterMs]),
      resetAfterMs: toNumber(reply[LEASE.resetAfterMs]),
      units: toNumber(reply[LEASE.units]),
      windowTag: toNumber(reply[LEASE.windowTag]),
      windowLeftMs: toNumber(reply[LEASE.windowLeftMs]),
      storeNow: toNumber(reply[LEASE.storeNow]),
      outcome,
      lapsed: toNumber(reply[LEASE.lapsed]),
    };
    // A region's operation on a global budget with shares (lua/includes/shares.lua).
    if (reply.length > LEASE.shares) lease.shareTaken = parseShareReport(String(reply[LEASE.shares]));
    return lease;
  }
  const answer: CounterResult = {
    allowed: toNumber(reply[LEASE.allowed]) === 1,
    remaining: toNumber(reply[LEASE.remaining]),
    retryAfterMs: toNumber(reply[LEASE.retryAfterMs]),
    resetAfterMs: toNumber(reply[LEASE.resetAfterMs]),
  };
  if (reply.length > LOG_SHARES) answer.shareTaken = parseShareReport(String(reply[LOG_SHARES]));
  return answer;
}

/** concurrency_acquire's reply: the decision, then whether it took a new slot (1/0). */
export function parseAcquireReply(reply: unknown): CounterResult {
  if (!Array.isArray(reply) || reply.length !== ACQUIRE_LENGTH) throw new Error(`unexpected acquire reply ${JSON.stringify(reply)}`);
  return {
    allowed: toNumber(reply[ACQUIRE.allowed]) === 1,
    remaining: toNumber(reply[ACQUIRE.remaining]),
    retryAfterMs: toNumber(reply[ACQUIRE.retryAfterMs]),
    resetAfterMs: toNumber(reply[ACQUIRE.resetAfterMs]),
    newSlot: toNumber(reply[ACQUIRE.newSlot]) === 1,
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
