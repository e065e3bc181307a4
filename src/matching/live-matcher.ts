import type { MatcherSource } from '../decision/decision-service.js';
import { Matcher, type SkippedPolicy } from './matcher.js';
import type { Policy } from '../policy/types.js';
import { log } from '../util/log.js';

/**
 * Holds the compiled Matcher every decision reads. `apply` changes one policy in the current one, in
 * place and without a rebuild (see Matcher: safe because matching is synchronous and compiled policies
 * never change); `replace` takes a whole policy set (start-up, a store's full reload) and builds a new
 * matcher only when much of it changed.
 */
export class LiveMatcher implements MatcherSource {
  private matcher: Matcher;
  private readonly listeners: (() => void)[] = [];

  constructor(policies: readonly Policy[] = []) {
    this.matcher = build(policies);
  }

  current(): Matcher {
    return this.matcher;
  }

  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  /**
   * The whole policy set: applied policy by policy when few differ from what the current matcher holds
   * (by object: a store's reload keeps the object of every policy it did not change), else a new build.
   */
  replace(policies: readonly Policy[]): void {
    const maxChanges = Math.max(16, this.matcher.size / 32); // about where a build becomes cheaper
    if (!this.matcher.applyAll(policies, maxChanges, logSkipped)) this.matcher = build(policies);
    this.changed();
  }

  /** One policy changed: `policy` is its current state, undefined once deleted. */
  apply(policyId: string, policy: Policy | undefined): void {
    const skipped = this.matcher.apply(policyId, policy);
    if (skipped) logSkipped(skipped);
    this.changed();
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
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
