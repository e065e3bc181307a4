import { log } from '../util/log.js';
import type { LeaseEvents, LeaseFailureKind } from './types.js';

const LOG_EVERY_MS = 10_000;
const lastLogged = new Map<LeaseFailureKind, { at: number; since: number }>();

/**
 * A lease operation failed: counted through the owner's events (rl_counter_store_errors_total; the units it cost are
 * counted lapsed by the caller) and logged with its fields, at most once per kind every 10 s, so a partition does not flood the log.
 */
export function leaseFailed(owner: { events: LeaseEvents; fields?: Record<string, unknown> }, kind: LeaseFailureKind, error: unknown, fields: Record<string, unknown> = {}): void {
  owner.events.failed?.(kind);
  const now = performance.now();
  const last = lastLogged.get(kind);
  if (last !== undefined && now - last.at < LOG_EVERY_MS) {
    last.since++;
    return;
  }
  lastLogged.set(kind, { at: now, since: 0 });
  const message = error instanceof Error ? error.message : String(error);
  const since = last && last.since > 0 && { failed_since_last_log: last.since };
  log.warn(`lease ${kind.replace('_', ' ')} failed`, { ...owner.fields, ...fields, error: message, ...since });
}
