import { expect } from 'chai';
import type { Page, Response } from 'playwright-core';
import { Redis } from 'ioredis';
import { connectRedisCounterStore } from '../../src/redis/redis-store.js';
import { randomPrefix, startPrivateRedis, type RedisHandle } from '../support/redis.js';
import { openPage, pageProblems, screenshot, signIn } from '../support/browser.js';
import { dashboardSuite as suiteWith } from '../support/dashboard-suite.js';

/** The suite of test/support/dashboard-suite.ts with these tests' POLICIES. */
const dashboardSuite = (env: Parameters<typeof suiteWith>[0]) => suiteWith(env, POLICIES);

const ADMIN = 'admin-key';
const READ_ONLY = 'ro-key';
const POLICIES = {
  policies: [
    {
      policy_id: 'api-per-user',
      name: 'API per user',
      priority: 10,
      scope: { org_id: 'acme', user_id: '*' },
      algorithm: { type: 'fixed_window', limit: 5, window: '1m' },
      action: 'deny',
      failure_mode: 'fail_open',
    },
    {
      policy_id: 'export-leased',
      name: 'Exports, from process leases',
      priority: 5,
      scope: { service: 'export' },
      // A quota: its period starts with the first consumption, so no window boundary falls inside a test.
      algorithm: { type: 'quota', limit: 1000, quota_period: '1h' },
      // The longest hold: the holder keeps its units until the test changes the policy.
      lease: { max_units: 50, max_hold: '60s' },
    },
    {
      policy_id: 'search-shadow',
      name: 'Search, observed only',
      priority: 5,
      scope: { org_id: 'acme', endpoint: '/search' },
      algorithm: { type: 'token_bucket', limit: 20, window: '4s' },
      enforcement_mode: 'shadow',
    },
  ],
};

/**
 * The dashboard in real headless Chromium against a real server process with API-key auth: every page,
 * the live stream, and each change a policy can go through, as an admin and as a read-only caller.
 */
