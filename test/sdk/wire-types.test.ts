/**
 * The SDK's wire types (sdk/src) against the server's schema (src/schema, TypeBox, the source of truth).
 * The SDK cannot import the server: its policy types are generated from the schema
 * (scripts/generate-policy-types.ts), the others are written by hand; the checks below make a drift
 * fail `npm run typecheck` (the type-level ones) and this test (the field lists the types cannot see).
 */
import { expect } from 'chai';
import type { TObject, TSchema } from '@sinclair/typebox';
import {
  CONTEXT_STRING_FIELDS,
  DECISION_REASONS,
  SIGNAL_TYPES,
  type AnalyticsSummaryBody as SdkAnalyticsSummary,
  type Decision as SdkDecision,
  type FieldProblem,
  type PolicyAuditEntry,
  type PolicyVersionEntry,
  type RequestContext as SdkRequestContext,
  type StoredPolicy as SdkStoredPolicy,
} from '@rl/client';
import { AnalyticsSummarySchema, type AnalyticsSummaryBody } from '../../src/schema/analytics.js';
import type { AuditEntryBody, PolicyVersionBody } from '../../src/schema/audit.js';
import { DecisionSchema, type Decision, type DecisionReason } from '../../src/schema/decision.js';
import type { FieldError } from '../../src/schema/errors.js';
import { PolicySchema, type StoredPolicy } from '../../src/schema/policy.js';
import { RequestContextSchema, type RequestContextBody } from '../../src/schema/request-context.js';

/** `true` when A and B are each assignable to the other (the brackets stop unions distributing). */
type Mutual<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Assignable<A, B> = [A] extends [B] ? true : false;
/** The named keys of T, without an index signature's `string`. */
type NamedKeys<T> = keyof { [K in keyof T as string extends K ? never : number extends K ? never : K]: T[K] };
/** Compiles only when every check is `true`. */
const holds = <T extends true[]>(...checks: T): T => checks;

// Mutual assignability alone misses a missing optional field ({a?: string} and {} fit each other),
// so optional shapes are compared with Required<> and by their key sets too.
holds<
  [
    // Decision: the same fields and types; the SDK's reasons are the server's plus its own service_unavailable.
    Mutual<Omit<SdkDecision, 'reason' | 'layers'>, Omit<Decision, 'reason' | 'layers'>>,
    Mutual<Omit<NonNullable<SdkDecision['layers']>[number], 'reason'>, Omit<NonNullable<Decision['layers']>[number], 'reason'>>,
    Mutual<Exclude<SdkDecision['reason'], 'service_unavailable'>, DecisionReason>,
    Assignable<Decision, SdkDecision>,
    // RequestContext: the same fields; the SDK sends quantity as a number, the server also takes a decimal string.
    Mutual<keyof SdkRequestContext, keyof RequestContextBody>,
    Mutual<Required<Omit<SdkRequestContext, 'quantity'>>, Required<Omit<RequestContextBody, 'quantity'>>>,
    Assignable<SdkRequestContext, RequestContextBody>,
    // Management API bodies the SDK's admin client (and the dashboard) read.
    Assignable<StoredPolicy, SdkStoredPolicy>,
    Mutual<NamedKeys<SdkStoredPolicy>, keyof StoredPolicy>,
    Mutual<SdkAnalyticsSummary, AnalyticsSummaryBody>,
    Assignable<PolicyVersionBody, PolicyVersionEntry>,
    Mutual<keyof PolicyVersionEntry, keyof PolicyVersionBody>,
    Assignable<AuditEntryBody, PolicyAuditEntry>,
    Mutual<keyof PolicyAuditEntry, keyof AuditEntryBody>,
    Mutual<FieldProblem, FieldError>,
  ]
>(true, true, true, true, true, true, true, true, true, true, true, true, true, true, true);

// The checks do catch a drift: a Decision without `limit`, or a context without `region`, does not pass.
// @ts-expect-error a field missing on one side
holds<[Mutual<Omit<SdkDecision, 'reason' | 'limit'>, Omit<Decision, 'reason'>>]>(true);
// @ts-expect-error an optional field missing on one side
holds<[Mutual<keyof Omit<SdkRequestContext, 'region'>, keyof RequestContextBody>]>(true);

/** Field names of a runtime list typed by an SDK type: `satisfies` makes it name every field, and no other. */
const sdkDecisionFields = Object.keys({
  allowed: 0, action: 0, reason: 0, matched_policy_id: 0, remaining: 0, retry_after: 0, reset_after: 0,
  limit: 0, window: 0, shadow_mode: 0, metadata: 0, layers: 0,
} satisfies Record<keyof SdkDecision, 0>);
const sdkPolicyFields = Object.keys({
  policy_id: 0, name: 0, description: 0, enabled: 0, priority: 0, scope: 0, algorithm: 0, action: 0,
  failure_mode: 0, enforcement_mode: 0, rollout_percent: 0, metadata: 0, valid_from_unix: 0, valid_to_unix: 0,
  source_ip_prefix: 0, lease: 0, budget: 0, budget_shares: 0, layer: 0, version: 0, created_at: 0, updated_at: 0,
} satisfies Record<NamedKeys<SdkStoredPolicy>, 0>);

const propertyNames = (schema: TObject) => Object.keys(schema.properties);
const literalsOf = (union: TSchema) => (union.anyOf as { const: string }[]).map((s) => s.const);

describe('SDK wire types against the server schema', () => {
  it('a RequestContext has the SDK\'s string fields, in its order, then quantity and tags', () => {
    expect(propertyNames(RequestContextSchema)).to.deep.equal([...CONTEXT_STRING_FIELDS, 'quantity', 'tags']);
    expect(CONTEXT_STRING_FIELDS).to.have.length(21);
  });

  it('signal_type takes exactly the SDK\'s eight signal types', () => {
    expect(literalsOf(RequestContextSchema.properties.signal_type)).to.deep.equal([...SIGNAL_TYPES]);
    expect(SIGNAL_TYPES).to.have.length(8);
  });

  it('a Decision has the SDK\'s fields, and its reasons are the SDK\'s list', () => {
    expect(propertyNames(DecisionSchema).sort()).to.deep.equal(sdkDecisionFields.sort());
    expect(literalsOf(DecisionSchema.properties.reason)).to.deep.equal([...DECISION_REASONS]);
    expect(DECISION_REASONS).to.not.include('service_unavailable');
  });

  it('a stored policy has the fields of the SDK\'s StoredPolicy', () => {
    expect(propertyNames(PolicySchema).sort()).to.deep.equal(sdkPolicyFields.sort());
  });

  it('an analytics summary has the fields of the SDK\'s AnalyticsSummaryBody', () => {
    const sdkFields = Object.keys({
      since: 0, total: 0, allowed: 0, denied: 0, shadow: 0, by_action: 0, by_policy: 0, top_tags: 0,
    } satisfies Record<keyof SdkAnalyticsSummary, 0>);
    expect(propertyNames(AnalyticsSummarySchema).sort()).to.deep.equal(sdkFields.sort());
  });
});
