import type { DecisionEvent, DecisionRecorder } from '../decision/decision-service.js';
import type { MatcherSource } from '../matching/live-matcher.js';
import { wildcardValue, type CompiledPolicy } from '../matching/matcher.js';
import type { AnalyticsView } from './analytics.js';
import { SpaceSaving } from './space-saving.js';

/**
 * Who is being limited: heavy hitters among the identities that policies DENIED, in bounded memory (a
 * Space-Saving counter, as analytics' top tags). A policy's identity is what it counts separately: the
 * request's values of its `*` scope fields and `*` tags, in sorted name order (as the matcher keys its
 * counters; `source_ip` as its client network), e.g. `user_id=carol`; a policy without any `*` counts everyone together (`(everyone)`).
 *
 * Only denied decisions reach the counter (shadow answers and allowed ones return at the first test), so
 * the ordinary decision pays one comparison. The `*` fields are the matcher's compiled ones (read from the
 * live snapshot, so a policy change costs nothing here). Never throws into the decision path.
 */
export interface DeniedIdentity {
  policy_id: string;
  identity: string;
  /** Denials counted; may overstate the true count by at most `error`. */
  count: number;
  error: number;
}

export const EVERYONE = '(everyone)';
const MAX_VALUE_LENGTH = 128;

export class DeniedIdentities implements DecisionRecorder {
  private readonly counts: SpaceSaving;

  constructor(
    private readonly policies: MatcherSource,
    capacity = 1000,
  ) {
    this.counts = new SpaceSaving(capacity);
  }

  record(event: DecisionEvent): void {
    const { decision } = event;
    // A release that found no lease is not a denial.
    if (decision.allowed || decision.matched_policy_id === '' || decision.shadow_mode || event.operation === 'release') return;
    try {
      this.counts.offer(decision.matched_policy_id, this.identityOf(decision.matched_policy_id, event.ctx));
    } catch {
      // Bookkeeping for a dashboard must never fail a decision.
    }
  }

  /** The `limit` most denied identities, most denied first; with a `view`, of the policies it sees only. */
  top(limit: number, view?: Pick<AnalyticsView, 'seesPolicy'>): DeniedIdentity[] {
    const hitters = view === undefined ? this.counts.top(limit) : this.counts.top().filter((h) => view.seesPolicy(h.key)).slice(0, limit);
    return hitters.map((h) => ({ policy_id: h.key, identity: h.value, count: h.count, error: h.error }));
  }

  private identityOf(policyId: string, ctx: DecisionEvent['ctx']): string {
    const compiled = this.policies.current().get(policyId);
    if (!compiled || compiled.wildcards.length === 0) return EVERYONE;
    const parts: string[] = [];
    for (const wildcard of compiled.wildcards) {
      const text = wildcardValue(wildcard, ctx);
      parts.push(`${wildcard.name}=${text.length > MAX_VALUE_LENGTH ? `${text.slice(0, MAX_VALUE_LENGTH)}…` : text}`);
    }
    return parts.join(', ');
  }
}

/** The names of a compiled policy's `*` scope fields and `tags.<key>` for `*` tags, sorted (the identity order). */
export function wildcardNames(policy: CompiledPolicy): string[] {
  return policy.wildcards.map((w) => w.name);
}

/** One recorder feeding two (the observability recorder and this one), in order. */
export function bothRecorders(first: DecisionRecorder, second: DecisionRecorder): DecisionRecorder {
  return {
    record(event) {
      first.record(event);
      second.record(event);
    },
  };
}