describe('dashboard (headless Chromium, real server)', function () {
  this.timeout(60_000);
  const live = dashboardSuite({ RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'apikey', RL_AUTH_API_KEYS: `${ADMIN},${READ_ONLY}:read-only` });

  const api = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(live.server.url + path, {
      method,
      headers: { 'X-Api-Key': ADMIN, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as any };
  };

  const openPolicy = async (page: Page, id: string) => {
    await page.getByTestId('nav-policies').click();
    await page.getByTestId(`policy-row-${id}`).click();
    await page.getByTestId('versions').waitFor();
  };

  it('asks for a credential when the server needs one: the sign-in form, no error, no open-server note', async () => {
    const page = await openPage(live.browser.context);
    await page.goto(`${live.server.url}/dashboard/`);
    await page.getByTestId('login').waitFor();
    expect(await page.getByTestId('login-error').count()).to.equal(0);
    expect(await page.getByTestId('open-server').count()).to.equal(0);
    expect(await page.getByTestId('whoami').count()).to.equal(0);
    await page.close();
  });

  it('refuses a wrong key and keeps the login form', async () => {
    const page = await openPage(live.browser.context);
    await page.goto(`${live.server.url}/dashboard/`);
    await page.getByTestId('login-key').fill('not-a-key');
    await page.getByTestId('login-submit').click();
    expect(await page.getByTestId('login-error').textContent()).to.contain('not accepted');
    expect(await page.evaluate(() => sessionStorage.length)).to.equal(0);
    await screenshot(page, '01-login');
    // The page's CSP is in force: an inline script is refused (and reported), so it never runs.
    const reported = page.waitForEvent('console', (message) => /Content Security Policy/i.test(message.text()));
    const ran = await page.evaluate(() => {
      const script = document.createElement('script');
      script.textContent = 'window.inlineRan = true';
      document.body.append(script);
      return (window as unknown as { inlineRan?: boolean }).inlineRan === true;
    });
    expect(ran).to.equal(false);
    expect((await reported).text()).to.match(/script-src 'self'/);
    pageProblems.splice(0); // the violation this test caused on purpose
    await page.close();
  });

  it('logs in with a key and shows the live rates after traffic is generated', async () => {
    const page = await signIn(live.browser.context, live.server.url, ADMIN);
    expect(await page.getByTestId('whoami').textContent()).to.contain('admin');
    await page.getByTestId('store-state').filter({ hasText: 'memory · up' }).waitFor();
    // 4 users × 8 checks against a limit of 5 per user: 20 allowed, 12 denied, and 6 searches in shadow.
    const calls: Promise<unknown>[] = [];
    for (let user = 0; user < 4; user++) {
      for (let i = 0; i < 8; i++) calls.push(api('POST', '/rl/v1/check', { org_id: 'acme', user_id: `u${user}`, tags: { user: `u${user}` } }));
    }
    for (let i = 0; i < 6; i++) calls.push(api('POST', '/rl/v1/check', { org_id: 'acme', endpoint: '/search' }));
    await Promise.all(calls);
    // The stream's next ticks carry the change, without a reload.
    const row = page.getByTestId('policy-rate-api-per-user');
    await page.waitForFunction(() => {
      const cells = document.querySelectorAll('[data-testid="policy-rate-api-per-user"] td.num');
      // Allowed and denied in the same tick (read together: the next tick may be quiet again).
      return cells.length === 3 && Number(cells[0].textContent) > 0 && Number(cells[1].textContent) > 0;
    });
    expect(await row.count()).to.equal(1);
    await screenshot(page, '02-overview');
    await page.close();
  });

  it('lists the policies with what each does', async () => {
    const page = await signIn(live.browser.context, live.server.url, ADMIN);
    await page.getByTestId('nav-policies').click();
    const row = page.getByTestId('policy-row-api-per-user');
    await row.waitFor();
    const text = await row.textContent();
    expect(text).to.contain('fixed_window').and.contain('5 / 1m').and.contain('deny').and.contain('100%');
    expect(await page.getByTestId('policy-row-search-shadow').textContent()).to.contain('shadow').and.contain('20 / 4s');
    // A leased policy is marked with its lease; the others are not (no budget field: regional, unmarked).
    expect(await page.getByTestId('policy-lease-export-leased').textContent()).to.equal('lease 50 units, held ≤ 60s');
    expect(await page.getByTestId('policy-lease-api-per-user').textContent()).to.equal('–');
    await screenshot(page, '03-policies');
    await page.close();
  });

  it('edits a policy, shows the new version, diffs two versions and rolls back', async () => {
    const page = await signIn(live.browser.context, live.server.url, ADMIN);
    await openPolicy(page, 'api-per-user');
    await page.locator('[data-field="algorithm.limit"]').fill('7');
    await page.getByTestId('save').click();
    await page.getByTestId('notice').filter({ hasText: 'now version 2' }).waitFor();
    await page.getByTestId('version-2').filter({ hasText: 'current' }).waitFor();
    await page.getByTestId('policy-summary').filter({ hasText: '7 / 1m' }).waitFor();
    expect((await api('GET', '/rl/v1/policies/api-per-user')).body.algorithm.limit).to.equal(7);

    // The diff defaults to the last two versions; choose them explicitly anyway.
    await page.getByTestId('diff-left').selectOption('1');
    await page.getByTestId('diff-right').selectOption('2');
    const limitRow = page.locator('[data-testid="diff-table"] tr[data-path="algorithm.limit"]');
    expect(await limitRow.getAttribute('class')).to.equal('changed');
    expect(await limitRow.locator('td').allTextContents()).to.deep.equal(['algorithm.limit', '5', '7']);
    expect(await page.locator('[data-testid="diff-table"] tr[data-path="action"]').getAttribute('class')).to.equal('');
    await screenshot(page, '04-policy-edited-diff');

    await page.getByTestId('rollback-1').click();
    await page.getByTestId('notice').filter({ hasText: 'now version 3' }).waitFor();
    await page.getByTestId('policy-summary').filter({ hasText: '5 / 1m' }).waitFor();
    await page.getByTestId('audit').filter({ hasText: 'rollback' }).waitFor();
    const stored = (await api('GET', '/rl/v1/policies/api-per-user')).body;
    expect([stored.version, stored.algorithm.limit]).to.deep.equal([3, 5]);
    await screenshot(page, '05-policy-rolled-back');
    await page.close();
  });

  it('moves the rollout slider and toggles shadow and enforce', async () => {
    const page = await signIn(live.browser.context, live.server.url, ADMIN);
    await openPolicy(page, 'search-shadow');
    await page.getByTestId('rollout-slider').fill('40');
    expect(await page.getByTestId('rollout-value').textContent()).to.equal('40%');
    await page.getByTestId('rollout-apply').click();
    await page.getByTestId('notice').filter({ hasText: 'Rollout changed' }).waitFor();
    await page.getByTestId('mode-toggle').filter({ hasText: 'enforce' }).click();
    await page.getByTestId('notice').filter({ hasText: 'Switched to enforce' }).waitFor();
    const stored = (await api('GET', '/rl/v1/policies/search-shadow')).body;
    expect([stored.rollout_percent, stored.enforcement_mode]).to.deep.equal([40, 'enforce']);
    await page.close();
  });

  it('keeps a moved, unapplied rollout slider when the policy changes meanwhile, and says so', async () => {
    const page = await signIn(live.browser.context, live.server.url, ADMIN);
    await openPolicy(page, 'search-shadow');
    await page.getByTestId('rollout-slider').fill('25');
    const changed = await api('PATCH', '/rl/v1/policies/search-shadow', { description: 'changed elsewhere' });
    expect(changed.status).to.equal(200);
    await page.getByTestId('notice').filter({ hasText: 'changed meanwhile' }).waitFor();
    expect(await page.getByTestId('rollout-slider').inputValue()).to.equal('25');
    expect(await page.getByTestId('rollout-value').textContent()).to.equal('25%');
    await page.close();
  });

  const isPatchOf = (id: string) => (r: Response) => r.request().method() === 'PATCH' && r.url().endsWith(`/rl/v1/policies/${id}`);

  it('says what was saved and shows the reload error, not a success notice, when the saved policy cannot be loaded again', async () => {
    const page = await signIn(live.browser.context, live.server.url, ADMIN);
    await openPolicy(page, 'search-shadow');
    await page.locator('[data-field="description"]').fill('saved, then not reloaded');
    // The save goes through; every load after it (the save's own, the stream's) is answered 503, numbered.
    let refused = 0;
    let failing = false;
    await page.route('**/rl/v1/policies/search-shadow/versions', (route) =>
      failing
        ? route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ error: `reload refused #${++refused}` }) })
        : route.continue(),
    );
    const patched = page.waitForResponse(isPatchOf('search-shadow'));
    failing = true;
    await page.getByTestId('save').click();
    await patched;
    const firstAfterSave = refused + 1;
    await page.waitForFunction(
      (n) => Number(/#(\d+)/.exec(document.querySelector('[data-testid="error"]')?.textContent ?? '')?.[1] ?? 0) >= n,
      firstAfterSave,
    );
    expect(await page.getByTestId('error').textContent()).to.contain('503');
    const saved = (await (await patched).json()) as { version: number };
    const told = page.getByTestId('saved-not-reloaded');
    await told.waitFor();
    expect(await told.textContent()).to.contain(`now version ${saved.version}`).and.to.contain('Loading it again failed');
    expect(await page.getByTestId('notice').count()).to.equal(0);
    expect((await api('GET', '/rl/v1/policies/search-shadow')).body.description).to.equal('saved, then not reloaded');
    await page.unrouteAll();
    await page.close();
  });

  it("tells of a save whose own reload failed when a later load showed the saved version", async () => {
    const page = await signIn(live.browser.context, live.server.url, ADMIN);
    await openPolicy(page, 'search-shadow');
    await page.locator('[data-field="description"]').fill('saved, shown by the stream');
    // The first load after the click is held; the stream's load for the save's new revision goes through,
    // and only then is the held one answered 503.
    let releaseHeld: (() => Promise<void>) | undefined;
    let passedAfterHeld!: () => void;
    const laterLoadPassed = new Promise<void>((resolve) => (passedAfterHeld = resolve));
    let watching = false;
    await page.route('**/rl/v1/policies/search-shadow/versions', async (route) => {
      if (!watching) return route.continue();
      if (releaseHeld === undefined) {
        releaseHeld = () => route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ error: 'held, then refused' }) });
        return;
      }
      await route.continue();
      passedAfterHeld();
    });
    const patched = page.waitForResponse(isPatchOf('search-shadow'));
    watching = true;
    await page.getByTestId('save').click();
    const saved = (await (await patched).json()) as { version: number };
    await laterLoadPassed;
    await releaseHeld!();
    await page.getByTestId('notice').filter({ hasText: `now version ${saved.version}` }).waitFor();
    expect(await page.getByTestId('error').count()).to.equal(0);
    await page.unrouteAll();
    await page.close();
  });

  it("shows the server's field error for a bad edit and saves nothing", async () => {
    const page = await signIn(live.browser.context, live.server.url, ADMIN);
    await openPolicy(page, 'api-per-user');
    const before = (await api('GET', '/rl/v1/policies/api-per-user')).body.version;
    await page.locator('[data-field="algorithm.window"]').fill('banana');
    await page.getByTestId('save').click();
    const fieldError = page.getByTestId('field-error');
    await fieldError.first().waitFor();
    expect(await fieldError.first().textContent()).to.match(/^algorithm\.window: /);
    expect(await page.getByTestId('error').textContent()).to.contain('422');
    expect(await page.locator('[data-field="algorithm.window"]').getAttribute('class')).to.contain('invalid');
    expect((await api('GET', '/rl/v1/policies/api-per-user')).body.version).to.equal(before);
    await screenshot(page, '06-bad-edit');
    await page.close();
  });

  it('shows a 409 when the policy changed after the form was filled', async () => {
    const page = await signIn(live.browser.context, live.server.url, ADMIN);
    await openPolicy(page, 'api-per-user');
    await page.locator('[data-field="description"]').fill('edited in the browser');
    const changed = await api('PATCH', '/rl/v1/policies/api-per-user', { priority: 11 });
    expect(changed.status).to.equal(200);
    // The page learns of the change from the stream and keeps the unsaved edit.
    await page.getByTestId('notice').filter({ hasText: 'changed meanwhile' }).waitFor();
    await page.getByTestId('save').click();
    await page.getByTestId('conflict').waitFor();
    expect(await page.getByTestId('conflict').textContent()).to.contain('409');
    await screenshot(page, '07-conflict');
    await page.close();
  });

  it('shows a read-only caller no edit controls', async () => {
    const page = await signIn(live.browser.context, live.server.url, READ_ONLY);
    expect(await page.getByTestId('whoami').textContent()).to.contain('read-only');
    await openPolicy(page, 'api-per-user');
    await page.getByTestId('diff-table').waitFor();
    expect(await page.getByTestId('policy-actions').count()).to.equal(0);
    expect(await page.locator('[data-testid^="rollback-"]').count()).to.equal(0);
    expect(await page.locator('[data-testid="save"], [data-testid="mode-toggle"], [data-testid="rollout-slider"]').count()).to.equal(0);
    await screenshot(page, '08-read-only-policy');
    await page.close();
  });

  it('shows who is limited, filterable by policy', async () => {
    const page = await signIn(live.browser.context, live.server.url, READ_ONLY);
    await page.getByTestId('nav-limited').click();
    const row = page.getByTestId('limited-api-per-user');
    await row.waitFor();
    expect(Number(await row.locator('td.num').first().textContent())).to.equal(12);
    expect(await page.getByTestId('limited-tags').textContent()).to.contain('u0');
    // Each of the 4 users was denied 3 times (8 calls, limit 5).
    await page.getByTestId('denied-identity').first().waitFor();
    const identities = await page.getByTestId('denied-identity').allTextContents();
    expect(identities.sort()).to.deep.equal(['u0', 'u1', 'u2', 'u3'].map((u) => `api-per-useruser_id=${u}3`));
    await screenshot(page, '09-who-is-limited');
    await page.getByTestId('limited-filter').selectOption('search-shadow');
    await page.getByTestId('limited-search-shadow').waitFor();
    expect(await page.getByTestId('limited-api-per-user').count()).to.equal(0);
    expect(await page.getByTestId('denied-identity').count()).to.equal(0);
    await page.close();
  });

  it('tries a decision as a peek and explains the match', async () => {
    const page = await signIn(live.browser.context, live.server.url, READ_ONLY);
    await page.getByTestId('nav-try').click();
    await page.locator('input[name="org_id"]').fill('acme');
    await page.locator('input[name="user_id"]').fill('fresh-user');
    const remainingAfter = async () => {
      await page.getByTestId('try-submit').click();
      await page.getByTestId('try-policy').filter({ hasText: 'api-per-user' }).waitFor();
      return page.getByTestId('try-result').textContent();
    };
    const first = await remainingAfter();
    expect(await page.getByTestId('try-reason').textContent()).to.equal('within_limit');
    expect(first).to.contain('user_id').and.contain('fresh-user');
    // A peek consumes nothing: asking again answers the same remaining count.
    await page.getByTestId('try-result').evaluate((el) => el.replaceChildren());
    expect(await remainingAfter()).to.contain('5 / 5');
    await screenshot(page, '10-try-a-decision');
    await page.close();
  });
});

