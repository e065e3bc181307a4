import type { MatcherSource } from '../decision/decision-service.js';
import { Matcher } from './matcher.js';
import type { Policy } from './types.js';
import { log } from '../util/log.js';

/**
 * Holds the compiled Matcher every decision reads. Rebuilt (off the hot path) whenever the policy
 * set changes; a decision in flight keeps the snapshot it started with.
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
}

function build(policies: readonly Policy[]): Matcher {
  const matcher = Matcher.build(policies);
  // Validation refuses such policies on the way in; one stored by an older version must not go unseen.
  for (const skipped of matcher.skipped) log.error('policy cannot be compiled and never matches', { ...skipped });
  return matcher;
}
