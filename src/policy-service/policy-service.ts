import { randomUUID } from 'node:crypto';
import { RlError, notFound } from '../errors.js';
import { describe } from '../model/request-context.js';
import { DEFAULT_PLATFORM_LAYERS, actorOf, reachesPolicy, requireReachable, type Actor, type Orgs } from '../model/org-scope.js';
import { MAX_JSON_DEPTH } from '../util/json-shape.js';
import type { LiveMatcher } from '../matching/live-matcher.js';
import {
  unixSecondsOf,
  type AuditAction,
  type AuditEntry,
  type PolicyStore,
  type PolicyVersion,
} from '../policy-store/policy-store.js';
import { ROLLOUT_PERCENT } from '../schema/policy.js';
import type { FieldError, Policy } from '../policy/types.js';
import { storedPolicy } from '../policy/stored-policy.js';
import { oversizedCollections, validatePolicy, type PolicyInput } from '../policy/validate.js';
import { quotaPatchToPolicyPatch } from '../policy/quota-alias.js';
import { mergePatch } from '../util/merge-patch.js';
import { tieWarnings, type PolicyWarning } from './policy-ties.js';
import { TieIndex } from './tie-index.js';
import { LayerCensus } from './layer-census.js';
import {
  bodyVersion,
  expectationsOf,
  inputOf,
  preconditionFailed,
  requiredInteger,
  requireObject,
  toPlain,
  tooDeep,
  validationFailed,
  validOrThrow,
  type Expectation,
  type Obj,
  type WriteOptions,
} from './policy-bodies.js';

/**
 * Policy management, free of any transport (docs/reference.md "Statuses"): the HTTP routes
 * are thin adapters around these methods. Bodies arrive as untrusted decoded JSON; every problem is
 * an RlError (400 bad input, 404 unknown policy or version, 409 duplicate or stale version, 422 a policy
 * that fails validation).
 *
 * Optimistic concurrency: a caller may state the version it read, as `version` in a PUT/PATCH body
 * or as an `If-Match` header on any change; when it is not current the change is refused (409). The
 * check is repeated atomically by the store, so of two concurrent changes based on the same version
 * exactly one wins. Callers that state no version get last-writer-wins: a change that lost a race
 * with another is rebased on the new state and retried.
 *
 * Tenants (model/org-scope.ts): every method takes the caller (`Actor`; a plain string is an
 * unrestricted caller of that name). A caller limited to organisations sees and changes only policies
 * whose `scope.org_id` is one of them: any other policy, its versions and its audit answer 404 as if
 * absent, and a create or change whose result would leave its organisations answers 403 naming
 * `scope.org_id`. Policies of a platform layer (RL_PLATFORM_LAYERS) are an unrestricted caller's only:
 * 404 to read for a restricted one, 403 naming `layer` to write. Policy ids are one namespace, so a create of an id another organisation holds is
 * still a 409 (without its version).
 *
 * Every change produces a new version (`version` +1; a delete keeps the last version number and
 * a later re-create continues after it, so version numbers of one policy_id never repeat) and one
 * audit entry, recorded by the store together with the change.
 */

export interface PolicyServiceDeps {
  store: PolicyStore;
  /** Built from the store's policies, then kept up to date with every local or remote change. */
  matcher?: LiveMatcher;
  now?: () => number;
  newAuditId?: () => string;
  /** RL_PLATFORM_LAYERS: layers only unrestricted callers read and write (default `platform`). */
  platformLayers?: readonly string[];
}

export type { WriteOptions } from './policy-bodies.js';

export interface ValidationReport {
  valid: boolean;
  errors: FieldError[];
}

export interface DeleteResult {
  deleted: true;
  policy_id: string;
}

/** How often a change without a stated version is rebased after losing a race. */
const MAX_ATTEMPTS = 10;

export class PolicyService {
  private readonly store: PolicyStore;
  private readonly now: () => number;
  private readonly newAuditId: () => string;
  private readonly unsubscribe: () => void;
  private readonly platformLayers: readonly string[];
  private readonly layers: LayerCensus;
  private readonly ties: TieIndex;
  private readonly unsubscribeIndexes: () => void;

