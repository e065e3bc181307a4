import type { PeriodPair } from '../../util/calendar-period.js';
import type { CounterResult } from '../counter-store.js';
import type { MemoryKeyspace, SlotCarrier, StateSlot } from './keyspace.js';
import type { AlgorithmOperation } from './mode.js';
import { countInWindow, type WindowState } from './window-count.js';

/**
 * The emulator's fixed_window and quota in calendar periods: mirrors lua/includes/calendar.lua. The
 * clock `now` picks the period of `pair` (the server's current and next periods); a clock outside
 * both is an error, as the script's.
 */
export function calendarWindow(
  space: MemoryKeyspace, keys: SlotCarrier<StateSlot<WindowState>>, limit: number, pair: PeriodPair, op: AlgorithmOperation, units: number, now: number, giveTag: number,
): CounterResult {
  // pickPeriod's rule, without its array: this runs per decision.
  const first = now >= pair[0] && now < pair[1];
  if (!first && !(now >= pair[1] && now < pair[2])) throw new Error(`rl: the store clock ${now} is outside the calendar periods passed [${pair[0]}, ${pair[2]})`);
  const windowStart = first ? pair[0] : pair[1];
  const windowEnd = first ? pair[1] : pair[2];
  const key = keys[0];
  // As fixed_window's: the key array carries its live slot, so a decision skips the Map lookup.
  let slot = keys[space.slotTag];
  if (slot === undefined || slot.expireAt <= now) {
    slot = space.live<StateSlot<WindowState>>(key, now);
    if (slot !== undefined) keys[space.slotTag] = slot;
  }
  const stored = slot?.state;
  const used = stored && stored.periodStart === windowStart ? stored.used : 0;
  return countInWindow(space, key, slot, limit, windowStart, windowEnd, used, op, units, now, giveTag);
}
