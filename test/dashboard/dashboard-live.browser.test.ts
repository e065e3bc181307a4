/**
 * The overview as a user first sees it, in headless Chromium against real server processes: the history
 * kept from start-up (a viewer who connects late gets it at once), one meaning per outcome on every
 * surface, charts over a chosen range with fitting tick labels and a legend, the favicon, and region
 * mode (region, global store state, lease counters) on the overview, /rl/v1/info and `rl status`.
 */
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { buildCli, rl } from '../cli/rl.js';
import { openPage, screenshot } from '../support/browser.js';
import { dashboardSuite } from '../support/dashboard-suite.js';
import { startPrivateRedis, type RedisHandle } from '../support/redis.js';

/** One enforcing and one shadow policy on /mix, and a shadow policy alone on /observed. */
const POLICIES = {
  policies: [
    { policy_id: 'mix-enforce', priority: 10, scope: { endpoint: '/mix' }, algorithm: { type: 'fixed_window', limit: 2, window: '1h' } },
    { policy_id: 'mix-shadow', priority: 10, scope: { endpoint: '/mix' }, algorithm: { type: 'fixed_window', limit: 1, window: '1h' }, enforcement_mode: 'shadow' },
    { policy_id: 'observed', priority: 10, scope: { endpoint: '/observed' }, algorithm: { type: 'fixed_window', limit: 1, window: '1h' }, enforcement_mode: 'shadow' },
  ],
};

/** The sample of one series line of a Prometheus exposition. */
function sample(exposition: string, series: string): number {
  const line = exposition.split('\n').find((l) => l.startsWith(`${series} `));
  if (line === undefined) throw new Error(`no series ${series}`);
  return Number(line.slice(series.length + 1));
}

/** The first `snapshot` of GET /rl/v1/stream whose totals count `total` decisions, and the stream's hello. */
async function streamUntil(url: string, total: number): Promise<{ hello: any; snapshot: any }> {
  const abort = new AbortController();
  const response = await fetch(`${url}/rl/v1/stream`, { signal: abort.signal });
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let hello: any;
  try {
    for (let frames = 0; frames < 60; ) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const [event, data] = buffer.slice(0, end).split('\n').map((line) => line.slice(line.indexOf(': ') + 2));
        buffer = buffer.slice(end + 2);
        frames++;
        if (event === 'hello') hello = JSON.parse(data);
        else if (JSON.parse(data).totals.total === total) return { hello, snapshot: JSON.parse(data) };
      }
    }
    throw new Error(`no snapshot counted ${total} decisions`);
  } finally {
    abort.abort();
  }
}

/** The `hello` of a new stream (then the stream is closed). */
async function helloOf(url: string): Promise<any> {
  const abort = new AbortController();
  const response = await fetch(`${url}/rl/v1/stream`, { signal: abort.signal });
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  try {
    while (!buffer.includes('\n\n')) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the stream ended before its hello');
      buffer += value;
    }
    const [event, data] = buffer.slice(0, buffer.indexOf('\n\n')).split('\n').map((line) => line.slice(line.indexOf(': ') + 2));
    expect(event).to.equal('hello');
    return JSON.parse(data);
  } finally {
    abort.abort();
  }
}

/** The leftmost and rightmost columns of a canvas holding a coloured (not grey) pixel: where a series was drawn. */
const COLOURED_COLUMNS = new Function(
  'canvas',
  `const { width, height } = canvas;
   const d = canvas.getContext('2d').getImageData(0, 0, width, height).data;
   let leftmost = -1, rightmost = -1;
   for (let x = 0; x < width; x++) for (let y = 0; y < height; y++) {
     const i = (y * width + x) * 4;
     if (d[i + 3] > 0 && !(d[i] === d[i + 1] && d[i + 1] === d[i + 2])) { if (leftmost < 0) leftmost = x; rightmost = x; break; }
   }
   return { width, leftmost, rightmost };`,
) as (canvas: HTMLCanvasElement) => { width: number; leftmost: number; rightmost: number };

/** What the overview's chart drew: its x range (epoch s), its points and its tick labels, and the legend. */
async function chartState(page: Page) {
  return page.getByTestId('rate-chart').evaluate((el: HTMLElement) => ({
    xMin: Number(el.dataset.xMin),
    xMax: Number(el.dataset.xMax),
    points: Number(el.dataset.points),
    ticks: (el.dataset.ticks ?? '').split('|'),
    legend: ['allowed', 'denied', 'shadow'].map((o) => el.querySelector(`[data-testid="legend-${o}"]`)?.textContent),
  }));
}

