import type { DecisionAnswer } from './answers.js';
import type { StateSlot } from './keyspace.js';
import type { AlgorithmCall } from './mode.js';
import { countInWindow, type WindowState } from './window-count.js';

/** The emulator's quota: mirrors lua/quota.lua. */

export function quota(call: AlgorithmCall, limit: number, periodMs: number): DecisionAnswer {
  const { now } = call;
  // The period starts with the first consumption and lasts periodMs.
  const slot = call.space.live<StateSlot<WindowState>>(call.keys[0], now);
  const stored = slot?.state;
  let periodStart = now;
  let used = 0;
  if (stored && now < stored.periodStart + periodMs) {
    periodStart = stored.periodStart;
    used = stored.used;
  }
  return countInWindow(call, slot, call.windowOf(limit, periodStart, periodStart + periodMs, used));
}
