import type { CounterResult } from '../counter-store.js';
import type { MemoryKeyspace, StateSlot } from './keyspace.js';
import type { AlgorithmOperation } from './mode.js';
import { countInWindow, type WindowState } from './window-count.js';

/** The emulator's quota: mirrors lua/quota.lua. */

export function quota(space: MemoryKeyspace, key: string, limit: number, periodMs: number, op: AlgorithmOperation, units: number, now: number, giveTag: number): CounterResult {
  // The period starts with the first consumption and lasts periodMs.
  const slot = space.live<StateSlot<WindowState>>(key, now);
  const stored = slot?.state;
  let periodStart = now;
  let used = 0;
  if (stored && now < stored.periodStart + periodMs) {
    periodStart = stored.periodStart;
    used = stored.used;
  }
  return countInWindow(space, key, slot, limit, periodStart, periodStart + periodMs, used, op, units, now, giveTag);
}
