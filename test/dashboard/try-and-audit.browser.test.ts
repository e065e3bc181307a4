import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { buildDashboard } from '../../dashboard/build.js';
import { RequestContextSchema, SIGNAL_TYPES } from '../../src/schema/request-context.js';
import { launchBrowser, openPage, pageProblems, screenshot, type Browser } from '../support/browser.js';
import { REPO_ROOT } from '../support/server-process.js';
import { serverProcessSuite } from '../support/server-suite.js';

const POLICIES = {
  policies: [
    {
      policy_id: 'api-per-user',
      priority: 10,
      scope: { org_id: 'acme', user_id: '*' },
      algorithm: { type: 'fixed_window', limit: 5, window: '1h' },
    },
    {
      // Reachable only through fields the old form lacked: api_key, severity, a tag.
      policy_id: 'ingest-by-key',
      priority: 20,
      scope: { api_key: 'k-123', severity: 'error', tags: { env: 'prod' } },
      algorithm: { type: 'quota', limit: 100, quota_period: '1h' },
    },
    {
      // Evaluated beside ingest-by-key: its verdict is the shadow verdict; a limit of 2 so a quantity of 3 exceeds it.
      policy_id: 'ingest-shadow',
      priority: 5,
      scope: { api_key: 'k-123' },
      algorithm: { type: 'quota', limit: 2, quota_period: '1h' },
      enforcement_mode: 'shadow',
    },
  ],
};

/**
 * "Try a decision" and the policy page's audit trail in headless Chromium against a real server with no
 * credential: the form offers exactly the RequestContext schema's fields, typed; the answer shows the
 * matched policy, the shadow verdict and the metadata; each audit entry lists what it changed as
 * `rl policies audit` prints it, a rollback names the version it restored, and scopes are chips.
 */
