import type { PeriodPair } from '../../util/calendar-period.js';
import type { DecisionAnswer } from './answers.js';
import type { SlotCarrier, StateSlot } from './keyspace.js';
import type { AlgorithmCall } from './mode.js';
import { countInWindow, type WindowState } from './window-count.js';

/**
 * The emulator's fixed_window and quota in calendar periods: mirrors lua/includes/calendar.lua. The
 * clock `now` picks the period of `pair` (the server's current and next periods); a clock outside
 * both is an error, as the script's.
 */
export function calendarWindow(call: AlgorithmCall, limit: number, pair: PeriodPair): DecisionAnswer {
  const { space, now } = call;
  // pickPeriod's rule, without its array: this runs per decision.
  const first = now >= pair[0] && now < pair[1];
  if (!first && !(now >= pair[1] && now < pair[2])) throw new Error(`rl: the store clock ${now} is outside the calendar periods passed [${pair[0]}, ${pair[2]})`);
  const windowStart = first ? pair[0] : pair[1];
  const windowEnd = first ? pair[1] : pair[2];
  // As fixed_window's: the key array carries its live slot, so a decision skips the Map lookup.
  const keys = call.keys as SlotCarrier<StateSlot<WindowState>>;
  let slot = keys[space.slotTag];
  if (slot === undefined || slot.expireAt <= now) {
    slot = space.live<StateSlot<WindowState>>(keys[0], now);
    if (slot !== undefined) keys[space.slotTag] = slot;
  }
  const stored = slot?.state;
  const used = stored && stored.periodStart === windowStart ? stored.used : 0;
  return countInWindow(call, slot, call.windowOf(limit, windowStart, windowEnd, used));
}
