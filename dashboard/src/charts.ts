import uPlot from 'uplot';
import type { OutcomeRates, Snapshot } from './types.js';

const COLORS: Record<keyof OutcomeRates, string> = { allowed: '#2e9e5b', denied: '#d64545', shadow: '#8a63d2' };
const OUTCOMES = ['allowed', 'denied', 'shadow'] as const;

/** The columns uPlot plots: time (seconds) and one series per outcome. */
function columns(points: { at: number; rates: OutcomeRates }[]): uPlot.AlignedData {
  return [points.map((p) => p.at / 1000), ...OUTCOMES.map((o) => points.map((p) => p.rates[o]))];
}

/** Decisions per second by outcome over the stream's history. */
export class RateChart {
  private readonly plot: uPlot;

  constructor(target: HTMLElement, width: number) {
    this.plot = new uPlot(
      {
        width,
        height: 240,
        scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] } },
        axes: [{}, { label: 'decisions/s', size: 60 }],
        series: [{}, ...OUTCOMES.map((o) => ({ label: o, stroke: COLORS[o], width: 2, fill: `${COLORS[o]}18` }))],
      },
      [[], [], [], []],
      target,
    );
  }

  update(snapshots: Snapshot[]): void {
    this.plot.setData(columns(snapshots));
  }

  destroy(): void {
    this.plot.destroy();
  }
}

/** A tiny per-policy chart: allowed, denied and shadow rates, no axes or legend. */
export class Sparkline {
  private readonly plot: uPlot;

  constructor(target: HTMLElement) {
    this.plot = new uPlot(
      {
        width: 160,
        height: 36,
        cursor: { show: false },
        legend: { show: false },
        select: { show: false, left: 0, top: 0, width: 0, height: 0 },
        scales: { x: { time: false }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
        axes: [{ show: false }, { show: false }],
        series: [{}, ...OUTCOMES.map((o) => ({ stroke: COLORS[o], width: 1.5 }))],
      },
      [[], [], [], []],
      target,
    );
  }

  update(points: { at: number; rates: OutcomeRates }[]): void {
    this.plot.setData(columns(points));
  }

  destroy(): void {
    this.plot.destroy();
  }
}