describe('dashboard: try any decision, see what changed (headless Chromium, real server)', function () {
  this.timeout(90_000);
  let browser: Browser;

  before(() => buildDashboard());
  const suite = serverProcessSuite('rl-dashboard-try-', { policies: POLICIES, env: () => ({ RL_AUTH_ENABLED: 'false' }) });
  before(async () => {
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
  });
  afterEach(() => {
    expect(pageProblems.splice(0)).to.deep.equal([]);
  });

  const peek = async (body: Record<string, unknown>) => {
    const response = await fetch(`${suite.server.url}/rl/v1/check`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, quantity: 0 }) });
    return (await response.json()) as { remaining: number; matched_policy_id: string };
  };

  it("offers every field of the RequestContext schema, each typed by it", async () => {
    const page = await openPage(browser.context);
    await page.goto(`${suite.server.url}/dashboard/#/try`);
    const form = page.getByTestId('try-form');
    await form.waitFor();
    const fields = await form.locator(':scope > [data-field]').evaluateAll((els) => els.map((el) => el.getAttribute('data-field')));
    expect(fields).to.deep.equal(Object.keys(RequestContextSchema.properties));
    expect(fields).to.include.members(['api_key', 'severity', 'job_type', 'topic', 'consumer_group', 'span_name', 'tags', 'quantity']);
    const signalOptions = await form.locator('select[name="signal_type"] option').evaluateAll((els) => els.map((el) => (el as HTMLOptionElement).value));
    expect(signalOptions).to.deep.equal(['', ...SIGNAL_TYPES]);
    expect(await form.locator('[data-field="quantity"]').getAttribute('type')).to.equal('number');
    expect(await form.locator('[data-field="org_id"]').evaluate((el) => el.tagName)).to.equal('INPUT');
    // Tags: key/value rows, one more on demand.
    expect(await form.locator('.map-row').count()).to.equal(1);
    await page.getByTestId('tags-add').click();
    expect(await form.locator('.map-row').count()).to.equal(2);
    await page.close();
  });

  it('decides on fields the old form lacked and shows the matched policy, the shadow verdict and the metadata', async () => {
    const page = await openPage(browser.context);
    await page.goto(`${suite.server.url}/dashboard/#/try`);
    await page.locator('input[name="api_key"]').fill('k-123');
    await page.locator('input[name="severity"]').fill('error');
    await page.locator('select[name="signal_type"]').selectOption('log');
    await page.locator('input[name="tags.key"]').fill('env');
    await page.locator('input[name="tags.value"]').fill('prod');
    expect(await page.getByTestId('try-submit').textContent()).to.equal('Peek (consumes nothing)');
    await page.getByTestId('try-submit').click();
    await page.getByTestId('try-policy').filter({ hasText: 'ingest-by-key' }).waitFor();
    expect(await page.getByTestId('try-reason').textContent()).to.equal('within_limit');
    expect(await page.getByTestId('try-shadow').textContent()).to.equal('ingest-shadow would have allowed');
    const metadata = await page.locator('[data-testid="try-metadata"] tr').evaluateAll((rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent)));
    expect(metadata).to.deep.include.members([
      ['shadow_action', 'allow'],
      ['shadow_policy_id', 'ingest-shadow'],
    ]);
    // Why it matched: each scope field, the tag on its own row, beside what the context had.
    expect(await page.getByTestId('try-result').textContent()).to.contain('tags.envprodprod');
    // The real rule, and the server's explain answer per layer.
    expect(await page.getByTestId('try-why-matched').textContent()).to.contain('the most specific scope first, then the highest priority (its own: 20), then the smallest policy_id');
    expect(await page.getByTestId('try-rule').textContent()).to.contain('most specific scope first').and.contain('every layer');
    expect(await page.locator('[data-testid="explain-layer-default"] [data-testid="explain-winner"]').textContent()).to.equal('ingest-by-key');
    const row = (id: string) => page.getByTestId(`explain-default-${id}`);
    expect(await row('ingest-by-key').getAttribute('data-wins')).to.equal('true');
    expect(await row('ingest-shadow').getAttribute('data-wins'), 'the shadow winner').to.equal('true');
    expect(await row('api-per-user').getAttribute('data-covers')).to.equal('false');
    expect(await row('api-per-user').textContent()).to.contain('scope: user_id does not match');
    expect((await peek({ api_key: 'k-123', severity: 'error', tags: { env: 'prod' } })).remaining, 'a peek consumed nothing').to.equal(100);

    // A quantity is counted: 3 units, more than the shadow policy's 2.
    await page.locator('input[name="quantity"]').fill('3');
    expect(await page.getByTestId('try-submit').textContent()).to.equal('Check (consumes 3)');
    await page.getByTestId('try-result').evaluate((el) => el.replaceChildren());
    await page.getByTestId('try-submit').click();
    await page.getByTestId('try-shadow').waitFor();
    expect(await page.getByTestId('try-shadow').textContent()).to.equal('ingest-shadow would have limited (deny)');
    expect(await page.locator('[data-testid="try-metadata"] tr[data-key="shadow_action"] td').last().textContent()).to.equal('deny');
    expect((await peek({ api_key: 'k-123', severity: 'error', tags: { env: 'prod' } })).remaining, 'the check counted 3').to.equal(97);
    await screenshot(page, '20-try-any-field');
    await page.close();
  });

  it('the policy list shows each policy\'s layer, scope and priority', async () => {
    const page = await openPage(browser.context);
    await page.goto(`${suite.server.url}/dashboard/#/policies`);
    await page.getByTestId('policy-row-ingest-by-key').waitFor();
    expect(await page.getByTestId('policy-layer-ingest-by-key').textContent()).to.equal('default');
    expect(await page.getByTestId('policy-priority-ingest-by-key').textContent()).to.equal('20');
    const chips = await page.locator('[data-testid="policy-scope-ingest-by-key"] [data-testid="scope-chip"]').allTextContents();
    expect(chips).to.deep.equal(['api_key = k-123', 'severity = error', 'tags.env = prod']);
    await page.close();
  });

  it('lists what each change changed as rl prints it, names the version a rollback restored, and shows the scope as chips', async () => {
    const page = await openPage(browser.context);
    await page.goto(`${suite.server.url}/dashboard/#/policies/api-per-user`);
    await page.getByTestId('versions').waitFor();
    const chips = await page.locator('[data-testid="policy-scope"] [data-testid="scope-chip"]').allTextContents();
    expect(chips).to.deep.equal(['org_id = acme', 'user_id = *']);

    await page.locator('[data-field="algorithm.limit"]').fill('7');
    await page.locator('[data-field="priority"]').fill('11');
    await page.getByTestId('save').click();
    await page.getByTestId('version-2').filter({ hasText: 'current' }).waitFor();
    await page.getByTestId('rollback-1').click();
    await page.getByTestId('version-3').filter({ hasText: 'current' }).waitFor();
    await page.locator('[data-testid="audit-entry"][data-action="rollback"]').waitFor();

    const entries = await page.getByTestId('audit-entry').evaluateAll((rows) =>
      rows.map((row) => ({
        action: row.getAttribute('data-action'),
        version: row.getAttribute('data-version'),
        what: row.querySelector('[data-testid="audit-what"]')!.textContent,
        changes: [...row.querySelectorAll('[data-testid="audit-changes"] li')].map((li) => li.textContent),
        cell: row.lastElementChild!.textContent,
      })),
    );
    // Newest first.
    expect(entries.map((e) => [e.action, e.version, e.what])).to.deep.equal([
      ['rollback', '3', 'rollback to v1'],
      ['patch', '2', 'patch'],
      ['create', '1', 'create'],
    ]);
    expect(entries[0].changes).to.deep.equal(['algorithm.limit: 7 -> 5', 'priority: 11 -> 10']);
    expect(entries[1].changes).to.deep.equal(['algorithm.limit: 5 -> 7', 'priority: 10 -> 11']);
    expect(entries[2].cell).to.equal('created');
    const audit = (await (await fetch(`${suite.server.url}/rl/v1/policies/api-per-user/audit`)).json()) as { action_type: string; restored_version?: number }[];
    expect(audit.map((e) => [e.action_type, e.restored_version])).to.deep.equal([['create', undefined], ['patch', undefined], ['rollback', 1]]);

    // The CLI prints the same changes for the same entries (one implementation: src/policy/policy-changes.ts).
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'policies', 'audit', 'api-per-user', '--url', suite.server.url], { cwd: REPO_ROOT });
    const cliChanges = stdout
      .trim()
      .split('\n')
      .slice(1)
      .map((line) => line.split(/ {2,}/).slice(4).join('  '));
    expect(cliChanges).to.deep.equal(['created', entries[1].changes.join(', '), entries[0].changes.join(', ')]);
    await screenshot(page, '21-audit-what-changed');
    await page.close();
  });
});