/** The same page against a server with authentication off (the default): no sign-in at all. */
describe('dashboard on a server that needs no credential (headless Chromium, real server)', function () {
  this.timeout(60_000);
  const live = dashboardSuite({ RL_AUTH_ENABLED: 'false' });

  it('opens straight onto the overview, says the server is open, and every page works', async () => {
    const page = await openPage(live.browser.context);
    await page.goto(`${live.server.url}/dashboard/`);
    await page.getByTestId('store-state').filter({ hasText: 'memory · up' }).waitFor();
    expect(await page.getByTestId('login').count(), 'no sign-in form').to.equal(0);
    expect(await page.getByTestId('logout').count(), 'nothing to sign out of').to.equal(0);
    expect(await page.getByTestId('whoami').textContent()).to.equal('anonymous · admin');
    expect(await page.getByTestId('open-server').textContent()).to.contain('no credential needed');
    expect(await page.evaluate(() => sessionStorage.length), 'no credential stored').to.equal(0);
    await screenshot(page, '11-open-server');
    // An admin's pages, without a credential: the policy list and an edit control.
    await page.getByTestId('nav-policies').click();
    await page.getByTestId('policy-row-api-per-user').click();
    await page.getByTestId('versions').waitFor();
    expect(await page.getByTestId('rollout-slider').count()).to.equal(1);
    await page.close();
  });
});

