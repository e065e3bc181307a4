import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { AdminApiError, createAdminClient, type Decision } from '@rl/client';
import { reportError } from '../../src/cli/report-error.js';
import { getSuiteRedis } from '../support/counter-stores.js';
import { randomPrefix } from '../support/redis.js';
import { REPO_ROOT, startServerProcess, type ServerProcessHandle } from '../support/server-process.js';
import { buildCli, cliServerSuite, policyDir, removeTempDirs, rl, rlJson, spawnRl } from './rl.js';

/**
 * Every other `rl` command against a real server process with API-key authentication on: connection
 * settings, the one-line messages for 401/403/404/409/422 and connection refused, exit statuses,
 * policies and their lifecycle, decisions, status and top.
 */

const ADMIN = 'cli-admin-key';
const READER = 'cli-reader-key';

const SEED = JSON.stringify({
  policies: [
    { policy_id: 'per-user', scope: { org_id: 'acme', user_id: '*' }, algorithm: { type: 'fixed_window', limit: 3, window: '1h' } },
    { policy_id: 'tagged', scope: { org_id: 'tagco', tags: { env: 'prod' } }, algorithm: { type: 'fixed_window', limit: 5, window: '1h' } },
    { policy_id: 'leases', scope: { resource: 'export' }, algorithm: { type: 'concurrency', max_concurrency: 1 } },
    { policy_id: 'topstat', scope: { org_id: 'topco' }, algorithm: { type: 'fixed_window', limit: 100, window: '1h' } },
    { policy_id: 'history', scope: { org_id: 'hist' }, algorithm: { type: 'fixed_window', limit: 10, window: '1m' } },
  ],
});

