import { DiagLogLevel, ROOT_CONTEXT, SpanKind, diag, SpanStatusCode, type Attributes, type Span, type TextMapGetter, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import type { Decision } from '../model/decision.js';
import { log } from '../util/log.js';
import { failureModeOf, type DecisionSpanName, type PolicyChangeTrace, type TraceCarrier, type TracingConfig, type Tracing } from './tracing.js';

/**
 * The OpenTelemetry side of tracing.ts, imported only when an OTLP endpoint is configured.
 *
 * The SDK reads its standard variables itself: the endpoint and headers (OTEL_EXPORTER_OTLP_[TRACES_]
 * ENDPOINT / HEADERS / TIMEOUT), the sampler (OTEL_TRACES_SAMPLER[_ARG]), the batch processor
 * (OTEL_BSP_*), and the resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, which win over the
 * service name and version set here). The provider is this module's own, not the process-global one:
 * nothing else in the process is traced, and the caller's context is handed to each span explicitly, so
 * no context manager (AsyncLocalStorage) runs.
 */
export class OtelTracing implements Tracing {
  private readonly provider: BasicTracerProvider;
  private readonly tracer: Tracer;
  private readonly propagator = new W3CTraceContextPropagator();

  constructor(config: TracingConfig) {
    // The SDK reports trouble (an unreachable collector, a refused export) through its diag logger: ours.
    const report = (message: string, ...args: unknown[]) => log.warn('opentelemetry', { detail: [message, ...args].map(String).join(' ') });
    const ignore = () => {};
    diag.setLogger({ error: report, warn: report, info: ignore, debug: ignore, verbose: ignore }, DiagLogLevel.WARN);
    const exporter = config.protocol === 'http/json' ? new OtlpJsonExporter() : new OtlpProtobufExporter();
    const resource = resourceFromAttributes({ [ATTR_SERVICE_NAME]: 'rl-decision-service', [ATTR_SERVICE_VERSION]: config.serviceVersion }).merge(
      detectResources({ detectors: [envDetector] }),
    );
    this.provider = new BasicTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] });
    this.tracer = this.provider.getTracer('rl-decision-service', config.serviceVersion);
  }

  decision<T>(name: DecisionSpanName, parent: TraceCarrier, run: () => T | Promise<T>, decisionOf: (result: T) => Decision | undefined): T | Promise<T> {
    const span = this.start(name, parent);
    let result: T | Promise<T>;
    try {
      result = run();
    } catch (error) {
      failed(span, error);
      throw error;
    }
    if (!(result instanceof Promise)) {
      endDecision(span, name, decisionOf(result));
      return result;
    }
    return result.then(
      (settled) => {
        endDecision(span, name, decisionOf(settled));
        return settled;
      },
      (error: unknown) => {
        failed(span, error);
        throw error;
      },
    );
  }

  async policyChange<T>(action: string, parent: TraceCarrier, run: () => Promise<T>, describe: (result: T) => PolicyChangeTrace): Promise<T> {
    const span = this.start(`rl.policy.${action}`, parent);
    try {
      const result = await run();
      const { policyId, version } = describe(result);
      span.setAttributes({ 'rl.policy_id': policyId, 'rl.version': version });
      span.end();
      return result;
    } catch (error) {
      failed(span, error);
      throw error;
    }
  }

  shutdown(): Promise<void> {
    return this.provider.shutdown();
  }

  private start(name: string, parent: TraceCarrier): Span {
    // A missing or malformed traceparent leaves the root context: the span starts a trace of its own.
    const context = parent.traceparent === undefined ? ROOT_CONTEXT : this.propagator.extract(ROOT_CONTEXT, parent, carrierGetter);
    return this.tracer.startSpan(name, { kind: SpanKind.SERVER }, context);
  }
}

const carrierGetter: TextMapGetter<TraceCarrier> = {
  get: (carrier, key) => (key === 'traceparent' ? carrier.traceparent : key === 'tracestate' ? carrier.tracestate : undefined),
  keys: () => ['traceparent', 'tracestate'],
};

function endDecision(span: Span, name: DecisionSpanName, decision: Decision | undefined): void {
  if (decision !== undefined) {
    const attributes: Attributes = {
      'rl.policy_id': decision.matched_policy_id,
      'rl.allowed': decision.allowed,
      'rl.reason': decision.reason,
      'rl.remaining': decision.remaining,
    };
    const failureMode = failureModeOf(name, decision);
    if (failureMode !== undefined) attributes['rl.failure_mode'] = failureMode;
    span.setAttributes(attributes);
  }
  span.end();
}

function failed(span: Span, error: unknown): void {
  span.recordException(error instanceof Error ? error : String(error));
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  span.end();
}