describe('dashboard overview: history, outcomes, charts, favicon (headless Chromium, real server)', function () {
  this.timeout(90_000);
  const live = dashboardSuite({ RL_AUTH_ENABLED: 'false' }, POLICIES);
  const check = async (endpoint: string) =>
    (await fetch(`${live.server.url}/rl/v1/check`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ endpoint }) })).json() as Promise<any>;

  it('shows one meaning per outcome on the overview, the stream, the analytics summary and the metrics', async () => {
    // The known mix: enforced allowed; allowed while the shadow policy would have limited; enforced denied
    // (shadow too); a shadow-only answer within its limit, and one over it.
    const answers = [await check('/mix'), await check('/mix'), await check('/mix'), await check('/observed'), await check('/observed')];
    expect(answers.map((d) => [d.allowed, d.shadow_mode, d.metadata.shadow_action ?? d.action])).to.deep.equal([
      [true, false, 'allow'],
      [true, false, 'deny'],
      [false, false, 'deny'],
      [true, true, 'allow'],
      [true, true, 'shadow_only'],
    ]);
    const expected = { total: 5, allowed: 4, denied: 1, shadow: 3 };

    const summary = (await (await fetch(`${live.server.url}/rl/v1/analytics/summary`)).json()) as any;
    expect({ total: summary.total, allowed: summary.allowed, denied: summary.denied, shadow: summary.shadow }).to.deep.equal(expected);

    const exposition = await (await fetch(`${live.server.url}/metrics`)).text();
    const metric = (outcome: string) => sample(exposition, `rl_decisions_total{operation="check",outcome="${outcome}"}`);
    expect({ total: metric('allowed') + metric('denied'), allowed: metric('allowed'), denied: metric('denied'), shadow: metric('shadow') }).to.deep.equal(expected);

    const { snapshot } = await streamUntil(live.server.url, 5);
    expect(snapshot.totals).to.include(expected);

    const page = await openPage(live.browser.context);
    await page.goto(`${live.server.url}/dashboard/`);
    await page.getByTestId('total-decisions').filter({ hasText: /^5$/ }).waitFor();
    const shown = await Promise.all(['total-decisions', 'total-allowed', 'total-denied', 'total-shadow'].map((id) => page.getByTestId(id).textContent()));
    expect(shown.map(Number)).to.deep.equal([5, 4, 1, 3]);
    await page.close();
  });

  it('gives a viewer who connects late the history kept from start-up, and draws it over the chosen range', async () => {
    // Traffic while no one watches: four on /mix, whose limit is 2 an hour, so at least the last two are denied.
    const sentAt = Date.now();
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push((await check('/mix')).allowed);
    expect(answers.slice(2)).to.deep.equal([false, false]);
    // A viewer connecting afterwards gets ticks from before it connected, the denials among them (polled until
    // the tick after them has been taken; the bound only guards against a hang).
    let hello: any;
    for (let polls = 0; ; polls++) {
      hello = await helloOf(live.server.url);
      if (hello.history.denied.some((rate: number, i: number) => rate > 0 && hello.history.at[i] >= sentAt)) break;
      if (polls > 100) throw new Error('the denials never reached the history');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(hello.history.at[0]).to.be.below(sentAt);
    expect(hello.history.at.length).to.be.at.least(2);
    expect(hello.history.policies.map((p: { policy_id: string }) => p.policy_id)).to.include.members(['mix-enforce', 'mix-shadow']);

    const console: string[] = [];
    const notFound: string[] = [];
    const page = await openPage(live.browser.context);
    page.on('console', (m) => m.type() === 'error' && console.push(m.text()));
    page.on('response', (r) => r.status() >= 400 && notFound.push(`${r.status()} ${r.url()}`));
    await page.goto(`${live.server.url}/dashboard/`);
    await page.getByTestId('store-state').filter({ hasText: 'memory · up' }).waitFor();
    // From the first paint: the whole history is there, over the whole 5-minute range, labelled in minutes and seconds.
    let chart = await chartState(page);
    expect(chart.points).to.be.at.least(hello.history.at.length);
    expect(chart.xMax - chart.xMin).to.equal(300);
    expect(chart.ticks.length).to.be.within(3, 11);
    for (const tick of chart.ticks) expect(tick).to.match(/^\d\d:\d\d:\d\d$/);
    // The legend shows numbers without hovering.
    for (const value of chart.legend) expect(value).to.match(/^\d+\.\d\d$/);
    expect(await page.getByTestId('spark-heading').textContent()).to.equal('last 5 min');
    await screenshot(page, '20-overview-5min');

    // A quiet policy's sparkline draws its zero line up to the newest tick (not clipped away at the bottom edge,
    // which would read as "no data"): after 12 more ticks, its drawing still reaches the right edge.
    const firstPoints = chart.points;
    await page.waitForFunction((n) => Number(document.querySelector<HTMLElement>('[data-testid="rate-chart"]')?.dataset.points) >= n, firstPoints + 12);
    const drawn = await page.locator('[data-testid="policy-rate-mix-enforce"] .spark canvas').evaluate(COLOURED_COLUMNS);
    expect(drawn.rightmost, `coloured columns ${drawn.leftmost}..${drawn.rightmost} of ${drawn.width}`).to.be.at.least(drawn.width - 3);

    await page.getByTestId('chart-range').selectOption('3600');
    chart = await chartState(page);
    expect(chart.xMax - chart.xMin).to.equal(3600);
    for (const tick of chart.ticks) expect(tick).to.match(/^\d\d:\d\d$/);
    expect(await page.getByTestId('spark-heading').textContent()).to.equal('last 1 h');
    const spark = await page.locator('[data-testid="policy-rate-mix-enforce"] .spark').evaluate((el: HTMLElement) => Number(el.dataset.xMax) - Number(el.dataset.xMin));
    expect(spark).to.equal(3600);
    await screenshot(page, '21-overview-1h');

    // The favicon is served (the page links it; /favicon.ico answers too), and the load logged no error.
    expect((await fetch(`${live.server.url}/favicon.ico`)).headers.get('content-type')).to.equal('image/svg+xml');
    expect(await page.evaluate(() => (document.querySelector('link[rel="icon"]') as HTMLLinkElement | null)?.href)).to.match(/\/dashboard\/favicon\.svg$/);
    expect((await fetch(`${live.server.url}/dashboard/favicon.svg`)).status).to.equal(200);
    expect(notFound).to.deep.equal([]);
    expect(console).to.deep.equal([]);
    await page.close();
  });
});

