/** Latency samples in milliseconds, kept whole (a run has at most a few million), percentiles by sorting. */
export class Samples {
  private data: Float64Array;
  private n = 0;

  constructor(initialCapacity = 1 << 16) {
    this.data = new Float64Array(initialCapacity);
  }

  add(ms: number): void {
    if (this.n === this.data.length) {
      const bigger = new Float64Array(this.data.length * 2);
      bigger.set(this.data);
      this.data = bigger;
    }
    this.data[this.n++] = ms;
  }

  get count(): number {
    return this.n;
  }

  summary(): LatencySummary {
    const sorted = this.data.slice(0, this.n).sort();
    let sum = 0;
    for (let i = 0; i < sorted.length; i++) sum += sorted[i];
    return {
      count: this.n,
      mean_ms: this.n ? sum / this.n : NaN,
      p50_ms: percentile(sorted, 0.5),
      p90_ms: percentile(sorted, 0.9),
      p99_ms: percentile(sorted, 0.99),
      p999_ms: percentile(sorted, 0.999),
      max_ms: this.n ? sorted[this.n - 1] : NaN,
    };
  }
}

export interface LatencySummary {
  count: number;
  mean_ms: number;
  p50_ms: number;
  p90_ms: number;
  p99_ms: number;
  p999_ms: number;
  max_ms: number;
}

/** The summary of a run whose latencies were not recorded (a warm-up): no samples, every figure NaN. */
export function emptyLatency(): LatencySummary {
  return { count: 0, mean_ms: NaN, p50_ms: NaN, p90_ms: NaN, p99_ms: NaN, p999_ms: NaN, max_ms: NaN };
}

/** CPU time this process used since `before` (a `process.cpuUsage()`), per `wallMs` of wall time, percent of one core. */
export function cpuPercentSince(before: NodeJS.CpuUsage, wallMs: number): number {
  const cpu = process.cpuUsage(before);
  return ((cpu.user + cpu.system) / 1000 / wallMs) * 100;
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank];
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return percentile(sorted, 0.5);
}

/** Rounds for display and JSON: 3 significant digits is all a benchmark on a shared 2-core box can claim. */
export function round(value: number, digits = 3): number {
  if (!Number.isFinite(value) || value === 0) return value;
  const magnitude = Math.floor(Math.log10(Math.abs(value)));
  const factor = 10 ** Math.max(0, digits - 1 - magnitude);
  return Math.round(value * factor) / factor;
}
