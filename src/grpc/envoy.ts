import { isCalendarSpec, type CounterSpec } from '../counters/counter-spec.js';
import type { CalendarUnit } from '../util/calendar-period.js';
import type { DecisionService } from '../decision/decision-service.js';
import type { MatcherSource } from '../matching/live-matcher.js';
import { RlError, invalidField } from '../errors.js';
import type { Decision } from '../model/decision.js';
import { PROBLEM_CONTENT_TYPE, problemDetails, renderRateLimitHeaderList, speaksForALimit } from '@rl/client/headers';
import { CONTEXT_STRING_FIELDS, parseRequestContext, type RequestContext } from '../model/request-context.js';
import { MAX_ENVOY_DESCRIPTORS, MAX_TAGS } from '../schema/limits.js';

/**
 * Envoy's external rate limit service (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit)
 * on top of DecisionService. See docs/envoy.md for the mapping, summarised:
 *
 * - Each descriptor becomes one RequestContext and one decision over its layers. The descriptors of a
 *   call are decided together, all or nothing (`DecisionService.checkTogether`): a call refused by any
 *   descriptor consumes in none. RL_ENVOY_CONSUME_ALL=true checks each on its own (every descriptor
 *   counts whatever the others answer, as Envoy's reference service does).
 * - An entry whose key is a string field of RequestContext (`user_id`, `source_ip`, `signal_type`, …)
 *   fills that field; every other entry becomes a tag of the same key. The request's `domain` becomes
 *   the tag `domain` (policies select Envoy traffic with `scope.tags.domain`). Envoy's built-in
 *   `remote_address` entry also fills `source_ip`, unless the descriptor has a `source_ip` entry.
 *   When a key repeats, the last entry wins.
 * - The quantity is the descriptor's `hits_addend` when set (an explicit 0 is a peek: evaluated, nothing
 *   consumed), else the request's; a request-level 0 means 1.
 * - A descriptor is OVER_LIMIT exactly when its decision is not allowed (deny, delay, drop, a sample
 *   not kept, drop_low_priority below the minimum severity, fail_closed on a counter store failure).
 *   Actions that let the request through (downgrade, a kept sample, shadow_only) are OK. The overall
 *   code is OVER_LIMIT when any descriptor is, else OK.
 * - The answer also carries what Envoy's filter applies: the rate-limit headers of the limiting
 *   descriptor (RL_ENVOY_HEADERS; with RL_ENVOY_HEADER_DESCRIPTORS=all the IETF headers list every
 *   descriptor an enforced policy answered, the limiting one first), the problem+json 429 body on
 *   OVER_LIMIT, `x-ratelimit-action` to the upstream when a downgrade or sample let the request
 *   through, and dynamic metadata for logs.
 */

export interface EnvoyEntry {
  key?: string;
  value?: string;
}

export interface EnvoyDescriptor {
  entries?: EnvoyEntry[];
  /** google.protobuf.UInt64Value; with longs as strings the value is a decimal string. */
  hits_addend?: { value?: string | number } | null;
}

export interface EnvoyRateLimitRequest {
  domain?: string;
  descriptors?: EnvoyDescriptor[];
  hits_addend?: number;
}

export type EnvoyCode = 'OK' | 'OVER_LIMIT';
export type EnvoyUnit = 'UNKNOWN' | 'SECOND' | 'MINUTE' | 'HOUR' | 'DAY' | 'MONTH' | 'YEAR';

export interface EnvoyDescriptorStatus {
  code: EnvoyCode;
  current_limit?: { name: string; requests_per_unit: number; unit: EnvoyUnit };
  limit_remaining: number;
  duration_until_reset?: { seconds: number; nanos: number };
}

export interface EnvoyHeaderValue {
  key: string;
  value: string;
}

/** google.protobuf.Struct as proto-loader writes it (protobufjs's built-in definition is camelCase). */
export interface EnvoyStruct {
  fields: Record<string, { stringValue: string }>;
}

export interface EnvoyRateLimitResponse {
  overall_code: EnvoyCode;
  statuses: EnvoyDescriptorStatus[];
  response_headers_to_add: EnvoyHeaderValue[];
  request_headers_to_add: EnvoyHeaderValue[];
  raw_body?: Buffer;
  dynamic_metadata?: EnvoyStruct;
}

