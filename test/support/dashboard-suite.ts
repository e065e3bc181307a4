import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildDashboard } from '../../dashboard/build.js';
import { launchBrowser, pageProblems, type Browser } from './browser.js';
import { startServerProcess, type ServerProcessHandle } from './server-process.js';

/**
 * A real server process (with `env`, read when it starts, `policies` as its policy file and a fresh data
 * directory) serving the dashboard, and headless Chromium, for one describe block; after each test its
 * pages must have run without an uncaught exception or a CSP violation.
 */
export function dashboardSuite(env: Record<string, string> | (() => Record<string, string>), policies: unknown): { server: ServerProcessHandle; browser: Browser } {
  const live = {} as { server: ServerProcessHandle; browser: Browser };
  let dir: string | undefined;
  before(async () => {
    // The server serves dist/dashboard; build it here so the suite does not depend on `npm run build`.
    await buildDashboard();
    dir = mkdtempSync(join(tmpdir(), 'rl-dashboard-'));
    writeFileSync(join(dir, 'policies.json'), JSON.stringify(policies));
    live.server = await startServerProcess({ ...(typeof env === 'function' ? env() : env), RL_DATA_DIR: join(dir, 'data'), RL_POLICY_FILE: join(dir, 'policies.json') });
    live.browser = await launchBrowser();
  });
  after(async () => {
    await live.browser?.close();
    await live.server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  afterEach(() => {
    expect(pageProblems.splice(0)).to.deep.equal([]);
  });
  return live;
}
