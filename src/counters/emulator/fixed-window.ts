import type { LeaseCounterResult } from '../counter-store.js';
import { leaseResult, type DecisionAnswer } from './answers.js';
import { FixedWindowSlot } from './keyspace.js';
import type { AlgorithmCall } from './mode.js';
import { windowTake } from './window-count.js';

/** The emulator's fixed_window: mirrors lua/fixed_window.lua. */

export function fixedWindow(call: AlgorithmCall, limit: number, windowMs: number): DecisionAnswer {
  const { space, keys, op, units, now } = call;
  const key = keys[0];
  const windowStart = now - (now % windowMs);
  const windowEnd = windowStart + windowMs;
  // The hottest algorithm: no allocation for a key already in use, and no Map lookup either when
  // the caller hands the same key array again (DecisionService's key cache does) and the slot it
  // carries is still live (not expired; a deleted slot is marked expired).
  let slot = keys[space.slotTag];
  if (slot === undefined || slot.expireAt <= now) {
    slot = space.live<FixedWindowSlot>(key, now);
    if (slot !== undefined) keys[space.slotTag] = slot;
  }
  let used = slot && slot.windowStart === windowStart ? slot.used : 0;
  if (op !== 'consume') {
    if (op === 'take' || op === 'give') return fixedWindowLease(call, slot, used, limit, windowMs);
    const reset = used > 0 ? windowEnd - now : 0;
    if (op === 'refund') {
      if (used > 0) {
        used = Math.max(0, used - units);
        slot!.used = used;
      }
      // Refunded to zero usage, the window is whole again: reset 0, as a peek would then say.
      return { allowed: true, remaining: Math.max(0, limit - used), retryAfterMs: 0, resetAfterMs: used === 0 ? 0 : reset };
    }
    // A peek asks for one unit, a check for its units.
    if (used + (op === 'check' ? units : 1) > limit) return { allowed: false, remaining: Math.max(0, limit - used), retryAfterMs: windowEnd - now, resetAfterMs: windowEnd - now };
    return { allowed: true, remaining: Math.max(0, limit - used), retryAfterMs: 0, resetAfterMs: reset };
  }
  const cost = units;
  if (used + cost > limit) {
    return { allowed: false, remaining: Math.max(0, limit - used), retryAfterMs: windowEnd - now, resetAfterMs: windowEnd - now };
  }
  // Expires at windowEnd, as the script's PEXPIRE.
  if (slot) {
    slot.windowNumber = windowStart / windowMs;
    slot.windowMs = windowMs;
    slot.used = used + cost;
  } else {
    const created = new FixedWindowSlot(windowStart / windowMs, windowMs, used + cost);
    space.slots.set(key, created);
    keys[space.slotTag] = created;
  }
  return { allowed: true, remaining: Math.max(0, limit - (used + cost)), retryAfterMs: 0, resetAfterMs: windowEnd - now };
}

/**
 * fixed_window's lease operations, apart from its hot path: the `giving` and `taking` branches of the
 * script, on the current window of `slot` (absent when nothing is counted), `used` units of it used.
 */
function fixedWindowLease(call: AlgorithmCall, slot: FixedWindowSlot | undefined, used: number, limit: number, windowMs: number): LeaseCounterResult {
  const { space, keys, units, now, tag } = call;
  const windowStart = now - (now % windowMs);
  const windowEnd = windowStart + windowMs;
  let reset = used > 0 ? windowEnd - now : 0;
  if (call.giving) {
    // The units' window has ended: they lapsed, and nothing goes back.
    if (tag !== windowStart) {
      return leaseResult({ allowed: true, remaining: Math.max(0, limit - used), retryAfterMs: 0, resetAfterMs: reset, units: 0, windowTag: windowStart, windowLeftMs: windowEnd - now });
    }
    const before = used;
    if (used > 0) {
      used = Math.max(0, used - units);
      slot!.used = used;
    }
    if (used === 0) reset = 0;
    return leaseResult({ allowed: true, remaining: Math.max(0, limit - used), retryAfterMs: 0, resetAfterMs: reset, units: before - used, windowTag: windowStart, windowLeftMs: windowEnd - now });
  }
  return windowTake(call, call.windowOf(limit, windowStart, windowEnd, used), reset, (taken) => {
    if (slot) {
      slot.windowNumber = windowStart / windowMs;
      slot.windowMs = windowMs;
      slot.used = taken;
    } else {
      const created = new FixedWindowSlot(windowStart / windowMs, windowMs, taken);
      space.slots.set(keys[0], created);
      keys[space.slotTag] = created;
    }
  });
}