/** Which rate-limit headers Envoy is asked to add (RL_ENVOY_HEADERS). */
export type EnvoyHeadersMode = 'ietf' | 'legacy' | 'off';
/** Which descriptors the IETF headers list (RL_ENVOY_HEADER_DESCRIPTORS): the limiting one, or all. */
export type EnvoyHeaderDescriptors = 'limiting' | 'all';

const STRING_FIELDS = new Set<string>(CONTEXT_STRING_FIELDS);
const MAX_DESCRIPTOR_ENTRIES = MAX_TAGS + CONTEXT_STRING_FIELDS.length;
const UINT32_MAX = 0xffff_ffff;

/** The RequestContext of descriptor `index`; bad input throws INVALID_ARGUMENT naming `descriptors[i]…`. */
export function descriptorContext(request: EnvoyRateLimitRequest, index: number): RequestContext {
  const descriptor = request.descriptors?.[index] ?? {};
  const where = `descriptors[${index}]`;
  const entries = descriptor.entries ?? [];
  if (entries.length === 0) throw invalidField(`${where}.entries`, 'must hold at least one entry');
  // Every entry is a context field or a tag, so more than that many cannot make a valid context.
  if (entries.length > MAX_DESCRIPTOR_ENTRIES) {
    throw invalidField(`${where}.entries`, `must hold at most ${MAX_DESCRIPTOR_ENTRIES} entries (${MAX_TAGS} tags and the context fields), got ${entries.length}`);
  }

  const raw: Record<string, unknown> = {};
  const tags: Record<string, string> = Object.create(null);
  if (request.domain) tags.domain = request.domain;
  let remoteAddress: string | undefined;
  entries.forEach((entry, i) => {
    const key = entry.key ?? '';
    const value = entry.value ?? '';
    if (key === '') throw invalidField(`${where}.entries[${i}].key`, 'must not be empty');
    if (value === '') throw invalidField(`${where}.entries[${i}].value`, `must not be empty (key "${key}")`);
    if (STRING_FIELDS.has(key)) raw[key] = value;
    else tags[key] = value;
    if (key === 'remote_address') remoteAddress = value;
  });
  if (remoteAddress !== undefined && raw.source_ip === undefined) raw.source_ip = remoteAddress;
  raw.tags = tags;
  raw.quantity = hitsAddendOf(request, descriptor);

  try {
    return parseRequestContext(raw);
  } catch (error) {
    if (error instanceof RlError && error.kind === 'invalid_argument') {
      const field = error.field === 'quantity' ? 'hits_addend' : error.field;
      const message = error.field === 'quantity' ? error.message.replace(/^quantity/, 'hits_addend') : error.message;
      throw new RlError('invalid_argument', `${where}.${message}`, `${where}.${field}`);
    }
    throw error;
  }
}

/**
 * Descriptor-level hits_addend when set — a wrapper, so an explicit 0 is told from absence: that 0 is a
 * peek — else the request's, where 0 (proto3's unset) means 1.
 */
function hitsAddendOf(request: EnvoyRateLimitRequest, descriptor: EnvoyDescriptor): string | number {
  const wrapper = descriptor.hits_addend;
  if (wrapper !== undefined && wrapper !== null) {
    const own = wrapper.value ?? 0; // a wrapper holding 0 arrives empty
    return typeof own === 'number' ? own : String(own);
  }
  const shared = request.hits_addend ?? 0;
  return shared > 0 ? shared : 1;
}

/** How one decision reads in Envoy's terms. `unitOf` names the time unit of a policy's limit. */
export function descriptorStatus(decision: Decision, unitOf: (policyId: string) => EnvoyUnit): EnvoyDescriptorStatus {
  const status: EnvoyDescriptorStatus = {
    code: decision.allowed ? 'OK' : 'OVER_LIMIT',
    limit_remaining: clampUint32(decision.remaining),
  };
  if (decision.matched_policy_id !== '') {
    status.current_limit = {
      name: decision.matched_policy_id,
      requests_per_unit: clampUint32(decision.limit),
      unit: unitOf(decision.matched_policy_id),
    };
    status.duration_until_reset = durationOf(decision.reset_after);
  }
  return status;
}

export function overallCode(statuses: readonly EnvoyDescriptorStatus[]): EnvoyCode {
  return statuses.some((s) => s.code === 'OVER_LIMIT') ? 'OVER_LIMIT' : 'OK';
}

const CALENDAR_UNIT: Readonly<Record<CalendarUnit, EnvoyUnit>> = { hour: 'HOUR', day: 'DAY', week: 'UNKNOWN', month: 'MONTH', year: 'YEAR' };

