import type { MatcherSource } from '../decision/decision-service.js';
import { Matcher } from './matcher.js';
import type { Policy } from './types.js';

/**
 * Holds the compiled Matcher every decision reads. Rebuilt (off the hot path) whenever the policy
 * set changes; a decision in flight keeps the snapshot it started with.
 */
export class LiveMatcher implements MatcherSource {
  private matcher: Matcher;

  constructor(policies: readonly Policy[] = []) {
    this.matcher = Matcher.build(policies);
  }

  current(): Matcher {
    return this.matcher;
  }

  replace(policies: readonly Policy[]): void {
    this.matcher = Matcher.build(policies);
  }
}