const PACKAGE_VERSION = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('rl commands (built binary, real server with API keys)', function () {
  this.timeout(240_000);
  const cli = cliServerSuite(SEED, { RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'apikey', RL_AUTH_API_KEYS: `${ADMIN},${READER}:read-only` });
  let admin: Record<string, string>;

  before(() => {
    admin = { RL_URL: cli.server.url, RL_API_KEY: ADMIN };
  });

  describe('connection and errors', () => {
    it('--version prints the package version', async () => {
      const result = await rl(['--version']);
      expect(result.code).to.equal(0);
      expect(result.stdout.trim()).to.equal(PACKAGE_VERSION);
    });

    it('connection refused: one line naming the URL, exit 1', async () => {
      const url = `http://127.0.0.1:${await closedPort()}`;
      const result = await rl(['policies', 'list'], { RL_URL: url, RL_API_KEY: ADMIN });
      expect(result.code).to.equal(1);
      expect(result.stderr.trim()).to.equal(`rl: cannot reach ${url}: connection refused (is the server running on that address?) (set RL_URL or --url)`);
      const json = await rl(['status', '--json'], { RL_URL: url });
      expect(json.code).to.equal(1);
      expect(JSON.parse(json.stderr)).to.deep.include({ reason: 'ECONNREFUSED', url });
    });

    it('no credential: 401 with what to set, exit 1', async () => {
      const result = await rl(['policies', 'list'], { RL_URL: cli.server.url });
      expect(result.code).to.equal(1);
      expect(result.stderr).to.match(/^rl: not authenticated \(401; set RL_API_KEY or RL_TOKEN, or pass --auth-key\/--token\): missing credentials/);
    });

    it('a read-only key reads but may not change: 403, exit 1', async () => {
      const list = await rlJson<{ policy_id: string }[]>(['policies', 'list'], { RL_URL: cli.server.url, RL_API_KEY: READER });
      expect(list.code).to.equal(0);
      expect(list.body.map((p) => p.policy_id)).to.deep.equal(['history', 'leases', 'per-user', 'tagged', 'topstat']);
      const result = await rl(['policies', 'delete', 'history'], { RL_URL: cli.server.url, RL_API_KEY: READER });
      expect(result.code).to.equal(1);
      expect(result.stderr).to.match(/^rl: permission denied \(403; this needs a credential with the admin role\)/);
    });

    it('flags win over the environment; RL_TOKEN is sent as a bearer token; two credentials are refused', async () => {
      const dead = `http://127.0.0.1:${await closedPort()}`;
      const byFlag = await rl(['policies', 'list', '--url', cli.server.url, '--auth-key', ADMIN], { RL_URL: dead, RL_API_KEY: 'wrong' });
      expect(byFlag.code, byFlag.stderr).to.equal(0);
      const byToken = await rl(['policies', 'get', 'history'], { RL_URL: cli.server.url, RL_TOKEN: ADMIN });
      expect(byToken.code, byToken.stderr).to.equal(0);
      // A credential flag replaces both variables.
      const tokenFlag = await rl(['policies', 'list', '--token', ADMIN], { RL_URL: cli.server.url, RL_API_KEY: 'wrong' });
      expect(tokenFlag.code, tokenFlag.stderr).to.equal(0);
      const both = await rl(['policies', 'list'], { RL_URL: cli.server.url, RL_API_KEY: ADMIN, RL_TOKEN: ADMIN });
      expect(both.code).to.equal(1);
      expect(both.stderr).to.contain('give one credential');
      const badUrl = await rl(['policies', 'list', '--url', 'ftp://example.com']);
      expect(badUrl.code).to.equal(1);
      expect(badUrl.stderr).to.contain('--url: must be an http:// or https:// URL');
    });

    it('unknown policy: 404, exit 1; with --json the error is JSON on stderr', async () => {
      const result = await rl(['policies', 'get', 'no-such-policy'], admin);
      expect(result.code).to.equal(1);
      expect(result.stderr.trim()).to.equal('rl: not found (404): policy "no-such-policy" not found');
      const json = await rl(['policies', 'get', 'no-such-policy', '--json'], admin);
      expect(json.code).to.equal(1);
      expect(json.stdout).to.equal('');
      expect(JSON.parse(json.stderr)).to.deep.equal({ error: 'policy "no-such-policy" not found', status: 404 });
    });

    it('a 422 lists each field error (the SDK admin client and the CLI report, against the server)', async () => {
      const api = createAdminClient({ url: cli.server.url, apiKey: ADMIN });
      const error: unknown = await api.createPolicy({ policy_id: 'bad', algorithm: { type: 'fixed_window', limit: -1, window: 'soon' } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).to.be.instanceOf(AdminApiError);
      expect((error as AdminApiError).status).to.equal(422);
      const report = reportError(error);
      expect(report.exitCode).to.equal(2);
      expect(report.headline).to.match(/^invalid policy \(422\): invalid policy: /);
      expect(report.details.map((d) => d.split(':')[0])).to.have.members(['algorithm.limit', 'algorithm.window']);
    });

    it('an unknown command is a usage error, exit 1', async () => {
      const result = await rl(['frobnicate'], admin);
      expect(result.code).to.equal(1);
      expect(result.stderr).to.contain("unknown command 'frobnicate'");
    });
  });

  describe('policies', () => {
    it('list: a table, or JSON', async () => {
      const result = await rl(['policies', 'list'], admin);
      expect(result.code).to.equal(0);
      const [header, ...rows] = result.stdout.trim().split('\n');
      expect(header).to.match(/^POLICY_ID\s+VERSION\s+ENABLED\s+MODE\s+ALGORITHM\s+LIMIT\s+WINDOW\s+ACTION\s+ROLLOUT\s+PRIORITY\s+LEASE\s+BUDGET$/);
      expect(rows.map((r) => r.split(/\s+/)[0])).to.deep.equal(['history', 'leases', 'per-user', 'tagged', 'topstat']);
      expect(rows[0]).to.match(/^history\s+1\s+true\s+enforce\s+fixed_window\s+10\s+1m\s+deny\s+100%\s+0\s+-\s+regional$/);
    });

    it('get: YAML (the same policy as --json)', async () => {
      const yaml = await rl(['policies', 'get', 'per-user'], admin);
      expect(yaml.code).to.equal(0);
      const json = await rlJson<Record<string, unknown>>(['policies', 'get', 'per-user'], admin);
      expect(parseYaml(yaml.stdout)).to.deep.equal(json.body);
      expect(json.body).to.deep.include({ policy_id: 'per-user', version: 1 });
    });

    it("lease and budget: list marks a leased policy's lease (defaults filled in), get says it above the YAML", async () => {
      const api = createAdminClient({ url: cli.server.url, apiKey: ADMIN });
      await api.createPolicy({ policy_id: 'leased', scope: { org_id: 'leaseco' }, algorithm: { type: 'fixed_window', limit: 500, window: '1h' }, lease: { max_units: 50, max_hold: '2s' } });
      await api.createPolicy({ policy_id: 'leased-defaults', scope: { org_id: 'leaseco2' }, algorithm: { type: 'quota', limit: 500, quota_period: '1d' }, lease: {} });
      try {
        const list = await rl(['policies', 'list'], admin);
        expect(list.code, list.stderr).to.equal(0);
        const row = (id: string) => list.stdout.split('\n').find((line) => line.startsWith(`${id} `));
        expect(row('leased')).to.match(/\s50\/2s\s+regional$/);
        expect(row('leased-defaults')).to.match(/\s100\/1s\s+regional$/);
        expect(row('per-user')).to.match(/\s-\s+regional$/);

        const yaml = await rl(['policies', 'get', 'leased'], admin);
        expect(yaml.code, yaml.stderr).to.equal(0);
        expect(yaml.stdout.split('\n')[0]).to.equal('# lease: max_units/max_hold 50/2s; budget: regional');
        // The comment leaves the YAML as it was: still the policy, ready for rl apply.
        const json = await rlJson<Record<string, unknown>>(['policies', 'get', 'leased'], admin);
        expect(parseYaml(yaml.stdout)).to.deep.equal(json.body);
        expect(json.body.lease).to.deep.equal({ max_units: 50, max_hold: '2s' });
        expect((await rl(['policies', 'get', 'per-user'], admin)).stdout.split('\n')[0]).to.equal('# lease: none; budget: regional');
      } finally {
        await api.deletePolicy('leased');
        await api.deletePolicy('leased-defaults');
      }
    });

    it('rollout, a stale --if-match (409, exit 2), versions, rollback, audit, delete', async () => {
      const rollout = await rl(['policies', 'rollout', 'history', '25'], admin);
      expect(rollout.code, rollout.stderr).to.equal(0);
      expect(rollout.stdout.trim()).to.equal('history: rollout 25% (version 2)');

      const stale = await rl(['policies', 'rollout', 'history', '50', '--if-match', '1'], admin);
      expect(stale.code).to.equal(2);
      expect(stale.stderr).to.match(/^rl: conflict \(409; read the current version and try again\): If-Match "1" does not match: the current version is 2/);
      const outOfRange = await rl(['policies', 'rollout', 'history', '101'], admin);
      expect(outOfRange.code).to.equal(2);
      expect(outOfRange.stderr).to.contain('percent: must be an integer from 0 to 100');

      const versions = await rlJson<{ version: number; snapshot: { rollout_percent: number } }[]>(['policies', 'versions', 'history'], admin);
      expect(versions.body.map((v) => [v.version, v.snapshot.rollout_percent])).to.deep.equal([[1, 100], [2, 25]]);
      const versionsTable = await rl(['policies', 'versions', 'history'], admin);
      expect(versionsTable.stdout.trim().split('\n')).to.have.length(3);

      const rollback = await rl(['policies', 'rollback', 'history', '1', '--if-match', '2'], admin);
      expect(rollback.code, rollback.stderr).to.equal(0);
      expect(rollback.stdout.trim()).to.equal('history: rolled back to the content of version 1, now version 3');

      const audit = await rl(['policies', 'audit', 'history'], admin);
      expect(audit.code).to.equal(0);
      const lines = audit.stdout.trim().split('\n');
      expect(lines[0]).to.match(/^VERSION\s+ACTION\s+CHANGED_BY\s+CHANGED_AT\s+CHANGES$/);
      expect(lines[1]).to.match(/^1\s+create\s+policy-file\s+\S+\s+created$/);
      expect(lines[2]).to.match(/^2\s+rollout\s+\S+\s+\S+\s+rollout_percent: 100 -> 25$/);
      // The version a rollback restored, as the dashboard's audit trail names it.
      expect(lines[3]).to.match(/^3\s+rollback to v1\s+\S+\s+\S+\s+rollout_percent: 25 -> 100$/);

      const missingVersion = await rl(['policies', 'rollback', 'history', '9'], admin);
      expect(missingVersion.code).to.equal(1);
      expect(missingVersion.stderr).to.contain('not found (404): version 9 of policy "history" not found');

      const deleted = await rl(['policies', 'delete', 'history', '--if-match', '3'], admin);
      expect(deleted.code, deleted.stderr).to.equal(0);
      expect(deleted.stdout.trim()).to.equal('deleted history');
      expect((await rl(['policies', 'get', 'history'], admin)).code).to.equal(1);
    });
  });

  describe('decisions', () => {
    it('check with --field value pairs counts until the limit; a refusal is an answer (exit 0)', async () => {
      const ctx = ['--org_id', 'acme', '--user_id', 'carol'];
      const remaining: number[] = [];
      for (let i = 0; i < 3; i++) {
        const d = await rlJson<Decision>(['check', ...ctx], admin);
        expect(d.code, d.stderr).to.equal(0);
        expect(d.body).to.deep.include({ allowed: true, matched_policy_id: 'per-user', limit: 3 });
        remaining.push(d.body.remaining);
      }
      expect(remaining).to.deep.equal([2, 1, 0]);
      const refused = await rl(['check', ...ctx], admin);
      expect(refused.code).to.equal(0);
      expect(refused.stdout).to.match(/^REFUSED {2}action=deny {2}reason=limit_exceeded\npolicy {7}per-user\nremaining {4}0 of 3 per 60m/);
      expect(refused.stdout).to.match(/retry_after {2}\S+/);
    });

    it('--quantity, --peek (consumes nothing), --data with flags on top', async () => {
      const two = await rlJson<Decision>(['check', '--org_id', 'acme', '--user_id', 'dave', '--quantity', '2'], admin);
      expect(two.body.remaining).to.equal(1);
      for (let i = 0; i < 2; i++) {
        const peek = await rlJson<Decision>(['check', '--peek', '--org_id', 'acme', '--user_id', 'dave'], admin);
        expect(peek.body).to.deep.include({ allowed: true, remaining: 1 });
        expect(peek.body.metadata).to.deep.include({ peek: 'true' });
      }
      const data = await rlJson<Decision>(['check', '-d', '{"org_id": "acme", "user_id": "erin"}', '--user_id', 'dave'], admin);
      expect(data.body).to.deep.include({ allowed: true, remaining: 0 });
    });

    it('--tag key=value is matched against a policy scope', async () => {
      const tagged = await rlJson<Decision>(['check', '--org_id', 'tagco', '--tag', 'env=prod', '--tag', 'team=a'], admin);
      expect(tagged.body).to.deep.include({ matched_policy_id: 'tagged', remaining: 4 });
      const untagged = await rlJson<Decision>(['check', '--org_id', 'tagco'], admin);
      expect(untagged.body).to.deep.include({ matched_policy_id: '', reason: 'no_matching_policy' });
      const bad = await rl(['check', '--tag', 'novalue'], admin);
      expect(bad.code).to.equal(2);
      expect(bad.stderr).to.contain('--tag: must be key=value');
    });

    it('acquire and release a concurrency lease', async () => {
      const first = await rlJson<Decision>(['acquire', '--resource', 'export', '--request_id', 'job-1'], admin);
      expect(first.body).to.deep.include({ allowed: true, reason: 'lease_acquired' });
      const second = await rlJson<Decision>(['acquire', '--resource', 'export', '--request_id', 'job-2'], admin);
      expect(second.body).to.deep.include({ allowed: false, reason: 'limit_exceeded' });
      const release = await rl(['release', '--resource', 'export', '--request_id', 'job-1'], admin);
      expect(release.code).to.equal(0);
      expect(release.stdout).to.match(/^ALLOWED {2}action=allow {2}reason=lease_released/);
      const again = await rlJson<Decision>(['acquire', '--resource', 'export', '--request_id', 'job-2'], admin);
      expect(again.body).to.deep.include({ allowed: true, reason: 'lease_acquired' });
    });

    it('refund gives units back; refund needs --quantity; the server\'s 400 names the field (exit 2)', async () => {
      await rl(['check', '--org_id', 'acme', '--user_id', 'frank', '--quantity', '3'], admin);
      const refund = await rlJson<Decision>(['refund', '--org_id', 'acme', '--user_id', 'frank', '--quantity', '2'], admin);
      expect(refund.body).to.deep.include({ allowed: true, reason: 'refunded', remaining: 2 });
      const noQuantity = await rl(['refund', '--org_id', 'acme'], admin);
      expect(noQuantity.code).to.equal(2);
      expect(noQuantity.stderr).to.contain('--quantity: required for refund');
      const badSignal = await rl(['check', '--signal_type', 'carrier-pigeon'], admin);
      expect(badSignal.code).to.equal(2);
      expect(badSignal.stderr).to.match(/^rl: bad request \(400\): signal_type: must be one of /);
      const unauthenticated = await rl(['check', '--org_id', 'acme'], { RL_URL: cli.server.url });
      expect(unauthenticated.code).to.equal(1);
      expect(unauthenticated.stderr).to.match(/^rl: not authenticated \(401/);
    });
  });

  describe('no flag means two things (request fields and the credential)', () => {
    before(async () => {
      const api = createAdminClient({ url: cli.server.url, apiKey: ADMIN });
      await api.createPolicy({ policy_id: 'per-api-key', scope: { endpoint: '/keyed', api_key: '*' }, algorithm: { type: 'fixed_window', limit: 10, window: '1h' } });
    });
    after(async () => {
      await createAdminClient({ url: cli.server.url, apiKey: ADMIN }).deletePolicy('per-api-key');
    });

    it('--api_key and --api-key are both the request field api_key (one counter); --auth-key / RL_API_KEY is the credential', async () => {
      const remaining: number[] = [];
      for (const args of [
        ['check', '--api-key', 'key-Z', '--endpoint', '/keyed'],
        ['check', '--api_key', 'key-Z', '--endpoint', '/keyed'],
        ['--auth-key', ADMIN, 'check', '--endpoint', '/keyed', '--api-key', 'key-Z'],
        ['check', '--endpoint', '/keyed', '--api_key', 'key-Z', '--auth-key', ADMIN],
      ]) {
        const d = await rlJson<Decision>(args, args.includes('--auth-key') ? { RL_URL: cli.server.url } : admin);
        expect(d.code, `${args.join(' ')}: ${d.stderr}`).to.equal(0);
        expect(d.body.matched_policy_id, args.join(' ')).to.equal('per-api-key');
        remaining.push(d.body.remaining);
      }
      expect(remaining).to.deep.equal([9, 8, 7, 6]);
      // Every field with an underscore takes both spellings.
      const dashed = await rlJson<Decision>(['check', '--org-id', 'acme', '--user-id', 'gina'], admin);
      expect(dashed.body).to.deep.include({ matched_policy_id: 'per-user', remaining: 2 });
    });

    it('the old credential spelling --api-key is a clear usage error outside the decision commands, not a silent reinterpretation', async () => {
      for (const args of [
        ['policies', 'list', '--api-key', ADMIN],
        ['--api-key', ADMIN, 'policies', 'list'],
        ['--api-key', ADMIN, 'check', '--endpoint', '/keyed'],
        ['status', `--api-key=${ADMIN}`],
      ]) {
        const result = await rl(args, { RL_URL: cli.server.url });
        expect(result.code, args.join(' ')).to.equal(1);
        expect(result.stdout, args.join(' ')).to.equal('');
        expect(result.stderr, args.join(' ')).to.contain("error: unknown option '--api-key");
        expect(result.stderr, args.join(' ')).to.contain('--api-key is no longer the credential: use --auth-key <key> (or RL_API_KEY)');
      }
    });

    it('rl check prints the fields the server ignored', async () => {
      const typo = await rl(['check', '-d', '{"api_kye": "key-Z", "endpoint": "/keyed", "usr_id": "x"}'], admin);
      expect(typo.code, typo.stderr).to.equal(0);
      expect(typo.stdout).to.match(/^ALLOWED {2}action=allow {2}reason=no_matching_policy\n/);
      expect(typo.stdout).to.contain('\nignored      api_kye, usr_id  (not request fields: the server ignored them; misspelt?)\n');
      // Said once, on stdout: not again by the SDK's warning on stderr (where --json puts only JSON errors).
      expect(typo.stderr).to.equal('');
      const json = await rlJson<Decision>(['check', '-d', '{"api_kye": "key-Z"}'], admin);
      expect(json.body.metadata).to.deep.equal({ ignored_fields: 'api_kye' });
      expect(json.stderr).to.equal('');
      const clean = await rl(['check', '--api_key', 'key-Z', '--endpoint', '/keyed'], admin);
      expect(clean.stdout).to.not.contain('ignored');
    });
  });

  describe('status and top', () => {
    it('status: health, readiness, version, counters mode', async () => {
      const json = await rlJson<{ ok: boolean; health: { ok: boolean }; readiness: { ok: boolean }; info: Record<string, unknown> }>(['status'], admin);
      expect(json.code).to.equal(0);
      expect(json.body.ok).to.equal(true);
      expect(json.body.info).to.deep.include({ version: PACKAGE_VERSION, counters: 'memory', policy_store: 'file', auth: 'apikey', tls: false });
      const human = await rl(['status'], admin);
      expect(human.stdout).to.match(/health\s+ok \(200\)\nreadiness\s+ok \(200\)\nversion\s+\S+ \(node v\d+/);
      expect(human.stdout).to.match(/counters\s+memory/);
    });

    it('status without a credential: the probes answer, info says why it is missing (exit 0)', async () => {
      const result = await rl(['status'], { RL_URL: cli.server.url });
      expect(result.code).to.equal(0);
      expect(result.stdout).to.match(/readiness\s+ok \(200\)/);
      expect(result.stdout).to.match(/info\s+unavailable \(401 missing credentials/);
    });

    it('top --once and --iterations: counts per policy, rates from the second frame on', async () => {
      for (let i = 0; i < 4; i++) expect((await rl(['check', '--org_id', 'topco'], admin)).code).to.equal(0);
      const once = await rl(['top', '--once', '--json'], admin);
      expect(once.code, once.stderr).to.equal(0);
      const frames = once.stdout.trim().split('\n').map((l) => JSON.parse(l) as { summary: { by_policy: { policy_id: string; total: number; allowed: number }[] }; rate?: unknown });
      expect(frames).to.have.length(1);
      expect(frames[0].summary.by_policy.find((p) => p.policy_id === 'topstat')).to.deep.include({ total: 4, allowed: 4 });
      expect(frames[0].rate).to.equal(undefined);

      const two = await rl(['top', '--iterations', '2', '--interval', '1', '--json'], admin);
      const lines = two.stdout.trim().split('\n').map((l) => JSON.parse(l) as { rate?: { by_policy: Record<string, number> } });
      expect(lines).to.have.length(2);
      expect(lines[1].rate?.by_policy).to.have.property('topstat');

      const human = await rl(['top', '--once'], admin);
      expect(human.code).to.equal(0);
      expect(human.stdout).to.match(/^rl top {2}http:\/\/127\.0\.0\.1:\d+/);
      expect(human.stdout).to.match(/\ntopstat\s+4\s+-\s+4\s+0\s+0\s+0\.0%/);
      expect(human.stdout).to.not.contain('\x1b[2J');
    });

    it('top without a bound runs until Ctrl-C (SIGINT), then exits 0', async () => {
      const top = spawnRl(['top', '--interval', '1', '--json'], admin);
      // Two frames seen: it is refreshing, not done after one.
      await top.waitForStdout((out) => out.split('\n').filter((l) => l.startsWith('{')).length >= 2);
      top.child.kill('SIGINT');
      const { code } = await top.closed;
      expect(code).to.equal(0);
    });
  });
});

describe('rl status against a server with Redis counters (built binary, real Redis)', function () {
  this.timeout(240_000);
  let server: ServerProcessHandle;

  before(async () => {
    await buildCli();
    const redis = await getSuiteRedis();
    const seedFile = join(policyDir({ 'seed.json': SEED }), 'seed.json');
    server = await startServerProcess({ RL_COUNTERSTORE_ADDR: redis.url, RL_KEY_PREFIX: randomPrefix(), RL_POLICY_FILE: seedFile });
  });
  after(async () => {
    await server?.stop();
    removeTempDirs();
  });

  it('reports counters redis and policy store redis; decisions count in Redis', async () => {
    const status = await rlJson<{ ok: boolean; info: Record<string, unknown> }>(['status'], { RL_URL: server.url });
    expect(status.code).to.equal(0);
    expect(status.body.info).to.deep.include({ counters: 'redis', policy_store: 'redis', auth: 'off' });
    const human = await rl(['status'], { RL_URL: server.url });
    // One Redis: one master, healthy, by the name /rl/v1/info gives it.
    expect(human.stdout).to.match(/\nmaster\s+master breaker closed, 0 failures in a row, \d+ calls pending\n/);
    const first = await rlJson<Decision>(['check', '--org_id', 'acme', '--user_id', 'redis-user'], { RL_URL: server.url });
    const second = await rlJson<Decision>(['check', '--org_id', 'acme', '--user_id', 'redis-user'], { RL_URL: server.url });
    expect([first.body.remaining, second.body.remaining]).to.deep.equal([2, 1]);
  });
});