const UNIT_MS: readonly (readonly [number, EnvoyUnit])[] = [
  [1_000, 'SECOND'],
  [60_000, 'MINUTE'],
  [3_600_000, 'HOUR'],
  [86_400_000, 'DAY'],
];

/**
 * The Envoy unit of a policy's limit: windows and quota periods of exactly one second, minute, hour or
 * day map to that unit; a token or leaky bucket maps to the unit in which it refills (or drains) exactly
 * its capacity. Anything else (a 10s window, a bucket of 50 refilled at 10/s) is UNKNOWN: the limit is
 * then only meaningful together with the policy, whose id is in `current_limit.name`.
 */
export function rateLimitUnitOf(spec: CounterSpec): EnvoyUnit {
  // A calendar period is its unit (Envoy has no week).
  if (isCalendarSpec(spec)) return CALENDAR_UNIT[spec.calendar.unit];
  let periodMs: number;
  switch (spec.type) {
    case 'fixed_window':
    case 'sliding_window_log':
    case 'sliding_window_counter':
      periodMs = spec.windowMs;
      break;
    case 'quota':
      periodMs = spec.periodMs;
      break;
    case 'token_bucket':
    case 'leaky_bucket':
      periodMs = (spec.capacity * spec.ratePeriodMs) / spec.rateUnits;
      break;
    case 'concurrency':
      return 'UNKNOWN';
  }
  return UNIT_MS.find(([ms]) => ms === periodMs)?.[1] ?? 'UNKNOWN';
}

/** unitOf for descriptorStatus, reading the policy from the live matcher when one is given. */
export function unitLookup(policies: MatcherSource | undefined): (policyId: string) => EnvoyUnit {
  if (!policies) return () => 'UNKNOWN';
  return (policyId) => {
    const compiled = policies.current().get(policyId);
    return compiled ? rateLimitUnitOf(compiled.spec) : 'UNKNOWN';
  };
}

export interface ShouldRateLimitOptions {
  unitOf: (policyId: string) => EnvoyUnit;
  headers: EnvoyHeadersMode;
  /** Default `limiting`. */
  headerDescriptors?: EnvoyHeaderDescriptors;
  /**
   * Each descriptor counts on its own, whatever the others answer (RL_ENVOY_CONSUME_ALL). Default: the
   * descriptors are decided together, all or nothing: a call refused by any consumes in none.
   */
  consumeAll?: boolean;
  /** Runs after validation, before any counter is touched (the caller's liveness check). */
  beforeDecide?: () => void;
  /** Told the decision the call's trace span reports (spanDecisionOf). */
  decided?: (decision: Decision) => void;
}

/** Decides every descriptor (together, or with consumeAll each on its own) and builds the response. */
export async function shouldRateLimit(
  decisions: DecisionService,
  request: EnvoyRateLimitRequest,
  options: ShouldRateLimitOptions,
): Promise<EnvoyRateLimitResponse> {
  const count = request.descriptors?.length ?? 0;
  if (count === 0) throw invalidField('descriptors', 'must hold at least one descriptor');
  if (count > MAX_ENVOY_DESCRIPTORS) throw invalidField('descriptors', `must hold at most ${MAX_ENVOY_DESCRIPTORS} descriptors, got ${count}`);
  const contexts = Array.from({ length: count }, (_, i) => descriptorContext(request, i));
  options.beforeDecide?.();
  const results =
    count === 1 ? [await decisions.check(contexts[0])]
    : options.consumeAll ? await Promise.all(contexts.map((ctx) => decisions.check(ctx)))
    : await decisions.checkTogether(contexts);
  options.decided?.(spanDecisionOf(results));
  const statuses = results.map((decision) => descriptorStatus(decision, options.unitOf));
  const overall = overallCode(statuses);
  return { overall_code: overall, statuses, ...gatewayAnswer(results, overall, options.headers, options.headerDescriptors ?? 'limiting') };
}

