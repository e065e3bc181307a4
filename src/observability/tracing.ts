import type { Operation } from '../decision/decision-service.js';
import type { Decision } from '../model/decision.js';

/**
 * Traces (docs/tracing.md): what the transports call.
 *
 * Tracing is off unless an OTLP endpoint is configured; then `startTracing` (start-tracing.ts) imports the OpenTelemetry
 * implementation (otel-tracing.ts) dynamically, so a server without an endpoint never loads the
 * OpenTelemetry packages, and the transports, holding no Tracing, call nothing on the decision path.
 */

export type DecisionSpanName = 'rl.check' | 'rl.acquire' | 'rl.release' | 'rl.refund' | 'rl.envoy';

/** The span of each DecisionService operation. */
export const DECISION_SPANS: Record<Operation, DecisionSpanName> = { check: 'rl.check', acquire: 'rl.acquire', release: 'rl.release', refund: 'rl.refund' };

/** `decisionOf` for a call whose result is the Decision itself. */
export const itself = (decision: Decision): Decision => decision;

/** The caller's W3C trace context as it arrived (HTTP headers, gRPC metadata). */
export interface TraceCarrier {
  traceparent?: string;
  tracestate?: string;
}

/** A policy change as its span names it. */
export interface PolicyChangeTrace {
  policyId: string;
  version: number;
}

export interface Tracing {
  /**
   * Runs `run` inside a span `name`, a child of the caller's trace when `parent` carries one, and ends
   * it with what `decisionOf` reads from the result (or with the error). A synchronous result stays
   * synchronous.
   */
  decision<T>(name: DecisionSpanName, parent: TraceCarrier, run: () => T | Promise<T>, decisionOf: (result: T) => Decision | undefined): T | Promise<T>;
  /** Runs a policy change inside the span `rl.policy.<action>`. */
  policyChange<T>(action: string, parent: TraceCarrier, run: () => Promise<T>, describe: (result: T) => PolicyChangeTrace): Promise<T>;
  /** Exports what is still buffered, then stops. */
  shutdown(): Promise<void>;
}

/** What the composition root reads from OTEL_* (config.ts); the SDK reads the rest of them itself. */
export interface TracingConfig {
  /** OTLP over HTTP, as protobuf or as JSON (OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL). */
  protocol: 'http/protobuf' | 'http/json';
  /** service.version of the spans' resource. */
  serviceVersion: string;
}

/** The trace context of an HTTP request (node:http lower-cases header names). */
export function httpTraceCarrier(headers: Record<string, string | string[] | undefined>): TraceCarrier {
  return { traceparent: single(headers.traceparent), tracestate: single(headers.tracestate) };
}

/** The trace context of a gRPC call's metadata (`get` returns every value of a key). */
export function grpcTraceCarrier(metadata: { get(key: string): (string | Buffer)[] }): TraceCarrier {
  return { traceparent: textOf(metadata.get('traceparent')[0]), tracestate: textOf(metadata.get('tracestate')[0]) };
}

/**
 * The failure mode that answered a decision, if one did: the counter store could not answer an
 * enforced check, acquire or release (a refund it could not take is not decided by a failure mode).
 */
export function failureModeOf(name: DecisionSpanName, decision: Decision): 'fail_open' | 'fail_closed' | undefined {
  if (decision.reason !== 'counter_store_unavailable' || decision.shadow_mode || name === 'rl.refund') return undefined;
  return decision.allowed ? 'fail_open' : 'fail_closed';
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function textOf(value: string | Buffer | undefined): string | undefined {
  return typeof value === 'string' ? value : undefined;
}