  constructor(deps: PolicyServiceDeps) {
    this.store = deps.store;
    this.platformLayers = deps.platformLayers ?? DEFAULT_PLATFORM_LAYERS;
    const policies = this.store.list();
    this.layers = new LayerCensus(deps.store, policies);
    this.ties = new TieIndex(deps.store, policies);
    this.unsubscribeIndexes = deps.store.onChange((event) => {
      this.layers.changed(event);
      this.ties.changed(event);
    });
    this.now = deps.now ?? Date.now;
    this.newAuditId = deps.newAuditId ?? randomUUID;
    const matcher = deps.matcher;
    if (matcher) {
      matcher.replace(policies);
      // One changed policy is applied alone (no rebuild, no sorted list); a reload may have changed anything.
      this.unsubscribe = this.store.onChange((event) => {
        if (event.change === 'reloaded') matcher.replace(this.store.list());
        else matcher.apply(event.policy_id, this.store.get(event.policy_id));
      });
    } else {
      this.unsubscribe = () => undefined;
    }
  }

  /** Stops following store changes. */
  close(): void {
    this.unsubscribe();
    this.unsubscribeIndexes();
  }

  /** The store revision: equal values mean the policy set did not change. */
  revision(): number {
    return this.store.revision();
  }

  /** The policies the caller reaches (all of them for an unrestricted caller). */
  list(caller?: Actor): Policy[] {
    const orgs = caller?.orgs;
    const all = this.store.list();
    return orgs === undefined ? all : all.filter((p) => this.reaches(orgs, p));
  }

  get(policyId: string, caller?: Actor): Policy {
    const policy = this.store.get(policyId);
    if (!policy || !this.reaches(caller?.orgs, policy)) throw policyNotFound(policyId);
    return policy;
  }

  /**
   * The tie warnings of a policy just written (policy-ties.ts), against the other policies the caller
   * reaches: a policy it cannot read is never named.
   */
  warningsFor(policy: Policy, caller?: Actor): PolicyWarning[] {
    const orgs = caller?.orgs;
    const rivals = this.ties.rivals(policy);
    return tieWarnings(policy, orgs === undefined ? rivals : rivals.filter((p) => this.reaches(orgs, p)), this.now());
  }

  /** A policy the caller could not create is a 403 naming `scope.org_id`, as the create would answer. */
  validate(body: unknown, caller?: Actor): ValidationReport {
    if (tooDeep(body)) return { valid: false, errors: [{ field: 'body', message: `is nested more than ${MAX_JSON_DEPTH} levels deep` }] };
    const result = validatePolicy(body, { requireId: false });
    if (!result.ok) return { valid: false, errors: result.errors };
    this.requireWithin(caller?.orgs, result.policy);
    return { valid: true, errors: [] };
  }

  /** POST: a new policy (version 1, or the next number after a deleted policy of the same id). */
  async create(body: unknown, by: string | Actor): Promise<Policy> {
    const { subject: changedBy, orgs } = actorOf(by);
    requireObject(body);
    const input = validOrThrow(body, true);
    this.requireWithin(orgs, input);
    const id = input.policy_id;
    this.requireLayerRoom(input);
    for (let attempt = 1; ; attempt++) {
      const { policy: existing, head } = await this.store.fetch(id);
      if (existing) {
        const which = this.reaches(orgs, existing) ? ` (version ${existing.version})` : ' (policy ids are shared by every organisation)';
        throw new RlError('conflict', `policy_id "${id}" already exists${which}`, 'policy_id');
      }
      const at = this.now();
      const policy = stamp(input, head + 1, isoOf(at), isoOf(at));
      const result = await this.store.commit({
        policy_id: id,
        action: 'create',
        expectedHead: head,
        mustExist: false,
        policy,
        audit: this.auditEntry('create', changedBy, at, policy.version, null, policy),
      });
      if (result.ok) return policy;
      if (attempt >= MAX_ATTEMPTS) throw changedConcurrently(id);
    }
  }

  /** PUT: the full policy; its `policy_id`, when given, must equal the path id. */
  async replace(policyId: string, body: unknown, by: string | Actor, options: WriteOptions = {}): Promise<Policy> {
    requireObject(body);
    const expectations = expectationsOf(bodyVersion(body), options);
    const result = validatePolicy(body, { requireId: false });
    if (!result.ok) throw validationFailed(result.errors);
    const input = result.policy;
    if (input.policy_id === '') {
      input.policy_id = policyId;
      if (!Object.prototype.hasOwnProperty.call(body, 'name') || (body as Obj).name === null) input.name = policyId;
    } else if (input.policy_id !== policyId) {
      throw validationFailed([{ field: 'policy_id', message: `must equal the policy id in the path ("${policyId}"), got "${input.policy_id}"` }]);
    }
    return this.change(policyId, 'update', by, expectations, () => input);
  }

