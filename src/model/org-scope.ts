import { RlError } from '../errors.js';
import type { RequestContext } from './request-context.js';

/**
 * Tenant scoping (docs/tenants.md), in one place: a
 * credential may be limited to some organisations, and everything that reads or spends something of an
 * organisation asks `reachesOrg`. The policy service, the decision entry points and the analytics
 * views call it; no route checks organisations on its own.
 *
 * `orgs` undefined is an unrestricted caller (every organisation, and the global policies whose
 * `scope.org_id` is `*` or absent). A restricted caller reaches exactly the organisations it names.
 */
export type Orgs = readonly string[] | undefined;

/** Who acts: the subject the audit records and the organisations the caller is limited to (none: every one). */
export interface Actor {
  subject: string;
  orgs?: readonly string[];
}

/** An unrestricted actor of that name (tools, seeding, the embedded client). */
export function actorOf(by: string | Actor): Actor {
  return typeof by === 'string' ? { subject: by } : by;
}

/** THE rule: does a caller limited to `orgs` reach something of organisation `orgId` (`*`/absent: global)? */
export function reachesOrg(orgs: Orgs, orgId: string | undefined): boolean {
  return orgs === undefined || (orgId !== undefined && orgId !== '*' && orgs.includes(orgId));
}

/** RL_PLATFORM_LAYERS' default: the layer named `platform` belongs to the platform. */
export const DEFAULT_PLATFORM_LAYERS: readonly string[] = ['platform'];

/** What the rule reads of a policy: its organisation and its layer (absent: `default`). */
export type PolicyReach = { scope?: { org_id?: string }; layer?: string };

/**
 * THE rule for policies, over `reachesOrg`: a restricted caller reaches a policy of one of its
 * organisations that is not in a platform layer. Platform layers (RL_PLATFORM_LAYERS) bind every
 * organisation's traffic, so only an unrestricted caller reads or writes them.
 */
export function reachesPolicy(orgs: Orgs, policy: PolicyReach, platformLayers: readonly string[]): boolean {
  return orgs === undefined || (!platformLayers.includes(policy.layer ?? 'default') && reachesOrg(orgs, policy.scope?.org_id));
}

/**
 * A policy a restricted caller writes (its result) must be reachable by it: a platform layer is a 403
 * naming `layer`, another organisation a 403 naming `scope.org_id`.
 */
export function requireReachable(orgs: Orgs, policy: PolicyReach, platformLayers: readonly string[]): void {
  if (orgs === undefined) return;
  const layer = policy.layer ?? 'default';
  if (platformLayers.includes(layer)) {
    throw new RlError('permission_denied', `layer is ${JSON.stringify(layer)}, a platform layer: only a credential that is not limited to organisations writes its policies`, 'layer', { field: 'layer' });
  }
  if (!reachesOrg(orgs, policy.scope?.org_id)) throw outsideOrgs('scope.org_id', policy.scope?.org_id, orgs);
}

/** Whether a restricted caller may be named an organisation: `*` (every one) and empty names cannot be. */
export function isOrgName(value: string): boolean {
  return value !== '' && value !== '*' && value.trim() === value;
}

/**
 * The organisation check of a decision call (check, acquire, release, refund) on its parsed context:
 * a restricted caller's `org_id` must be one of its organisations; with exactly one, an absent `org_id`
 * is filled in with it. Otherwise a 403 (gRPC PERMISSION_DENIED) naming `org_id`.
 */
export function scopeDecisionOrg(orgs: Orgs, ctx: RequestContext): RequestContext {
  if (orgs === undefined) return ctx;
  if (ctx.org_id === undefined && orgs.length === 1) {
    ctx.org_id = orgs[0];
    return ctx;
  }
  if (reachesOrg(orgs, ctx.org_id)) return ctx;
  throw outsideOrgs('org_id', ctx.org_id, orgs);
}

/**
 * A unit that needs every organisation (the Envoy RLS adapter, /metrics): a restricted caller gets a 403.
 * `what` names the call.
 */
export function requireUnrestricted(orgs: Orgs, what: string): void {
  if (orgs !== undefined) throw new RlError('permission_denied', `${what} needs a credential that is not limited to organisations`);
}

/**
 * The 403 of a value outside the caller's organisations, naming the field (`org_id`, `scope.org_id`) in
 * its message and as the error body's `field` (so a sidecar can tell it from a refused credential).
 */
export function outsideOrgs(field: string, value: string | undefined, orgs: readonly string[]): RlError {
  const given = value === undefined ? 'is absent' : value === '*' ? 'is "*" (every organisation)' : `is ${JSON.stringify(value)}`;
  return new RlError('permission_denied', `${field} ${given}: this credential acts only for ${listOrgs(orgs)}`, field, { field });
}

function listOrgs(orgs: readonly string[]): string {
  if (orgs.length === 0) return 'no organisation';
  return `organisation${orgs.length === 1 ? '' : 's'} ${orgs.map((o) => JSON.stringify(o)).join(', ')}`;
}
