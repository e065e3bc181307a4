import type { MatcherSource } from '../matching/live-matcher.js';
import { DEFAULT_PLATFORM_LAYERS, reachesOrg, reachesPolicy } from '../model/org-scope.js';
import type { AnalyticsView } from './analytics.js';

/**
 * What a caller limited to organisations sees of the service's observations (analytics, the stream,
 * denied identities): the decisions of its organisations and the live policies whose `scope.org_id` it
 * reaches, both by the one org rule (model/org-scope.ts; a platform layer's policies are not its own). A
 * policy that is gone is no longer seen.
 */
export class OrgView implements AnalyticsView {
  constructor(
    readonly orgs: readonly string[],
    private readonly policies: MatcherSource,
    private readonly platformLayers: readonly string[] = DEFAULT_PLATFORM_LAYERS,
  ) {}

  seesOrg(orgId: string): boolean {
    return reachesOrg(this.orgs, orgId);
  }

  seesPolicy(policyId: string): boolean {
    const compiled = this.policies.current().get(policyId);
    return compiled !== undefined && reachesPolicy(this.orgs, compiled.policy, this.platformLayers);
  }
}