  /** PATCH: an RFC 7396 JSON merge patch over the stored policy's public shape, then validated. */
  async patch(policyId: string, body: unknown, by: string | Actor, options: WriteOptions = {}): Promise<Policy> {
    // Refused before the depth check or the merge walks an oversized collection (validation would refuse
    // it anyway, after the walk).
    const oversized = oversizedCollections(body);
    if (oversized.length > 0) throw validationFailed(oversized);
    requireObject(body);
    const expectations = expectationsOf(bodyVersion(body), options);
    const patch = quotaPatchToPolicyPatch(body as Obj);
    return this.change(policyId, 'patch', by, expectations, (current) => {
      const merged = mergePatch(toPlain(current), patch) as Obj;
      delete merged.version;
      delete merged.created_at;
      delete merged.updated_at;
      if (merged.policy_id !== policyId) {
        throw validationFailed([{ field: 'policy_id', message: `cannot be changed by a patch (the policy is "${policyId}"), got ${describe(merged.policy_id)}` }]);
      }
      return validOrThrow(merged, true);
    });
  }

  async delete(policyId: string, by: string | Actor, options: WriteOptions = {}): Promise<DeleteResult> {
    await this.remove(policyId, by, options);
    return { deleted: true, policy_id: policyId };
  }

  /** `delete`, answering the policy as it was (its `version` is the one deleted). */
  remove(policyId: string, by: string | Actor, options: WriteOptions = {}): Promise<Policy> {
    return this.change(policyId, 'delete', by, expectationsOf(undefined, options), () => null);
  }

  /** Body `{"rollout_percent": 0..100}`. */
  async rollout(policyId: string, body: unknown, by: string | Actor, options: WriteOptions = {}): Promise<Policy> {
    const { minimum, maximum } = ROLLOUT_PERCENT;
    const percent = requiredInteger(body, 'rollout_percent', minimum, maximum, `an integer from ${minimum} to ${maximum}`);
    return this.change(policyId, 'rollout', by, expectationsOf(undefined, options), (current) => {
      const input = inputOf(current);
      input.rollout_percent = percent;
      return input;
    });
  }

  /** Body `{"version": N}`: a new version whose content is version N's. An unknown N is a 404. */
  async rollback(policyId: string, body: unknown, by: string | Actor, options: WriteOptions = {}): Promise<Policy> {
    const target = requiredInteger(body, 'version', 1, Number.MAX_SAFE_INTEGER, 'a positive integer (the version to restore)');
    let snapshot: Policy | undefined;
    return this.change(policyId, 'rollback', by, expectationsOf(undefined, options), async () => {
      if (!snapshot) {
        // Only versions the caller reaches: one from another organisation is "not found" like any other.
        const orgs = actorOf(by).orgs;
        const versions = (await this.store.versions(policyId)).filter((v) => this.reaches(orgs, v.snapshot));
        snapshot = versions.find((v) => v.version === target)?.snapshot;
        if (!snapshot) {
          const known = versions.length > 0 ? ` (versions 1 to ${versions[versions.length - 1].version} exist)` : '';
          throw notFound(`version ${target} of policy "${policyId}" not found${known}`);
        }
      }
      // Re-validated: the validator may have become stricter since that version was written.
      return validOrThrow(toPlain({ ...snapshot, policy_id: policyId }), true);
    }, { restored_version: target });
  }

  /** The versions whose content the caller reaches (a policy that moved between organisations shows each its own). */
  async versions(policyId: string, caller?: Actor): Promise<PolicyVersion[]> {
    const orgs = caller?.orgs;
    const versions = (await this.store.versions(policyId)).filter((v) => this.reaches(orgs, v.snapshot));
    if (versions.length === 0) throw policyNotFound(policyId);
    return versions.sort((a, b) => a.version - b.version);
  }

