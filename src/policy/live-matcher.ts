import type { MatcherSource } from '../decision/decision-service.js';
import { Matcher, type SkippedPolicy } from './matcher.js';
import type { Policy } from './types.js';
import { log } from '../util/log.js';

/**
 * Holds the compiled Matcher every decision reads. `replace` builds a new one from a whole policy set
 * (start-up, a full reload); `apply` changes one policy in the current one, in place and without a
 * rebuild (see Matcher: safe because matching is synchronous and compiled policies never change).
 */
export class LiveMatcher implements MatcherSource {
  private matcher: Matcher;

  constructor(policies: readonly Policy[] = []) {
    this.matcher = build(policies);
  }

  current(): Matcher {
    return this.matcher;
  }

  replace(policies: readonly Policy[]): void {
    this.matcher = build(policies);
  }

  /** One policy changed: `policy` is its current state, undefined once deleted. */
  apply(policyId: string, policy: Policy | undefined): void {
    const skipped = this.matcher.apply(policyId, policy);
    if (skipped) logSkipped(skipped);
  }
}

function build(policies: readonly Policy[]): Matcher {
  const matcher = Matcher.build(policies);
  for (const skipped of matcher.skipped) logSkipped(skipped);
  return matcher;
}

/** Validation refuses such policies on the way in; one stored by an older version must not go unseen. */
function logSkipped(skipped: SkippedPolicy): void {
  log.error('policy cannot be compiled and never matches', { ...skipped });
}
