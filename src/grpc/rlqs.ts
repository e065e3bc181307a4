import type * as grpc from '@grpc/grpc-js';
import { RlError, invalidField } from '../errors.js';
import type { Assignment } from '../lease/rlqs-assignment.js';
import type { RlqsHub } from '../lease/rlqs-hub.js';
import type { BucketUsage } from '../lease/rlqs-stream.js';
import { requireUnrestricted } from '../model/org-scope.js';
import { log } from '../util/log.js';
import type { CallGuards } from './call.js';
import { descriptorContext } from './envoy.js';
import { MalformedRequest } from './protos.js';
import { toGrpcStatus } from './status.js';

/** google.protobuf.Duration as decoded (int64 seconds as a decimal string). */
interface WireDuration {
  seconds?: string | number;
  nanos?: number;
}

interface WireUsage {
  bucket_id?: { bucket?: Record<string, string> };
  time_elapsed?: WireDuration;
  num_requests_allowed?: string | number;
  num_requests_denied?: string | number;
}

export interface RlqsReports {
  domain?: string;
  /** A repeated field: one line per bucket, in the order Envoy sent them. */
  bucket_quota_usages?: WireUsage[];
}

export interface RlqsResponse {
  bucket_action: object[];
}

type RlqsCall = grpc.ServerDuplexStream<RlqsReports | MalformedRequest, RlqsResponse>;

/**
 * envoy.service.rate_limit_quota.v3 StreamRateLimitQuotas over the RLQS streams of src/lease: each
 * BucketId becomes a RequestContext by the RLS descriptor rule (known field names → fields, other keys
 * → tags, the stream's domain → `tags.domain`), and every assignment becomes one BucketAction. The
 * credentials are RLS's: an unrestricted one, else UNAUTHENTICATED / PERMISSION_DENIED.
 */
export function rlqsHandler(hub: RlqsHub, guards: CallGuards): grpc.handleBidiStreamingCall<RlqsReports | MalformedRequest, RlqsResponse> {
  return (call: RlqsCall) => {
    const method = call.getPath();
    try {
      if (guards.readiness.state === 'starting') throw new RlError('unavailable', 'server is starting');
      const caller = guards.authenticate?.(call.metadata, method);
      requireUnrestricted(caller?.orgs, 'the Envoy rate limit quota service (StreamRateLimitQuotas)');
    } catch (error) {
      call.emit('error', toGrpcStatus(error, method));
      return;
    }
    let domain: string | undefined;
    let ended = false;
    const open = () => !call.writableEnded && !call.destroyed;
    const finish = (reported: boolean) => {
      if (ended) return undefined;
      ended = true;
      return close(reported).catch((error: unknown) => log.warn('RLQS stream settle failed', { error: String(error) }));
    };
    const { stream, close } = hub.open(
      (bucketId, assignment) => {
        if (open()) call.write({ bucket_action: [bucketAction(bucketId, assignment)] });
      },
      // Drained (the server stops): nothing is held any more, the call ends with OK and Envoy opens its next one elsewhere.
      () => {
        void finish(false);
        if (open()) call.end();
      },
    );
    call.on('data', (message: RlqsReports | MalformedRequest) => {
      if (ended) return;
      try {
        if (message instanceof MalformedRequest) throw invalidField('request', `is not a valid protobuf message: ${message.problem}`);
        domain ??= message.domain || undefined;
        if (domain === undefined) throw invalidField('domain', 'must be given in the first report of a stream');
        stream.report(usagesOf(domain, message));
      } catch (error) {
        void finish(false);
        call.emit('error', toGrpcStatus(error, method));
      }
    });
    // Envoy closed its side after its last report: what it did not report, it did not spend.
    // A client's cancel ends the reading side too, and is noticed just after: a turn later, only a real half-close is left.
    call.on('end', () =>
      setImmediate(() => {
        if (call.cancelled || call.destroyed) return void finish(false);
        void finish(true)?.then(() => call.end());
      }),
    );
    call.on('cancelled', () => void finish(false));
    call.on('error', () => void finish(false));
    call.on('close', () => void finish(false));
  };
}

/** Every bucket line of one message; a bad bucket id is an INVALID_ARGUMENT naming it. */
function usagesOf(domain: string, message: RlqsReports): BucketUsage[] {
  const usages: BucketUsage[] = [];
  for (const usage of message.bucket_quota_usages ?? []) {
    const bucketId = usage.bucket_id?.bucket ?? {};
    const entries = Object.entries(bucketId).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    usages.push({
      key: JSON.stringify(entries),
      bucketId,
      ctx: bucketContext(domain, entries),
      allowed: count(usage.num_requests_allowed),
      denied: count(usage.num_requests_denied),
      elapsedMs: durationMs(usage.time_elapsed),
    });
  }
  return usages;
}

/** The RLS descriptor rule, the bucket's pairs as the descriptor's entries; errors name `bucket_id.bucket`. */
function bucketContext(domain: string, entries: [string, string][]) {
  try {
    return descriptorContext({ domain, descriptors: [{ entries: entries.map(([key, value]) => ({ key, value })) }] }, 0);
  } catch (error) {
    if (!(error instanceof RlError)) throw error;
    const rename = (text: string) => text.replace(/descriptors\[0\]\.entries/g, 'bucket_id.bucket');
    throw new RlError(error.kind, rename(error.message), error.field === undefined ? undefined : rename(error.field));
  }
}

function count(value: string | number | undefined): number {
  const n = Number(value ?? 0);
  return Number.isFinite(n) && n > 0 ? n : 0;
}

function durationMs(duration: WireDuration | undefined): number {
  if (duration === undefined) return 0;
  return Number(duration.seconds ?? 0) * 1000 + (duration.nanos ?? 0) / 1e6;
}

function duration(ms: number): { seconds: number; nanos: number } {
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

/** One assignment as Envoy's BucketAction. */
export function bucketAction(bucketId: Record<string, string>, assignment: Assignment): object {
  const bucket_id = { bucket: bucketId };
  if (assignment.strategy === 'abandon') return { bucket_id, abandon_action: {} };
  const assignment_time_to_live = duration(assignment.ttlMs);
  if (assignment.strategy !== 'token_bucket') {
    return { bucket_id, quota_assignment_action: { assignment_time_to_live, rate_limit_strategy: { blanket_rule: assignment.strategy === 'allow_all' ? 'ALLOW_ALL' : 'DENY_ALL' } } };
  }
  const fill_interval = { seconds: Math.floor(assignment.fillIntervalMs / 1000), nanos: assignment.fillTagNanos };
  const token_bucket = { max_tokens: assignment.maxTokens, tokens_per_fill: { value: 1 }, fill_interval };
  return { bucket_id, quota_assignment_action: { assignment_time_to_live, rate_limit_strategy: { token_bucket } } };
}
