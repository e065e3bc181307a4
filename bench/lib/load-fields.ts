import type { GrpcLoadResult } from './grpc-load.js';
import type { HttpLoadResult } from './http-load.js';
import type { PacedLoadResult } from './paced-load.js';
import { round } from './stats.js';

/**
 * What one load run measured, as the fields every scenario's Side reports (closed-loop HTTP, gRPC, or
 * an evenly paced open loop, whose send lag and load-generator delay come along).
 */
export function loadFields(r: HttpLoadResult | GrpcLoadResult | PacedLoadResult) {
  return {
    throughput_per_s: round(r.throughput_rps),
    p50_ms: round(r.p50_ms),
    p99_ms: round(r.p99_ms),
    p90_ms: round(r.p90_ms),
    p999_ms: round(r.p999_ms),
    max_ms: round(r.max_ms),
    requests: r.requests,
    errors: r.errors,
    ...('non2xx' in r ? { non2xx: r.non2xx } : {}),
    ...('send_lag_p99_ms' in r
      ? {
          paced_send_lag_p99_ms: round(r.send_lag_p99_ms),
          loadgen_loop_delay_p99_ms: round(r.loadgen_loop_delay_p99_ms),
          loadgen_loop_delay_max_ms: round(r.loadgen_loop_delay_max_ms),
          unfinished: r.unfinished,
        }
      : {}),
    loadgen_cpu_pct: round(r.loadgen_cpu_pct),
  };
}
