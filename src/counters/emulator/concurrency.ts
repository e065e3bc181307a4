import type { CounterResult } from '../counter-store.js';
import type { ConcurrencySpec } from '../counter-spec.js';
import { result } from './answers.js';
import type { MemoryKeyspace } from './keyspace.js';

/**
 * The emulator's concurrency slots: mirrors lua/concurrency_acquire.lua and lua/concurrency_release.lua.
 * An acquire's answer tells whether it took a new slot (`newSlot`): one that only refreshed the slot its
 * slot id held took nothing, so a give-back must not release it (layered-decision.ts).
 */

interface SlotState { leases: Map<string, number> }

export function acquireNow(space: MemoryKeyspace, key: string, spec: ConcurrencySpec, slotId: string, now: number): CounterResult {
  const max = spec.maxConcurrency;
  const leases = liveSlots(space, key, now);
  const held = leases.has(slotId);
  if (held || leases.size < max) {
    leases.set(slotId, now + spec.leaseTtlMs);
    const latest = maxValue(leases);
    space.put<SlotState>(key, { leases }, latest);
    return acquired(true, Math.max(0, max - leases.size), 0, latest - now, !held);
  }
  const retry = minValue(leases) - now;
  return acquired(false, Math.max(0, max - leases.size), retry, maxValue(leases) - now, false);
}

/** The answer acquireNow would give now, writing nothing (lua/concurrency_acquire.lua with 'check'). */
export function acquireCheck(space: MemoryKeyspace, key: string, spec: ConcurrencySpec, slotId: string, now: number): CounterResult {
  const max = spec.maxConcurrency;
  const leases = liveSlots(space, key, now);
  const latest = leases.size > 0 ? maxValue(leases) - now : 0;
  const held = leases.has(slotId);
  if (held || leases.size < max) return acquired(true, Math.max(0, max - leases.size), 0, latest, !held);
  return acquired(false, Math.max(0, max - leases.size), minValue(leases) - now, latest, false);
}

/** An acquire's answer: the script's reply with its 5th entry, whether a new slot was taken. */
function acquired(allowed: boolean, remaining: number, retryAfterMs: number, resetAfterMs: number, newSlot: boolean): CounterResult {
  return { allowed, remaining, retryAfterMs, resetAfterMs, newSlot };
}

export function releaseNow(space: MemoryKeyspace, key: string, spec: ConcurrencySpec, slotId: string, now: number): CounterResult {
  const leases = liveSlots(space, key, now);
  const removed = leases.delete(slotId);
  let reset = 0;
  if (leases.size === 0) {
    space.slots.delete(key); // a lease key: never a fixed_window slot (keys carry their algorithm)
  } else {
    const latest = maxValue(leases);
    space.put<SlotState>(key, { leases }, latest);
    reset = latest - now;
  }
  return result(removed, Math.max(0, spec.maxConcurrency - leases.size), 0, reset);
}

function liveSlots(space: MemoryKeyspace, key: string, now: number): Map<string, number> {
  const leases = space.get<SlotState>(key, now)?.leases ?? new Map<string, number>();
  for (const [id, expiresAt] of leases) if (expiresAt <= now) leases.delete(id);
  return leases;
}

function maxValue(map: Map<string, number>): number {
  let max = -Infinity;
  for (const v of map.values()) if (v > max) max = v;
  return max;
}

function minValue(map: Map<string, number>): number {
  let min = Infinity;
  for (const v of map.values()) if (v < min) min = v;
  return min;
}