  /** The audit entries whose every value (before and after) the caller reaches. */
  async audit(policyId: string, caller?: Actor): Promise<AuditEntry[]> {
    const orgs = caller?.orgs;
    const all = await this.store.audit(policyId);
    const entries = orgs === undefined ? all : all.filter((e) => [e.old_value, e.new_value].every((p) => p === null || this.reaches(orgs, p)));
    if (entries.length === 0) throw policyNotFound(policyId);
    return entries;
  }

  // -------------------------------------------------------------------------------------------------

  /** Whether a caller limited to `orgs` reaches this policy (the tenant rule of model/org-scope.ts). */
  private reaches(orgs: Orgs, policy: Policy | PolicyInput): boolean {
    return reachesPolicy(orgs, policy, this.platformLayers);
  }

  /** A policy a restricted caller writes must stay reachable by it: else a 403 naming `layer` or `scope.org_id`. */
  private requireWithin(orgs: Orgs, policy: Policy | PolicyInput): void {
    requireReachable(orgs, policy, this.platformLayers);
  }

  /**
   * Changes an existing policy: reads its authoritative state, checks the caller's expectations,
   * builds the new content (null = delete) and commits it conditionally on nothing having changed
   * since the read. A lost race is a 409 when the caller stated a version, else it is rebased.
   */
  private async change(
    policyId: string,
    action: AuditAction,
    by: string | Actor,
    expectations: Expectation[],
    build: (current: Policy) => PolicyInput | null | Promise<PolicyInput | null>,
    audited: Pick<AuditEntry, 'restored_version'> = {},
  ): Promise<Policy> {
    const { subject: changedBy, orgs } = actorOf(by);
    for (let attempt = 1; ; attempt++) {
      const { policy: current, head } = await this.store.fetch(policyId);
      // Another organisation's policy is absent to this caller, before any precondition could reveal it.
      if (!current || !this.reaches(orgs, current)) throw policyNotFound(policyId);
      for (const e of expectations) if (!e.matches(current)) throw preconditionFailed(e, current);
      const input = await build(current);
      if (input !== null) {
        this.requireWithin(orgs, input);
        this.requireLayerRoom(input);
      }
      const at = this.now();
      const next = input === null ? null : stamp(input, head + 1, current.created_at, isoOf(at));
      const result = await this.store.commit({
        policy_id: policyId,
        action,
        expectedHead: head,
        mustExist: true,
        policy: next,
        audit: { ...this.auditEntry(action, changedBy, at, next?.version ?? current.version, current, next), ...audited },
      });
      if (result.ok) return next ?? current;
      if (expectations.length > 0) {
        throw new RlError('conflict', `policy "${policyId}" was changed concurrently; the version you sent (${expectations[0].text}) is no longer current`, 'version');
      }
      if (attempt >= MAX_ATTEMPTS) throw changedConcurrently(policyId);
    }
  }

  /** At most MAX_LAYERS layers in the set: a write that would open one more is a 422 naming `layer`. */
  private requireLayerRoom(input: PolicyInput): void {
    const problem = this.layers.problem(input.policy_id, input.layer);
    if (problem) throw validationFailed([problem]);
  }

  private auditEntry(action: AuditAction, changedBy: string, atMs: number, version: number, oldValue: Policy | null, newValue: Policy | null): AuditEntry {
    const changedAt = isoOf(atMs);
    return {
      audit_id: this.newAuditId(),
      policy_id: (newValue ?? oldValue)!.policy_id,
      action_type: action,
      changed_by: changedBy,
      changed_at: changedAt,
      changed_at_unix: unixSecondsOf(changedAt),
      version,
      old_value: oldValue,
      new_value: newValue,
    };
  }
}

// ---------------------------------------------------------------------------------------------------
// Helpers

function isoOf(ms: number): string {
  return new Date(ms).toISOString();
}

function policyNotFound(policyId: string): RlError {
  return notFound(`policy "${policyId}" not found`);
}

function changedConcurrently(policyId: string): RlError {
  return new RlError('conflict', `policy "${policyId}" is being changed concurrently; retry`);
}

/** The stored policy with the server-set fields (see stored-policy.ts for its in-memory form). */
function stamp(input: PolicyInput, version: number, createdAt: string, updatedAt: string): Policy {
  return storedPolicy(input, version, createdAt, updatedAt);
}
