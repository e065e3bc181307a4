import { expect } from 'chai';
import { makePolicy } from '../support/policies.js';
import { postJson, type TestServer } from '../support/http.js';
import { HTTP_PATHS, serveDecisions } from '../support/http-listeners.js';

const policies = [
  makePolicy({ policy_id: 'deny', scope: { service: 'deny' }, algorithm: { type: 'fixed_window', limit: 1, window: '1m' } }),
  makePolicy({ policy_id: 'delay', scope: { service: 'delay' }, action: 'delay', algorithm: { type: 'leaky_bucket', limit: 1, window: '10s' } }),
  makePolicy({ policy_id: 'drop', scope: { service: 'drop' }, action: 'drop', algorithm: { type: 'token_bucket', limit: 1, window: '1m' } }),
  makePolicy({ policy_id: 'sample', scope: { service: 'sample' }, action: 'sample', algorithm: { type: 'sliding_window_log', limit: 1, window: '1m', sample_rate: 1 } }),
  makePolicy({ policy_id: 'downgrade', scope: { service: 'downgrade' }, action: 'downgrade', algorithm: { type: 'sliding_window_counter', limit: 1, window: '1m' } }),
  makePolicy({ policy_id: 'dlp', scope: { service: 'dlp' }, action: 'drop_low_priority', algorithm: { type: 'quota', limit: 1, quota_period: '1h' } }),
  makePolicy({ policy_id: 'shadow', scope: { service: 'deny' }, enforcement_mode: 'shadow', algorithm: { type: 'fixed_window', limit: 1, window: '1m' } }),
  makePolicy({ policy_id: 'leases', scope: { job_type: 'export' }, algorithm: { type: 'concurrency', max_concurrency: 1 } }),
];

for (const [path, build] of HTTP_PATHS) {
  describe(`HTTP decision endpoints (${path})`, () => {
    let server: TestServer;

    beforeEach(async () => {
      server = await serveDecisions(build, policies, 4096);
    });
    afterEach(() => server.close());

    const check = (body: unknown) => postJson(`${server.url}/rl/v1/check`, body);

    it('POST /rl/v1/check answers a full Decision', async () => {
      const { status, body, headers } = await check({ service: 'deny', tenant_id: 't' });
      expect(status).to.equal(200);
      expect(headers.get('content-type')).to.match(/application\/json/);
      expect(body).to.deep.equal({
        allowed: true, action: 'allow', reason: 'within_limit', matched_policy_id: 'deny', remaining: 0,
        retry_after: 0, reset_after: body.reset_after, limit: 1, window: 60_000, shadow_mode: false,
        metadata: { shadow_policy_id: 'shadow', shadow_action: 'allow' },
      });
      expect(body.reset_after).to.be.within(1, 60_000);
    });

    for (const [service, expected] of [
      ['deny', { allowed: false, action: 'deny' }],
      ['delay', { allowed: false, action: 'delay' }],
      ['drop', { allowed: false, action: 'drop', retry_after: 0 }],
      ['sample', { allowed: true, action: 'sample' }],
      ['downgrade', { allowed: true, action: 'downgrade' }],
      ['dlp', { allowed: false, action: 'drop_low_priority' }],
    ] as const) {
      it(`applies action ${expected.action} over the limit`, async () => {
        await check({ service, request_id: 'r' });
        const { status, body } = await check({ service, request_id: 'r' });
        expect(status).to.equal(200);
        expect(body).to.deep.include({ ...expected, reason: 'limit_exceeded', matched_policy_id: service });
        if (expected.action === 'deny' || expected.action === 'delay') expect(body.retry_after).to.be.greaterThan(0);
      });
    }

    it('reports the shadow policy beside the enforcing one', async () => {
      await check({ service: 'deny' });
      const { body } = await check({ service: 'deny' });
      expect(body).to.deep.include({ allowed: false, matched_policy_id: 'deny', shadow_mode: false });
      expect(body.metadata).to.deep.equal({ shadow_policy_id: 'shadow', shadow_action: 'deny' });
    });

    it('answers no_matching_policy, also for an empty context (an empty body is a 400: decision-leniency.test.ts)', async () => {
      expect((await check({ service: 'none' })).body).to.deep.include({ allowed: true, reason: 'no_matching_policy', matched_policy_id: '' });
      expect((await check({})).body).to.deep.include({ allowed: true, reason: 'no_matching_policy', matched_policy_id: '' });
    });

    it('POST /rl/v1/acquire and /rl/v1/release manage a lease', async () => {
      const acquired = await postJson(`${server.url}/rl/v1/acquire`, { job_type: 'export', request_id: 'job-1' });
      expect(acquired.body).to.deep.include({ allowed: true, action: 'allow', reason: 'lease_acquired', remaining: 0 });
      expect(acquired.body.metadata.lease_id).to.equal('job-1');
      const full = await postJson(`${server.url}/rl/v1/acquire`, { job_type: 'export', request_id: 'job-2' });
      expect(full.body).to.deep.include({ allowed: false, reason: 'limit_exceeded' });
      const released = await postJson(`${server.url}/rl/v1/release`, { job_type: 'export', request_id: 'job-1' });
      expect(released.body).to.deep.include({ allowed: true, reason: 'lease_released', remaining: 1 });
      const unknown = await postJson(`${server.url}/rl/v1/release`, { job_type: 'export', request_id: 'nope' });
      expect(unknown.body).to.deep.include({ allowed: true, reason: 'lease_not_found' });
    });

    describe('malformed input: 400 naming the field', () => {
      const cases: [string, unknown, string][] = [
        ['signal_type', { signal_type: 'smoke' }, 'signal_type'],
        ['quantity negative', { quantity: -1 }, 'quantity'],
        ['quantity fractional', { quantity: 1.5 }, 'quantity'],
        ['quantity too large', { quantity: 2 ** 53 }, 'quantity'],
        ['quantity string', { quantity: 'lots' }, 'quantity'],
        ['a string field as number', { user_id: 42 }, 'user_id'],
        ['tags as array', { tags: ['a'] }, 'tags'],
        ['a tag value as number', { tags: { env: 1 } }, 'tags.env'],
        ['an array body', [1, 2], 'body'],
        ['broken JSON', '{"user_id": ', 'body'],
      ];
      for (const [name, body, field] of cases) {
        it(name, async () => {
          for (const path of ['check', 'acquire', 'release', 'refund']) {
            const res = await postJson(`${server.url}/rl/v1/${path}`, body);
            expect(res.status, path).to.equal(400);
            expect(res.body.status).to.equal(400);
            expect(res.body.error).to.contain(field);
          }
        });
      }
    });

    it('ignores unknown fields, naming them in metadata.ignored_fields', async () => {
      const { status, body } = await check({ service: 'none', favourite_colour: 'blue' });
      expect(status).to.equal(200);
      expect(body.reason).to.equal('no_matching_policy');
      expect(body.metadata).to.deep.equal({ ignored_fields: 'favourite_colour' });
    });
  });
}
