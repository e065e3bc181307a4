import type { Tracing, TracingConfig } from './tracing.js';

/**
 * The OpenTelemetry implementation, loaded now; undefined when tracing is off. Apart from tracing.ts (the
 * interface the transports call) so that the SDK is imported only from here, and only with an endpoint.
 */
export async function startTracing(config: TracingConfig | undefined): Promise<Tracing | undefined> {
  if (config === undefined) return undefined;
  const { OtelTracing } = await import('./otel-tracing.js');
  return new OtelTracing(config);
}
