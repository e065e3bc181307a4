import type { OutcomeRates, SeriesHistory, Snapshot } from './types.js';

/** The ranges a chart can show, in seconds, with their labels (the overview's selector). */
export const RANGES = [
  { seconds: 300, label: '5 min' },
  { seconds: 900, label: '15 min' },
  { seconds: 3600, label: '1 h' },
] as const;
export type RangeSeconds = (typeof RANGES)[number]['seconds'];

export const OUTCOMES = ['allowed', 'denied', 'shadow'] as const;

/** Per-tick columns of one chart: time in epoch seconds, then a rate per outcome (null: not known then). */
export type Columns = [number[], (number | null)[], (number | null)[], (number | null)[]];

type PolicyColumns = Record<keyof OutcomeRates, (number | null)[]>;

/**
 * The page's copy of the server's per-second series (src/analytics/series-ring.ts): the history the
 * `hello` brought, extended by every snapshot, at most `capacity` ticks (an hour). DOM-free, so
 * test/dashboard/series.test.ts runs it under Node.
 */
export class LiveSeries {
  private at: number[] = [];
  private totals: PolicyColumns = { allowed: [], denied: [], shadow: [] };
  private readonly policies = new Map<string, PolicyColumns>();

  constructor(private readonly capacity = 3600) {}

  /** Replaces everything with the server's history (a new or renewed connection). */
  reset(history: SeriesHistory): void {
    this.at = [...history.at];
    this.totals = { allowed: [...history.allowed], denied: [...history.denied], shadow: [...history.shadow] };
    this.policies.clear();
    for (const p of history.policies) this.policies.set(p.policy_id, { allowed: [...p.allowed], denied: [...p.denied], shadow: [...p.shadow] });
    this.trim();
  }

  push(snapshot: Snapshot): void {
    const index = this.at.length;
    this.at.push(snapshot.at);
    for (const o of OUTCOMES) this.totals[o].push(snapshot.rates[o]);
    const seen = new Set<string>();
    for (const p of snapshot.policies) {
      seen.add(p.policy_id);
      let columns = this.policies.get(p.policy_id);
      if (!columns) {
        // Unknown before this tick (not among the busiest): null, not zero.
        columns = { allowed: new Array<number | null>(index).fill(null), denied: new Array<number | null>(index).fill(null), shadow: new Array<number | null>(index).fill(null) };
        this.policies.set(p.policy_id, columns);
      }
      for (const o of OUTCOMES) columns[o].push(p[o]);
    }
    for (const [id, columns] of this.policies) {
      if (!seen.has(id)) for (const o of OUTCOMES) columns[o].push(null);
    }
    this.trim();
  }

  get size(): number {
    return this.at.length;
  }

  /** The newest tick's time (epoch ms), if any. */
  get newest(): number | undefined {
    return this.at[this.at.length - 1];
  }

  /** The totals' columns for ticks in [fromMs, toMs]. */
  totalsIn(fromMs: number, toMs: number): Columns {
    return this.columnsIn(this.totals, fromMs, toMs);
  }

  /** One policy's columns for ticks in [fromMs, toMs] (all null where it was not known). */
  policyIn(policyId: string, fromMs: number, toMs: number): Columns {
    const columns = this.policies.get(policyId);
    return this.columnsIn(columns ?? { allowed: [], denied: [], shadow: [] }, fromMs, toMs, columns === undefined);
  }

  private columnsIn(columns: PolicyColumns, fromMs: number, toMs: number, unknown = false): Columns {
    const out: Columns = [[], [], [], []];
    for (let i = 0; i < this.at.length; i++) {
      const at = this.at[i];
      if (at < fromMs || at > toMs) continue;
      out[0].push(at / 1000);
      OUTCOMES.forEach((o, k) => (out[k + 1] as (number | null)[]).push(unknown ? null : (columns[o][i] ?? null)));
    }
    return out;
  }

  private trim(): void {
    const excess = this.at.length - this.capacity;
    if (excess <= 0) return;
    this.at.splice(0, excess);
    for (const o of OUTCOMES) this.totals[o].splice(0, excess);
    for (const [id, columns] of this.policies) {
      for (const o of OUTCOMES) columns[o].splice(0, excess);
      if (OUTCOMES.every((o) => columns[o].every((v) => v === null))) this.policies.delete(id);
    }
  }
}

/**
 * Tick steps (seconds) and label format for a range: minutes-long ranges get `HH:MM` (`HH:MM:SS` for the
 * 5-minute one, whose ticks fall every 30 s or minute), never dates and never fractions of a second.
 */
export function timeAxis(rangeSeconds: number): { incrs: number[]; label: (epochSeconds: number) => string } {
  const pad = (n: number) => String(n).padStart(2, '0');
  const withSeconds = rangeSeconds <= 300;
  return {
    incrs: rangeSeconds <= 300 ? [30, 60, 120] : rangeSeconds <= 900 ? [60, 120, 300] : [300, 600, 900, 1800],
    label: (s) => {
      const d = new Date(s * 1000);
      return `${pad(d.getHours())}:${pad(d.getMinutes())}${withSeconds ? `:${pad(d.getSeconds())}` : ''}`;
    },
  };
}

/**
 * The columns to draw over [from, to] (epoch seconds): the ticks inside it, or, with none, a flat zero
 * line across the whole range (an empty range is "nothing happened", not a blank box).
 */
export function drawable(columns: Columns, from: number, to: number): Columns {
  return columns[0].length > 0 ? columns : [[from, to], [0, 0], [0, 0], [0, 0]];
}
