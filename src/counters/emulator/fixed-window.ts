import type { CounterResult, LeaseCounterResult } from '../counter-store.js';
import { leaseResult, result } from './answers.js';
import { FixedWindowSlot, type MemoryKeyspace, type SlotCarrier } from './keyspace.js';
import type { AlgorithmOperation } from './mode.js';
import { windowTake } from './window-count.js';

/** The emulator's fixed_window: mirrors lua/fixed_window.lua. */

export function fixedWindow(space: MemoryKeyspace, keys: SlotCarrier, limit: number, windowMs: number, op: AlgorithmOperation, units: number, now: number, tag: number): CounterResult {
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
    if (op === 'take' || op === 'give') return fixedWindowLease(space, keys, slot, used, limit, windowStart, windowMs, op, units, now, tag);
    const reset = used > 0 ? windowEnd - now : 0;
    if (op === 'refund') {
      if (used > 0) {
        used = Math.max(0, used - units);
        slot!.used = used;
      }
      // Refunded to zero usage, the window is whole again: reset 0, as a peek would then say.
      return result(true, Math.max(0, limit - used), 0, used === 0 ? 0 : reset);
    }
    // A peek asks for one unit, a check for its units.
    if (used + (op === 'check' ? units : 1) > limit) return result(false, Math.max(0, limit - used), windowEnd - now, windowEnd - now);
    return result(true, Math.max(0, limit - used), 0, reset);
  }
  const cost = units;
  if (used + cost > limit) {
    return result(false, Math.max(0, limit - used), windowEnd - now, windowEnd - now);
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
  return result(true, Math.max(0, limit - (used + cost)), 0, windowEnd - now);
}

/** fixed_window's lease operations, apart from its hot path: the `giving` and `taking` branches of the script. */
function fixedWindowLease(
  space: MemoryKeyspace, keys: SlotCarrier, slot: FixedWindowSlot | undefined, used: number, limit: number, windowStart: number, windowMs: number,
  op: 'take' | 'give', units: number, now: number, tag: number,
): LeaseCounterResult {
  const windowEnd = windowStart + windowMs;
  let reset = used > 0 ? windowEnd - now : 0;
  if (op === 'give') {
    // The units' window has ended: they lapsed, and nothing goes back.
    if (tag !== windowStart) return leaseResult(true, Math.max(0, limit - used), 0, reset, 0, windowStart, windowEnd - now);
    const before = used;
    if (used > 0) {
      used = Math.max(0, used - units);
      slot!.used = used;
    }
    if (used === 0) reset = 0;
    return leaseResult(true, Math.max(0, limit - used), 0, reset, before - used, windowStart, windowEnd - now);
  }
  return windowTake(units, used, limit, windowStart, windowEnd, reset, now, (taken) => {
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
