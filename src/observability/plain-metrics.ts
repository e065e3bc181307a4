import type { Registry } from 'prom-client';

/**
 * Counters and a histogram that count in plain numbers on the hot path and are rendered only when
 * /metrics is scraped.
 *
 * prom-client's own Counter hashes its label set on every `inc()`, even through a cached child, which
 * cost more than the decision being recorded (BENCHMARKS.md, engine profile). These objects give a
 * prom-client Registry what it reads at scrape time — `get()` returning `{name, help, type, values}`
 * — so the exposition format, content type and default process metrics stay prom-client's.
 */

interface MetricValue {
  labels: Record<string, string>;
  value: number;
  metricName?: string;
}

interface MetricSnapshot {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  values: MetricValue[];
  aggregator: 'sum';
}

/** One time series of a PlainCounter; keep it to count without any lookup. */
export interface Series {
  value: number;
}

export class PlainCounter {
  private readonly series = new Map<string, Series & { labels: Record<string, string> }>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelNames: readonly string[],
    registry: Registry,
  ) {
    if (labelNames.length > 2) throw new RangeError(`${name}: PlainCounter takes at most two labels`);
    registry.registerMetric(this as never);
  }

  /**
   * The series for these label values (in labelNames order; at most two labels), created at 0. A Map
   * lookup under a key built from the values: hot paths resolve their series once and keep them (a
   * `Series`, or a `SeriesRow` per first-label value) instead of calling this per increment.
   */
  at(first = '', second?: string): Series {
    const key = second === undefined ? first : first + '\u0000' + second;
    let series = this.series.get(key);
    if (!series) {
      const labels: Record<string, string> = {};
      [first, second].slice(0, this.labelNames.length).forEach((value, i) => (labels[this.labelNames[i]] = value!));
      series = { labels, value: 0 };
      this.series.set(key, series);
    }
    return series;
  }

  inc(first?: string, second?: string): void {
    this.at(first, second).value++;
  }

  get(): MetricSnapshot {
    const values = [...this.series.values()].map(({ labels, value }) => ({ labels, value }));
    return { name: this.name, help: this.help, type: 'counter', values, aggregator: 'sum' };
  }
}

/** A one-label counter whose values are counted elsewhere and read when /metrics is scraped. */
export class ReadCounter<L extends string> extends PlainCounter {
  constructor(
    name: string,
    help: string,
    labelName: string,
    private readonly labelValues: readonly L[],
    private readonly read: (labelValue: L) => number,
    registry: Registry,
  ) {
    super(name, help, [labelName], registry);
  }

  override get(): MetricSnapshot {
    for (const value of this.labelValues) this.at(value).value = this.read(value);
    return super.get();
  }
}

/**
 * The series of one value of a two-label counter's first label, one slot per value of the second label
 * (e.g. tenant `acme` × outcome allowed/denied/shadow): counting is an array index, no key to build or
 * hash. A slot is resolved through `PlainCounter.at` on its first increment, not before, so the
 * exposition lists exactly the series that were counted, in the order they were first counted, and two
 * rows of the same label values share their series.
 */
export class SeriesRow {
  private readonly slots: (Series | undefined)[];

  constructor(
    private readonly counter: PlainCounter,
    private readonly first: string,
    private readonly seconds: readonly string[],
  ) {
    this.slots = seconds.map(() => undefined);
  }

  /** Counts one for the second-label value `seconds[index]`. */
  inc(index: number): void {
    (this.slots[index] ?? this.resolve(index)).value++;
  }

  private resolve(index: number): Series {
    return (this.slots[index] = this.counter.at(this.first, this.seconds[index]));
  }
}

/** An unlabelled histogram with fixed upper bounds, as prom-client renders one. */
export class PlainHistogram {
  private readonly counts: Float64Array;
  private sum = 0;
  private count = 0;

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly upperBounds: readonly number[],
    registry: Registry,
  ) {
    this.counts = new Float64Array(upperBounds.length + 1);
    registry.registerMetric(this as never);
  }

  observe(value: number): void {
    let i = 0;
    while (i < this.upperBounds.length && value > this.upperBounds[i]) i++;
    this.counts[i]++;
    this.sum += value;
    this.count++;
  }

  /** Values observed so far (the `_count` series). */
  get observations(): number {
    return this.count;
  }

  get(): MetricSnapshot {
    const values: MetricValue[] = [];
    let cumulative = 0;
    this.upperBounds.forEach((le, i) => {
      cumulative += this.counts[i];
      values.push({ metricName: `${this.name}_bucket`, labels: { le: String(le) }, value: cumulative });
    });
    values.push({ metricName: `${this.name}_bucket`, labels: { le: '+Inf' }, value: this.count });
    values.push({ metricName: `${this.name}_sum`, labels: {}, value: this.sum });
    values.push({ metricName: `${this.name}_count`, labels: {}, value: this.count });
    return { name: this.name, help: this.help, type: 'histogram', values, aggregator: 'sum' };
  }
}
