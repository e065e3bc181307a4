import type { ConcurrencySpec } from '../counter-spec.js';
import type { AcquireAnswer, DecisionAnswer } from './answers.js';
import type { MemoryKeyspace } from './keyspace.js';

/**
 * The emulator's concurrency slots: mirrors lua/concurrency_acquire.lua and lua/concurrency_release.lua.
 * An acquire's answer tells whether it took a new slot (`newSlot`): one that only refreshed the slot its
 * slot id held took nothing, so a give-back must not release it (layered-decision.ts).
 */

interface SlotState { leases: Map<string, number> }

export function acquireNow(space: MemoryKeyspace, key: string, spec: ConcurrencySpec, slotId: string, now: number): AcquireAnswer {
  const max = spec.maxConcurrency;
  const leases = liveSlots(space, key, now);
  const held = leases.has(slotId);
  if (held || leases.size < max) {
    leases.set(slotId, now + spec.leaseTtlMs);
    const latest = maxValue(leases);
    space.put<SlotState>(key, { leases }, latest);
    return { allowed: true, remaining: Math.max(0, max - leases.size), retryAfterMs: 0, resetAfterMs: latest - now, newSlot: !held };
  }
  const retry = minValue(leases) - now;
  return { allowed: false, remaining: Math.max(0, max - leases.size), retryAfterMs: retry, resetAfterMs: maxValue(leases) - now, newSlot: false };
}

/** The answer acquireNow would give now, writing nothing (lua/concurrency_acquire.lua with 'check'). */
export function acquireCheck(space: MemoryKeyspace, key: string, spec: ConcurrencySpec, slotId: string, now: number): AcquireAnswer {
  const max = spec.maxConcurrency;
  const leases = liveSlots(space, key, now);
  const latest = leases.size > 0 ? maxValue(leases) - now : 0;
  const held = leases.has(slotId);
  if (held || leases.size < max) return { allowed: true, remaining: Math.max(0, max - leases.size), retryAfterMs: 0, resetAfterMs: latest, newSlot: !held };
  return { allowed: false, remaining: Math.max(0, max - leases.size), retryAfterMs: minValue(leases) - now, resetAfterMs: latest, newSlot: false };
}

export function releaseNow(space: MemoryKeyspace, key: string, spec: ConcurrencySpec, slotId: string, now: number): DecisionAnswer {
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
  return { allowed: removed, remaining: Math.max(0, spec.maxConcurrency - leases.size), retryAfterMs: 0, resetAfterMs: reset };
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
