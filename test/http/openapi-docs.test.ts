import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { SECURITY_HEADERS } from '../../src/http/headers.js';
import { DOCS_CSP } from '../../src/http/routes/openapi.js';
import { OPERATIONS } from '../../src/schema/openapi.js';
import { launchBrowser } from '../support/browser.js';
import { serverProcessSuite } from '../support/server-suite.js';

/**
 * GET /rl/v1/docs on the real server (a child process with authentication on): the page and its
 * assets are served without credentials from this server (swagger-ui-dist in node_modules, no CDN)
 * under the docs page's own CSP, and every other answer keeps the strict one. Then headless Chromium
 * (Debian's /usr/bin/chromium) renders the page: every documented operation shows, and the CSP
 * blocks nothing the page needs.
 */

const STRICT_CSP = SECURITY_HEADERS.find(([name]) => name === 'Content-Security-Policy')![1];
const SWAGGER_DIR = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

describe('API reference page (GET /rl/v1/docs)', function () {
  this.timeout(60_000);
  const suite = serverProcessSuite('rl-docs-', {
    env: () => ({ RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'apikey', RL_AUTH_API_KEYS: 'docs-test-admin-key', RL_LOG_LEVEL: 'error' }),
  });

  it('serves the page, its script and Swagger UI from this server without credentials, under the relaxed CSP', async () => {
    const page = await fetch(`${suite.server.url}/rl/v1/docs`);
    expect(page.status).to.equal(200);
    expect(page.headers.get('content-type')).to.equal('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).to.equal(DOCS_CSP);
    const html = await page.text();
    // Every script and stylesheet the page loads is a path on this server.
    const sources = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(sources).to.deep.equal(['/rl/v1/docs/swagger-ui.css', '/rl/v1/docs/swagger-ui-bundle.js', '/rl/v1/docs/docs-init.js']);
    expect(html).to.not.match(/<script>[^<]/); // no inline script: the CSP forbids it

    for (const [path, type, file] of [
      ['/rl/v1/docs/swagger-ui.css', 'text/css; charset=utf-8', 'swagger-ui.css'],
      ['/rl/v1/docs/swagger-ui-bundle.js', 'text/javascript; charset=utf-8', 'swagger-ui-bundle.js'],
    ]) {
      const asset = await fetch(`${suite.server.url}${path}`);
      expect(asset.status, path).to.equal(200);
      expect(asset.headers.get('content-type'), path).to.equal(type);
      expect(asset.headers.get('content-security-policy'), path).to.equal(DOCS_CSP);
      expect(Buffer.from(await asset.arrayBuffer()).equals(readFileSync(join(SWAGGER_DIR, file))), path).to.equal(true);
    }
    const init = await fetch(`${suite.server.url}/rl/v1/docs/docs-init.js`);
    expect(init.status).to.equal(200);
    expect(init.headers.get('content-security-policy')).to.equal(DOCS_CSP);
    expect(await init.text()).to.contain('"/rl/v1/openapi.json"');
  });

  it('keeps the strict CSP everywhere else, the document included; other files and the API still need credentials', async () => {
    const document = await fetch(`${suite.server.url}/rl/v1/openapi.json`);
    expect(document.status).to.equal(200);
    expect(document.headers.get('content-security-policy')).to.equal(STRICT_CSP);
    for (const path of ['/healthz', '/rl/v1/policies', '/rl/v1/docs/index.html', '/rl/v1/docs/../../../package.json', '/rl/v1/docs/swagger-ui.js']) {
      const response = await fetch(`${suite.server.url}${path}`);
      expect(response.headers.get('content-security-policy'), path).to.equal(STRICT_CSP);
      if (path !== '/healthz') expect(response.status, path).to.equal(401);
    }
  });

  it('renders every documented operation in a browser, with nothing blocked by the CSP', async () => {
    const browser = await launchBrowser();
    try {
      const page = await browser.context.newPage();
      const problems: string[] = [];
      const failed: string[] = [];
      // The browser's own /favicon.ico request is an API path like any other (401 without a key).
      page.on('response', (response) => {
        if (response.status() >= 400 && !response.url().endsWith('/favicon.ico')) failed.push(`${response.status()} ${response.url()}`);
      });
      page.on('console', (message) => {
        if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) problems.push(message.text());
      });
      page.on('pageerror', (error) => problems.push(String(error)));
      await page.goto(`${suite.server.url}/rl/v1/docs`);
      await page.locator('.opblock').first().waitFor();
      expect(await page.locator('.opblock').count()).to.equal(OPERATIONS.length);
      expect(await page.locator('.info .title').innerText()).to.contain('Rate-limit decision service');
      // Opening an operation renders its parameters, body schema and responses (more styles and icons).
      await page.locator('#operations-policies-createPolicy .opblock-summary-control').click();
      await page.locator('#operations-policies-createPolicy .responses-table').waitFor();
      expect(await page.locator('#operations-policies-createPolicy .response').count()).to.be.greaterThan(5);
      expect(failed).to.deep.equal([]);
      // CSP violations are reported as console errors ("Refused to load / apply / execute ...").
      expect(problems).to.deep.equal([]);
    } finally {
      await browser.close();
    }
  });
});