/** The sum of every series of `name` in a Prometheus exposition. */
function metricSum(exposition: string, name: string): number {
  let sum = 0;
  for (const match of exposition.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))) sum += Number(match[1]);
  return sum;
}

/**
 * Process leases on a server in Redis mode: the leased policy's detail says its lease and budget, and
 * the overview shows the units the server returned and lapsed, as its /metrics counts them.
 */
describe('dashboard on a server in Redis mode with a leased policy (headless Chromium, real server)', function () {
  this.timeout(60_000);
  const keyPrefix = randomPrefix();
  let redis: RedisHandle;
  let admin: Redis;
  before(async () => {
    redis = await startPrivateRedis();
    admin = new Redis(redis.url);
  });
  const live = dashboardSuite(() => ({ RL_AUTH_ENABLED: 'false', RL_COUNTERSTORE_ADDR: redis.url, RL_KEY_PREFIX: keyPrefix, RL_COUNTERSTORE_TIMEOUT_MS: '5000' }));
  after(async () => {
    admin?.disconnect();
    await redis?.stop();
  });

  const post = async (path: string, body: unknown, method = 'POST') => {
    const response = await fetch(live.server.url + path, { method, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    return { status: response.status, body: (await response.json()) as any };
  };

  it("shows a leased policy's lease and budget in its detail", async () => {
    const page = await openPage(live.browser.context);
    await page.goto(`${live.server.url}/dashboard/#/policies/export-leased`);
    await page.getByTestId('versions').waitFor();
    expect(await page.getByTestId('policy-lease').textContent()).to.equal('50 units, held ≤ 60s');
    expect(await page.getByTestId('policy-budget').textContent()).to.equal('regional');
    await screenshot(page, '12-leased-policy');
    await page.goto(`${live.server.url}/dashboard/#/policies/api-per-user`);
    await page.getByTestId('policy-summary').filter({ hasText: '5 / 1m' }).waitFor();
    expect(await page.getByTestId('policy-lease').textContent()).to.contain('none');
    await page.close();
  });

  it('shows a global budget in the detail, and marks it in the list', async () => {
    // Without regions a global budget means the one store there is (docs/distribution.md); the page shows it all the same.
    const created = await post('/rl/v1/policies', {
      policy_id: 'global-one',
      scope: { resource: 'global-one' },
      algorithm: { type: 'fixed_window', limit: 100, window: '1m' },
      budget: 'global',
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const page = await openPage(live.browser.context);
    await page.goto(`${live.server.url}/dashboard/#/policies`);
    await page.getByTestId('policy-lease-global-one').filter({ hasText: 'global budget' }).waitFor();
    expect(await page.getByTestId('policy-lease-api-per-user').textContent()).to.equal('–');
    await page.getByTestId('policy-row-global-one').click();
    await page.getByTestId('versions').waitFor();
    expect(await page.getByTestId('policy-budget').textContent()).to.equal('global');
    await page.close();
  });

  it('shows the lease units returned and lapsed on the overview, as the server counts them', async () => {
    const page = await openPage(live.browser.context);
    await page.goto(`${live.server.url}/dashboard/`);
    await page.getByTestId('store-state').filter({ hasText: 'redis · up' }).waitFor();

    // A refund to a holder with no units: they lapse (a refund adds the units to the holder's unspent ones, docs/distribution.md).
    const refund = await post('/rl/v1/refund', { service: 'export', quantity: 3 });
    expect(refund.body).to.deep.include({ allowed: true, reason: 'refunded', matched_policy_id: 'export-leased' });

    // Checks until the counter in Redis holds more than was admitted: the server's holder has units (hang guard only).
    const checker = connectRedisCounterStore(redis.url, { commandTimeoutMs: 2_000 });
    const used = async () => {
      // The counter, not the policies nor its take ledger (process leases name their takes).
      const keys = (await admin.keys(`${keyPrefix}*export-leased*`)).filter((k) => !k.includes('polic') && !k.endsWith(':takes'));
      if (keys.length === 0) return 0;
      expect(keys).to.have.length(1);
      return 1000 - (await checker.peek(keys, { type: 'quota', limit: 1000, periodMs: 3_600_000 })).remaining;
    };
    let admitted = 0;
    try {
      while ((await used()) <= admitted) {
        if (admitted >= 200) throw new Error('the holder never held units');
        const check = await post('/rl/v1/check', { service: 'export' });
        expect(check.body).to.deep.include({ allowed: true, reason: 'within_limit' });
        expect(check.body.metadata.lease).to.equal('local');
        admitted++;
      }
      // A policy change: the holder gives its unspent units back, and the counter then holds exactly what was admitted.
      expect((await post('/rl/v1/policies/export-leased', { description: 'changed' }, 'PATCH')).status).to.equal(200);
      for (let polls = 0; (await used()) !== admitted; polls++) {
        if (polls > 500) throw new Error('the unspent units never came back');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      await checker.close();
    }

    const exposition = await (await fetch(`${live.server.url}/metrics`)).text();
    const refills = metricSum(exposition, 'rl_lease_refills_total');
    const returned = metricSum(exposition, 'rl_lease_units_returned_total');
    expect(metricSum(exposition, 'rl_lease_units_lapsed_total')).to.equal(3);
    expect(refills).to.be.at.least(1);
    expect(returned).to.be.at.least(1);
    // The overview's next ticks carry the same numbers, without a reload.
    await page.getByTestId('lease-returned').filter({ hasText: new RegExp(`^${returned}$`) }).waitFor();
    expect(await page.getByTestId('lease-lapsed').textContent()).to.equal('3');
    expect(await page.getByTestId('lease-refills').textContent()).to.equal(String(refills));
    await screenshot(page, '13-lease-overview');
    await page.close();
  });
});
