import type { CounterResult } from '../counter-store.js';
import { LogShareRun, type LogEntry, type LogShareSums } from '../shares-log.js';
import type { NamedShare } from '../shares.js';
import type { DecisionAnswer } from './answers.js';
import type { AlgorithmCall } from './mode.js';

/** The emulator's sliding_window_log: mirrors lua/sliding_window_log.lua (a region's share: shares-log.ts). */

interface SlidingLogState { entries: LogEntry[]; sum: number; shares?: LogShareSums }

/** The entries of a log in the window: those from `first` on, which sum to `sum`. */
interface LogInWindow { entries: LogEntry[]; first: number; sum: number }

export function slidingLog(call: AlgorithmCall, limit: number, windowMs: number, share?: NamedShare): CounterResult {
  const { space, now, peeking, refunding, cost, refund } = call;
  const key = call.keys[0];
  const stored = space.get<SlidingLogState>(key, now);
  const run = new LogShareRun(share, () => stored?.shares);
  /** log_reply: with a region, `remaining` at most `room` and every region's units; the changes written unless peeking. */
  const answer = (state: SlidingLogState, decision: DecisionAnswer, room: number): CounterResult => {
    const r: CounterResult = decision;
    if (share !== undefined) {
      r.remaining = Math.max(0, Math.min(r.remaining, room));
      r.shareTaken = run.report();
    }
    if (!peeking) run.flush(state);
    return r;
  };
  const log = stored ?? { entries: [], sum: 0 };
  // Absent or stale, for a peek or a check: an empty log (a cost over the limit, or the region's share, waits a whole window).
  if (stored === undefined && peeking) {
    run.absent = true;
    const room = run.room();
    return answer(log, { allowed: cost <= limit && cost <= room, remaining: Math.max(0, limit), retryAfterMs: cost <= limit && cost <= room ? 0 : windowMs, resetAfterMs: 0 }, room);
  }
  // Entries are sorted by time; an entry leaves the window when now - windowMs reaches it. A peek
  // only skips them (it writes nothing): `first` is then the oldest entry still in the window.
  let expired = 0;
  let sum = log.sum;
  while (expired < log.entries.length && log.entries[expired].ts <= now - windowMs) {
    sum = sum - log.entries[expired].cost;
    run.forget(log.entries[expired]);
    expired++;
  }
  if (peeking) {
    const room = run.room();
    if (sum + cost > limit || cost > room) return answer(log, slidingLogRefusal(call, limit, windowMs, { entries: log.entries, first: expired, sum }, run), room);
    const reset = log.entries.length > expired ? log.entries[log.entries.length - 1].ts + windowMs - now : 0;
    return answer(log, { allowed: true, remaining: Math.max(0, limit - sum), retryAfterMs: 0, resetAfterMs: reset }, room);
  }
  log.sum = sum;
  if (expired > 0) log.entries.splice(0, expired);
  if (refunding) {
    giveBackNewest(log, refund, share, run);
    if (log.entries.length === 0) {
      space.slots.delete(key); // a sliding-log key: never a fixed_window slot
      run.cleared();
      run.absent = true;
      return answer({ entries: [], sum: 0 }, { allowed: true, remaining: Math.max(0, limit), retryAfterMs: 0, resetAfterMs: 0 }, run.room());
    }
    const expireAt = log.entries[log.entries.length - 1].ts + windowMs;
    space.put<SlidingLogState>(key, log, expireAt);
    return answer(log, { allowed: true, remaining: Math.max(0, limit - log.sum), retryAfterMs: 0, resetAfterMs: expireAt - now }, run.room());
  }
  const room = run.room();
  if (log.sum + cost > limit || cost > room) return answer(log, slidingLogRefusal(call, limit, windowMs, { entries: log.entries, first: 0, sum: log.sum }, run), room);
  const entry: LogEntry = { ts: now, cost };
  if (share !== undefined) {
    // From the region's guarantee first, the rest from the common share.
    entry.region = share.region;
    entry.own = Math.min(cost, Math.max(0, share.guaranteed - run.use()[0]));
    run.add(share.region, entry.own, cost);
  }
  insertSorted(log.entries, entry);
  log.sum = log.sum + cost;
  const newest = log.entries[log.entries.length - 1].ts;
  space.put<SlidingLogState>(key, log, newest + windowMs);
  return answer(log, { allowed: true, remaining: Math.max(0, limit - log.sum), retryAfterMs: 0, resetAfterMs: newest + windowMs - now }, room - cost);
}

/**
 * The refusal of the call's cost by a sliding log, `log` its entries in the window: wait until enough
 * of the oldest have left the window for the cost to fit (a region's: in its share too).
 */
function slidingLogRefusal(call: AlgorithmCall, limit: number, windowMs: number, log: LogInWindow, run: LogShareRun): DecisionAnswer {
  const { cost, now } = call;
  const { entries, first, sum } = log;
  const inWindow = entries.length > first;
  const newestTs = inWindow ? entries[entries.length - 1].ts : now;
  const reset = inWindow ? newestTs + windowMs - now : 0;
  let retry = newestTs + windowMs - now;
  let freed = 0;
  let freedOwn = 0;
  let freedCommon = 0;
  const [ownUse, commonUse] = run.share === undefined ? [0, 0] : run.use();
  for (let i = first; i < entries.length; i++) {
    const entry = entries[i];
    freed = freed + entry.cost;
    if (entry.region !== undefined) {
      freedCommon = freedCommon + (entry.cost - entry.own!);
      if (entry.region === run.share?.region) freedOwn = freedOwn + entry.own!;
    }
    if (sum - freed + cost <= limit && (run.share === undefined || cost <= run.roomOf(ownUse - freedOwn, commonUse - freedCommon))) {
      retry = entry.ts + windowMs - now;
      break;
    }
  }
  return { allowed: false, remaining: Math.max(0, limit - sum), retryAfterMs: retry, resetAfterMs: reset };
}

/** Inserts after every entry with the same or an earlier time (time order; arrival order on ties). */
function insertSorted(entries: LogEntry[], entry: LogEntry): void {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (entries[mid].ts <= entry.ts) lo = mid + 1;
    else hi = mid;
  }
  entries.splice(lo, 0, entry);
}

/**
 * A refund's units go back from the newest entries (the ones this context added last), whole entries
 * first; a region's, from its own entries only, to the common share first.
 */
function giveBackNewest(log: SlidingLogState, refund: number, share: NamedShare | undefined, run: LogShareRun): void {
  let left = refund;
  let at = log.entries.length - 1;
  while (left > 0 && at >= 0) {
    const entry = log.entries[at];
    if (share !== undefined && entry.region !== share.region) {
      at--;
    } else if (entry.cost > left) {
      if (entry.region !== undefined) {
        const keptOwn = entry.own! - (left - Math.min(left, entry.cost - entry.own!));
        run.add(entry.region, keptOwn - entry.own!, -left);
        entry.own = keptOwn;
      }
      entry.cost = entry.cost - left;
      log.sum = log.sum - left;
      left = 0;
    } else {
      run.forget(entry);
      log.entries.splice(at, 1);
      log.sum = log.sum - entry.cost;
      left = left - entry.cost;
      at--;
    }
  }
}
