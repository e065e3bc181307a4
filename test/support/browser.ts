/**
 * Headless Chromium for the browser tests (dashboard, API reference page): Debian's /usr/bin/chromium driven by playwright-core
 * (never a downloaded browser), in a fresh profile directory that is removed afterwards.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { REPO_ROOT } from './server-process.js';

export const CHROMIUM = process.env.RL_TEST_CHROMIUM ?? '/usr/bin/chromium';
/** Git-ignored; a reviewer looks at the pages here after a run. */
export const SCREENSHOT_DIR = join(REPO_ROOT, 'test-output', 'screenshots');

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'rl-dashboard-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: { width: 1280, height: 900 },
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * What went wrong inside pages opened by `openPage`: uncaught exceptions and Content-Security-Policy
 * violations (an inline script or style, or a load from elsewhere). 4xx answers the page shows on purpose
 * (a refused edit) are not problems.
 */
export const pageProblems: string[] = [];

export async function openPage(context: BrowserContext): Promise<Page> {
  const page = await context.newPage();
  page.on('pageerror', (error) => pageProblems.push(`uncaught: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) pageProblems.push(`CSP: ${message.text()}`);
  });
  return page;
}

/** Opens the dashboard in a new tab (its own sessionStorage) and signs in with `key`. */
export async function signIn(context: BrowserContext, baseUrl: string, key: string): Promise<Page> {
  const page = await openPage(context);
  await page.goto(`${baseUrl}/dashboard/`);
  await page.getByTestId('login-key').fill(key);
  await page.getByTestId('login-submit').click();
  await page.getByTestId('whoami').waitFor();
  return page;
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
}
