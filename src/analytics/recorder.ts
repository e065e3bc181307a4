import type { DecisionEvent, DecisionRecorder } from '../decision/decision-service.js';
import { log } from '../util/log.js';
import type { Analytics } from './analytics.js';
import type { Metrics } from '../observability/metrics.js';

/**
 * Feeds every decision to metrics and analytics. Runs synchronously on the decision path, so both
 * sinks are O(1)-ish per event (plus one step per tag). A fault in either is logged (at most once a
 * minute) and swallowed: observability must never turn a decision into a 500.
 */
export class ObservabilityRecorder implements DecisionRecorder {
  private lastErrorLogMs = 0;

  constructor(
    private readonly metrics?: Metrics,
    private readonly analytics?: Analytics,
  ) {}

  record(event: DecisionEvent): void {
    try {
      this.metrics?.recordDecision(event);
      // A refund gives units back; it is not a request that was allowed or denied.
      if (event.operation !== 'refund') this.analytics?.record(event);
    } catch (error) {
      const now = Date.now();
      if (now - this.lastErrorLogMs >= 60_000) {
        this.lastErrorLogMs = now;
        log.error('recording a decision failed', { error: String((error as Error)?.stack ?? error) });
      }
    }
  }
}
