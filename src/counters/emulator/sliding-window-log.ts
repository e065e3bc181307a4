import type { CounterResult } from '../counter-store.js';
import { result } from './answers.js';
import type { MemoryKeyspace } from './keyspace.js';
import { mode, type AlgorithmOperation } from './mode.js';

/** The emulator's sliding_window_log: mirrors lua/sliding_window_log.lua. */

interface SlidingLogState { entries: { ts: number; cost: number }[]; sum: number }

export function slidingLog(space: MemoryKeyspace, key: string, limit: number, windowMs: number, op: AlgorithmOperation, units: number, now: number): CounterResult {
  const { peeking, refunding, cost, refund } = mode(op, units);
  const stored = space.get<SlidingLogState>(key, now);
  // Absent or stale, for a peek or a check: an empty log (a cost over the limit waits a whole window).
  if (stored === undefined && peeking) return cost <= limit ? result(true, Math.max(0, limit), 0, 0) : result(false, Math.max(0, limit), windowMs, 0);
  const log = stored ?? { entries: [], sum: 0 };
  // Entries are sorted by time; an entry leaves the window when now - windowMs reaches it. A peek
  // only skips them (it writes nothing): `first` is then the oldest entry still in the window.
  let expired = 0;
  let sum = log.sum;
  while (expired < log.entries.length && log.entries[expired].ts <= now - windowMs) {
    sum = sum - log.entries[expired].cost;
    expired++;
  }
  if (peeking) {
    if (sum + cost > limit) return slidingLogRefusal(log.entries, expired, sum, cost, limit, windowMs, now);
    const reset = log.entries.length > expired ? log.entries[log.entries.length - 1].ts + windowMs - now : 0;
    return result(true, Math.max(0, limit - sum), 0, reset);
  }
  log.sum = sum;
  if (expired > 0) log.entries.splice(0, expired);
  if (refunding) {
    // Units go back from the newest entries (the ones this context added last), whole entries first.
    let left = refund;
    while (left > 0 && log.entries.length > 0) {
      const newestEntry = log.entries[log.entries.length - 1];
      if (newestEntry.cost > left) {
        newestEntry.cost = newestEntry.cost - left;
        log.sum = log.sum - left;
        left = 0;
      } else {
        log.entries.pop();
        log.sum = log.sum - newestEntry.cost;
        left = left - newestEntry.cost;
      }
    }
    if (log.entries.length === 0) {
      space.slots.delete(key); // a sliding-log key: never a fixed_window slot
      return result(true, Math.max(0, limit), 0, 0);
    }
    const expireAt = log.entries[log.entries.length - 1].ts + windowMs;
    space.put<SlidingLogState>(key, log, expireAt);
    return result(true, Math.max(0, limit - log.sum), 0, expireAt - now);
  }
  if (log.sum + cost > limit) return slidingLogRefusal(log.entries, 0, log.sum, cost, limit, windowMs, now);
  insertSorted(log.entries, { ts: now, cost });
  log.sum = log.sum + cost;
  const newest = log.entries[log.entries.length - 1].ts;
  space.put<SlidingLogState>(key, log, newest + windowMs);
  return result(true, Math.max(0, limit - log.sum), 0, newest + windowMs - now);
}

/**
 * The refusal of `cost` by a sliding log whose entries from `first` on are in the window and sum to
 * `sum`: wait until enough of the oldest entries have left the window for the cost to fit.
 */
function slidingLogRefusal(
  entries: { ts: number; cost: number }[], first: number, sum: number, cost: number, limit: number, windowMs: number, now: number,
): CounterResult {
  const inWindow = entries.length > first;
  const newestTs = inWindow ? entries[entries.length - 1].ts : now;
  const reset = inWindow ? newestTs + windowMs - now : 0;
  let retry = newestTs + windowMs - now;
  let freed = 0;
  for (let i = first; i < entries.length; i++) {
    freed = freed + entries[i].cost;
    if (sum - freed + cost <= limit) {
      retry = entries[i].ts + windowMs - now;
      break;
    }
  }
  return result(false, Math.max(0, limit - sum), retry, reset);
}

/** Inserts after every entry with the same or an earlier time (time order; arrival order on ties). */
function insertSorted(entries: { ts: number; cost: number }[], entry: { ts: number; cost: number }): void {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (entries[mid].ts <= entry.ts) lo = mid + 1;
    else hi = mid;
  }
  entries.splice(lo, 0, entry);
}
