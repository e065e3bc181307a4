import { log } from '../util/log.js';

/** What a holder tried when its parent (or its region's store) failed it. */
export type LeaseFailureKind = 'refill' | 'drain' | 'give_back';

const LOG_EVERY_MS = 10_000;

/**
 * Every lease operation that failed is counted by its caller (LeaseEvents.failed, and the units it cost
 * as lapsed) and logged here, at most once per kind every 10 s, so a partition does not flood the log.
 */
export class LeaseFailureLog {
  private readonly last = new Map<LeaseFailureKind, { at: number; since: number }>();

  constructor(private readonly now: () => number = () => performance.now()) {}

  failed(kind: LeaseFailureKind, error: unknown, fields: Record<string, unknown> = {}): void {
    const now = this.now();
    const last = this.last.get(kind);
    if (last !== undefined && now - last.at < LOG_EVERY_MS) {
      last.since++;
      return;
    }
    this.last.set(kind, { at: now, since: 0 });
    const message = error instanceof Error ? error.message : String(error);
    const since = last && last.since > 0 && { failed_since_last_log: last.since };
    log.warn(`lease ${kind.replace('_', ' ')} failed`, { ...fields, error: message, ...since });
  }
}

/** The process-wide log every holder reports to. */
export const leaseFailureLog = new LeaseFailureLog();
