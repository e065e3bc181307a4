/**
 * The overview's RLQS panel, in headless Chromium against a real server process with simulated Envoys
 * (test/support/envoy-rlqs-client.ts) on its gRPC port: the streams, buckets, units held and assignments
 * by strategy the page shows are /rl/v1/info's `rlqs` and /metrics' rl_rlqs_assignments_total, and go
 * back to no stream, no bucket and no unit held when the Envoys close.
 */
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { openPage, screenshot } from '../support/browser.js';
import { dashboardSuite } from '../support/dashboard-suite.js';
import { SimulatedEnvoy } from '../support/envoy-rlqs-client.js';

/** A window far larger than the test spends, grants living a minute: the figures hold still once the Envoys stop. */
const POLICIES = {
  policies: [
    { policy_id: 'checkout', scope: { user_id: '*', tags: { domain: 'edge' } }, algorithm: { type: 'fixed_window', limit: 100_000, window: '1h' }, lease: { max_hold: '60s' } },
  ],
};

interface Figures {
  streams: number;
  buckets: number;
  units_held: number;
  token_bucket: number;
  deny_all: number;
  allow_all: number;
}

/** The sample of one series line of a Prometheus exposition. */
function sample(exposition: string, series: string): number {
  const line = exposition.split('\n').find((l) => l.startsWith(`${series} `));
  if (line === undefined) throw new Error(`no series ${series}`);
  return Number(line.slice(series.length + 1));
}

/** What the server says: /rl/v1/info's rlqs and the assignments counted in /metrics. */
async function served(url: string): Promise<Figures> {
  const { rlqs } = (await (await fetch(`${url}/rl/v1/info`)).json()) as { rlqs: Omit<Figures, 'token_bucket' | 'deny_all' | 'allow_all'> };
  const metrics = await (await fetch(`${url}/metrics`)).text();
  const assigned = (strategy: string) => sample(metrics, `rl_rlqs_assignments_total{strategy="${strategy}"}`);
  return { ...rlqs, token_bucket: assigned('token_bucket'), deny_all: assigned('deny_all'), allow_all: assigned('allow_all') };
}

/** What the page shows. */
async function shown(page: Page): Promise<Figures> {
  const read = async (id: string) => Number(await page.getByTestId(id).textContent());
  return {
    streams: await read('rlqs-streams'),
    buckets: await read('rlqs-buckets'),
    units_held: await read('rlqs-units-held'),
    token_bucket: await read('rlqs-token-bucket'),
    deny_all: await read('rlqs-deny-all'),
    allow_all: await read('rlqs-allow-all'),
  };
}

/** Reads the server until two reads a tick apart agree (the Envoys have stopped: nothing moves), at most 50 tries. */
async function settled(url: string): Promise<Figures> {
  let last = await served(url);
  for (let i = 0; i < 50; i++) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    const now = await served(url);
    if (JSON.stringify(now) === JSON.stringify(last)) return now;
    last = now;
  }
  throw new Error(`the RLQS figures did not settle: ${JSON.stringify(last)}`);
}

/** Waits until the page shows `expected` (each tick repaints it), at most 50 looks. */
async function pageShows(page: Page, expected: Figures): Promise<Figures> {
  let seen = await shown(page);
  for (let i = 0; i < 50 && JSON.stringify(seen) !== JSON.stringify(expected); i++) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    seen = await shown(page);
  }
  return seen;
}

describe('dashboard overview: Envoy RLQS panel (headless Chromium, real server, simulated Envoys)', function () {
  this.timeout(90_000);
  const live = dashboardSuite({ RL_AUTH_ENABLED: 'false' }, POLICIES);

  it('shows the streams, buckets, units held and assignments by strategy the server counts', async () => {
    const grpcPort = Number(live.server.logs().find((l) => l.message === 'listening')!.grpc);
    const envoys = [1, 2].map(() => new SimulatedEnvoy({ target: `127.0.0.1:${grpcPort}`, domain: 'edge', reportEveryMs: 50 }));
    const page = await openPage(live.browser.context);
    try {
      await page.goto(`${live.server.url}/dashboard/`);
      await page.getByTestId('rlqs-streams').waitFor();
      // Each Envoy: one bucket per user, a token bucket for each, a few requests spent from it.
      for (const [i, envoy] of envoys.entries()) {
        for (const user of ['alice', 'bob'].slice(0, i + 1)) {
          const bucket = { user_id: user, route: 'checkout' };
          envoy.request(bucket);
          await envoy.waitFor((a) => a.bucket_id.bucket.user_id === user && a.quota_assignment_action?.rate_limit_strategy?.token_bucket !== undefined);
          for (let n = 0; n < 3; n++) envoy.request(bucket);
        }
      }
      const before = await settled(live.server.url);
      expect(before).to.include({ streams: 2, buckets: 3 });
      expect(before.token_bucket).to.be.at.least(3);
      expect(before.units_held).to.be.above(0);
      expect(await pageShows(page, before)).to.deep.equal(before);
      await screenshot(page, 'dashboard-rlqs');

      await Promise.all(envoys.map((envoy) => envoy.close()));
      const after = await settled(live.server.url);
      expect(after).to.include({ streams: 0, buckets: 0, units_held: 0 });
      expect(await pageShows(page, after)).to.deep.equal(after);
    } finally {
      await Promise.all(envoys.map((envoy) => envoy.close()));
      await page.close();
    }
  });
});
