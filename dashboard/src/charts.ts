import uPlot from 'uplot';
import { h } from './dom.js';
import { rate } from './format.js';
import { OUTCOMES, drawable, timeAxis, type Columns } from './series.js';
import type { OutcomeRates } from './types.js';

const COLORS: Record<keyof OutcomeRates, string> = { allowed: '#2e9e5b', denied: '#d64545', shadow: '#8a63d2' };

/** The newest known value of a column (the legend's), 0 when none is. */
function latest(column: (number | null)[]): number {
  for (let i = column.length - 1; i >= 0; i--) if (column[i] !== null) return column[i]!;
  return 0;
}

/**
 * Decisions per second by outcome over a chosen range ending at the newest tick. The x axis spans the
 * whole range from the first paint (not just the ticks there are), with tick labels suited to it; the
 * legend under it shows the newest values without hovering. What it drew is mirrored on the element
 * (`data-x-min`, `data-x-max`, `data-points`, `data-ticks`) for tests and for anyone inspecting the page.
 */
export class RateChart {
  private readonly plot: uPlot;
  private readonly legend: Record<keyof OutcomeRates, HTMLElement>;
  private range: [number, number] = [0, 1];
  private rangeSeconds = 300;

  constructor(
    private readonly target: HTMLElement,
    width: number,
  ) {
    this.legend = { allowed: h('span', { 'data-testid': 'legend-allowed' }), denied: h('span', { 'data-testid': 'legend-denied' }), shadow: h('span', { 'data-testid': 'legend-shadow' }) };
    this.plot = new uPlot(
      {
        width,
        height: 240,
        legend: { show: false },
        scales: {
          x: { time: true, range: () => this.range },
          y: { range: (_u, _min, max) => [0, Math.max(1, (max ?? 0) * 1.1)] },
        },
        axes: [
          {
            incrs: () => timeAxis(this.rangeSeconds).incrs,
            values: (_u, splits) => {
              const labels = splits.map(timeAxis(this.rangeSeconds).label);
              this.target.dataset.ticks = labels.join('|');
              return labels;
            },
          },
          { label: 'decisions/s', size: 60 },
        ],
        series: [{}, ...OUTCOMES.map((o) => ({ label: o, stroke: COLORS[o], width: 2, fill: `${COLORS[o]}18` }))],
      },
      [[], [], [], []],
      target,
    );
    target.append(
      h(
        'div',
        { class: 'legend', 'data-testid': 'chart-legend' },
        OUTCOMES.map((o) => h('span', { class: `legend-item ${o}` }, h('i', { class: 'swatch' }), `${o} `, this.legend[o], '/s')),
      ),
    );
  }

  /** Draws `columns` (epoch-second times) over the `rangeSeconds` ending at `toMs`. */
  update(columns: Columns, rangeSeconds: number, toMs: number): void {
    const to = toMs / 1000;
    const from = to - rangeSeconds;
    this.rangeSeconds = rangeSeconds;
    this.range = [from, to];
    const data = drawable(columns, from, to);
    this.plot.setData(data as uPlot.AlignedData);
    OUTCOMES.forEach((o, k) => (this.legend[o].textContent = rate(latest(data[k + 1]))));
    Object.assign(this.target.dataset, { xMin: String(from), xMax: String(to), points: String(columns[0].length) });
  }

  destroy(): void {
    this.plot.destroy();
  }
}

/** A tiny per-policy chart over the same range: allowed, denied and shadow rates, no axes or legend. */
export class Sparkline {
  private readonly plot: uPlot;
  private range: [number, number] = [0, 1];

  constructor(private readonly target: HTMLElement) {
    this.plot = new uPlot(
      {
        width: 160,
        height: 36,
        cursor: { show: false },
        legend: { show: false },
        select: { show: false, left: 0, top: 0, width: 0, height: 0 },
        // Zero a little above the bottom edge: on it, a quiet policy's line would be clipped away and read as "no data".
        scales: { x: { time: false, range: () => this.range }, y: { range: (_u, _min, max) => [-Math.max(1, max ?? 0) / 12, Math.max(1, max ?? 0)] } },
        axes: [{ show: false }, { show: false }],
        series: [{}, ...OUTCOMES.map((o) => ({ stroke: COLORS[o], width: 1.5 }))],
      },
      [[], [], [], []],
      target,
    );
  }

  update(columns: Columns, rangeSeconds: number, toMs: number): void {
    const to = toMs / 1000;
    this.range = [to - rangeSeconds, to];
    this.plot.setData(drawable(columns, to - rangeSeconds, to) as uPlot.AlignedData);
    Object.assign(this.target.dataset, { xMin: String(to - rangeSeconds), xMax: String(to), points: String(columns[0].length) });
  }

  destroy(): void {
    this.plot.destroy();
  }
}