describe('dashboard in region mode: region, global store and leases (headless Chromium, real server)', function () {
  this.timeout(120_000);
  let regional: RedisHandle;
  let global: RedisHandle;
  before(async () => {
    [regional, global] = await Promise.all([startPrivateRedis(), startPrivateRedis(), buildCli()]);
  });
  const live = dashboardSuite(
    () => ({
      RL_AUTH_ENABLED: 'false',
      RL_REGION: 'eu-west',
      RL_COUNTERSTORE_ADDR: regional.url,
      RL_GLOBAL_COUNTERSTORE_ADDR: global.url,
      RL_GLOBAL_COUNTERSTORE_TIMEOUT_MS: '500',
    }),
    {
      policies: [{ policy_id: 'global-window', scope: { endpoint: '/global' }, algorithm: { type: 'fixed_window', limit: 1000, window: '1h' }, budget: 'global' }],
    },
  );
  after(async () => {
    await Promise.all([regional?.stop(), global?.stop()]);
  });

  it('shows the region, the global store and the lease counters on /rl/v1/info, `rl status` and the overview', async () => {
    for (let i = 0; i < 3; i++) {
      const d = (await (await fetch(`${live.server.url}/rl/v1/check`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"endpoint":"/global"}' })).json()) as any;
      expect(d).to.deep.include({ allowed: true, matched_policy_id: 'global-window' });
      expect(d.metadata).to.include({ budget: 'global', region: 'eu-west' });
    }
    const info = (await (await fetch(`${live.server.url}/rl/v1/info`)).json()) as any;
    expect(info.region).to.deep.include({ name: 'eu-west' });
    expect(info.region.global_store.state).to.equal('up');
    expect(info.region.global_store.masters).to.have.length(1);
    expect(info.region.global_store.masters[0]).to.include({ breaker: 'closed' });
    expect(info.leases.refills).to.be.at.least(1);
    expect(info.leases).to.have.all.keys('refills', 'units_returned', 'units_lapsed', 'units_lapsed_by_reason', 'waits');

    const status = await rl(['status'], { RL_URL: live.server.url });
    expect(status.stdout).to.match(/^region {5}eu-west$/m);
    expect(status.stdout).to.match(/^global {5}up$/m);
    expect(status.stdout).to.match(new RegExp(`^leases {5}${info.leases.refills} refills, `, 'm'));

    const page = await openPage(live.browser.context);
    await page.goto(`${live.server.url}/dashboard/`);
    await page.getByTestId('region-name').filter({ hasText: 'eu-west' }).waitFor();
    expect(await page.getByTestId('global-store-state').textContent()).to.equal('up');
    expect(Number(await page.getByTestId('lease-refills').textContent())).to.be.at.least(info.leases.refills);
    expect(await page.getByTestId('lease-waits').textContent()).to.match(/^\d+$/);
    await screenshot(page, '22-region-overview');

    // The global store goes away: the overview says so on its next ticks, and so does /rl/v1/info.
    await global.stop();
    await page.getByTestId('global-store-state').filter({ hasText: /^(down|circuit open)$/ }).waitFor();
    const after = (await (await fetch(`${live.server.url}/rl/v1/info`)).json()) as any;
    expect(after.region.global_store.state).to.be.oneOf(['down', 'circuit_open']);
    await screenshot(page, '23-region-global-down');
    await page.close();
  });
});