/** What Envoy's filter applies besides the codes: headers both ways, the 429 body, dynamic metadata. */
function gatewayAnswer(
  results: readonly Decision[],
  overall: EnvoyCode,
  mode: EnvoyHeadersMode,
  listed: EnvoyHeaderDescriptors,
): Pick<EnvoyRateLimitResponse, 'response_headers_to_add' | 'request_headers_to_add' | 'raw_body' | 'dynamic_metadata'> {
  const limiting = limitingDecision(results);
  const answer: ReturnType<typeof gatewayAnswer> = { response_headers_to_add: [], request_headers_to_add: [] };
  if (limiting !== undefined && mode !== 'off') {
    // The renderer skips answers no enforced policy made; the legacy style renders the first alone.
    // By position: two descriptors may share one Decision object (a deny-cache answer).
    const at = results.indexOf(limiting);
    const shown = listed === 'all' ? [limiting, ...results.filter((_, i) => i !== at)] : [limiting];
    answer.response_headers_to_add = renderRateLimitHeaderList(shown, mode).map(([key, value]) => ({ key, value }));
  }
  if (overall === 'OVER_LIMIT' && limiting !== undefined) {
    answer.raw_body = Buffer.from(JSON.stringify(problemDetails(limiting)));
    answer.response_headers_to_add.push({ key: 'content-type', value: PROBLEM_CONTENT_TYPE });
  }
  if (overall === 'OK') {
    const degraded = results.find((d) => d.allowed && (d.action === 'downgrade' || d.action === 'sample'));
    if (degraded !== undefined) answer.request_headers_to_add.push({ key: 'x-ratelimit-action', value: degraded.action });
  }
  const decider = deciderOf(results, limiting);
  if (decider !== undefined) answer.dynamic_metadata = accessLogMetadata(decider);
  return answer;
}

/**
 * The decision that speaks for a whole answer, in Envoy's access log and the call's trace span alike:
 * a refused call's refusal (the limiting one, else the first, e.g. a failure mode's, which speaks for no
 * limit), else the limiting descriptor, else the first a policy made.
 */
export function deciderOf(results: readonly Decision[], limiting = limitingDecision(results)): Decision | undefined {
  if (limiting !== undefined && !limiting.allowed) return limiting;
  return results.find((d) => !d.allowed) ?? limiting ?? results.find((d) => d.matched_policy_id !== '' || d.metadata.shadow_policy_id !== undefined);
}

/** The decision a trace span reports: the decider, or for a call no policy decided its first descriptor's `no_matching_policy`. */
export function spanDecisionOf(results: readonly Decision[]): Decision {
  return deciderOf(results) ?? results[0];
}

/**
 * The descriptor whose limit the client is closest to: a refused one first, else the one with the
 * fewest units remaining. Only answers the header renderer speaks for count (speaksForALimit: a
 * shadow-only or a failure-mode answer says nothing about a limit the client can act on).
 */
export function limitingDecision(results: readonly Decision[]): Decision | undefined {
  let best: Decision | undefined;
  for (const d of results) {
    if (!speaksForALimit(d)) continue;
    if (best === undefined || (best.allowed && !d.allowed) || (best.allowed === d.allowed && d.remaining < best.remaining)) best = d;
  }
  return best;
}

/**
 * The deciding policy and action, and the shadow policy's verdict, for Envoy's access logs. A shadow
 * policy that answered alone is named under the shadow keys too, so one log format finds every shadow
 * verdict: `shadow_only` (it would have limited) or `allow`.
 */
function accessLogMetadata(decision: Decision): EnvoyStruct {
  const fields: EnvoyStruct['fields'] = {
    policy_id: { stringValue: decision.matched_policy_id },
    action: { stringValue: decision.action },
    reason: { stringValue: decision.reason },
  };
  const shadowPolicy = decision.metadata.shadow_policy_id ?? (decision.shadow_mode ? decision.matched_policy_id : undefined);
  if (shadowPolicy !== undefined) {
    fields.shadow_policy_id = { stringValue: shadowPolicy };
    fields.shadow_action = { stringValue: decision.metadata.shadow_action ?? decision.action };
  }
  if (decision.metadata.peek !== undefined) fields.peek = { stringValue: decision.metadata.peek };
  if (decision.metadata.lease !== undefined) fields.lease = { stringValue: decision.metadata.lease };
  if (decision.metadata.budget !== undefined) fields.budget = { stringValue: decision.metadata.budget };
  if (decision.metadata.region !== undefined) fields.region = { stringValue: decision.metadata.region };
  return { fields };
}

function clampUint32(value: number): number {
  if (!Number.isFinite(value) || value <= 0) return 0;
  return Math.min(Math.floor(value), UINT32_MAX);
}

/**
 * Whole seconds, rounded up: Envoy's filter reads only `seconds` of duration_until_reset (for
 * X-RateLimit-Reset), so 900 ms left must read 1, not 0.
 */
function durationOf(ms: number): { seconds: number; nanos: number } {
  return { seconds: Math.ceil(Math.max(0, ms) / 1000), nanos: 0 };
}
