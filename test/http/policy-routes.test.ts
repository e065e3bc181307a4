import { expect } from 'chai';
import fc from 'fast-check';
import type Koa from 'koa';
import type { FilePolicyStore } from '../../src/policy-store/file-policy-store.js';
import type { PolicyService } from '../../src/policy-service/policy-service.js';
import { ALGORITHM_TYPES } from '../../src/policy/types.js';
import { setLogLevel } from '../../src/util/log.js';
import { parseBody, type TestServer } from '../support/http.js';
import { servePolicyApi, type PolicyApi } from '../support/policy-api.js';

const POLICY = {
  policy_id: 'p1',
  scope: { org_id: 'acme', user_id: '*' },
  algorithm: { type: 'fixed_window', limit: 2, window: '1m' },
};
const SECURITY_HEADERS = ['strict-transport-security', 'x-content-type-options', 'x-frame-options', 'content-security-policy'];

describe('HTTP policy routes', function () {
  this.timeout(30_000);
  let api: PolicyApi;
  let store: FilePolicyStore;
  let service: PolicyService;
  let server: TestServer;
  let principal: { subject: string } | undefined;

  beforeEach(async () => {
    principal = undefined;
    const guard: Koa.Middleware = async (ctx, next) => {
      if (principal) ctx.state.principal = principal;
      await next();
    };
    api = await servePolicyApi({ maxBodyBytes: 64 * 1024, guards: [guard] });
    ({ store, service, server } = api);
  });
  afterEach(() => api.close());

  async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    const init: RequestInit = { method, headers: { ...headers } };
    if (body !== undefined) {
      init.body = typeof body === 'string' ? body : JSON.stringify(body);
      (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
    }
    const response = await fetch(`${server.url}/rl/v1${path}`, init);
    return { status: response.status, headers: response.headers, body: await parseBody(response) };
  }

  function expectError(r: { status: number; headers: Headers; body: any }, status: number, mentions?: string) {
    expect(r.status, JSON.stringify(r.body)).to.equal(status);
    expect(r.headers.get('content-type')).to.match(/^application\/json/);
    expect(r.body).to.include({ status });
    expect(r.body.error).to.be.a('string');
    if (mentions) expect(r.body.error).to.include(mentions);
    for (const h of SECURITY_HEADERS) expect(r.headers.get(h), h).to.be.a('string');
    expect(r.headers.get('x-request-id')).to.be.a('string');
  }

  it('POST /policies: 201 with the stored policy, Location and ETag; 409 duplicate; 422 invalid; 400/415/413', async () => {
    const created = await call('POST', '/policies', POLICY);
    expect(created.status).to.equal(201);
    expect(created.body).to.deep.include({ policy_id: 'p1', version: 1, rollout_percent: 100, enabled: true });
    expect(created.headers.get('location')).to.equal('/rl/v1/policies/p1');
    expect(created.headers.get('etag')).to.equal('"1"');
    expectError(await call('POST', '/policies', POLICY), 409, 'p1');
    const invalid = await call('POST', '/policies', { ...POLICY, policy_id: 'p2', algorithm: { type: 'fixed_window', limit: 2, window: 60 } });
    expectError(invalid, 422, 'algorithm.window');
    expect(invalid.body.errors[0].field).to.equal('algorithm.window');
    expectError(await call('POST', '/policies', { algorithm: POLICY.algorithm }), 422, 'policy_id');
    expectError(await call('POST', '/policies', { ...POLICY, policy_id: 'p3', source_ip_prefix: { v4: 24, v6: 200 } }), 422, 'source_ip_prefix.v6');
    const networks = await call('POST', '/policies', { ...POLICY, policy_id: 'p4', source_ip_prefix: { v4: 24 } });
    expect(networks.body.source_ip_prefix).to.deep.equal({ v4: 24, v6: 56 });
    expectError(await call('POST', '/policies', '{"policy_id":'), 400);
    expectError(await call('POST', '/policies', [POLICY]), 400, 'body');
    expectError(await call('POST', '/policies'), 400, 'body');
    expectError(await call('POST', '/policies', 'policy_id=p1', { 'content-type': 'text/plain' }), 415);
    expectError(await call('POST', '/policies', { ...POLICY, policy_id: 'big', description: 'x'.repeat(70_000) }), 413);
  });

  it('GET /policies: 200 sorted by policy_id; GET /policies/{id}: 200 or 404', async () => {
    for (const id of ['b', 'c', 'a']) expect((await call('POST', '/policies', { ...POLICY, policy_id: id })).status).to.equal(201);
    const list = await call('GET', '/policies');
    expect(list.status).to.equal(200);
    expect(list.body.map((p: { policy_id: string }) => p.policy_id)).to.deep.equal(['a', 'b', 'c']);
    const one = await call('GET', '/policies/b');
    expect(one.status).to.equal(200);
    expect(one.body).to.deep.include({ policy_id: 'b', version: 1 });
    expect(one.headers.get('etag')).to.equal('"1"');
    expectError(await call('GET', '/policies/nope'), 404, 'nope');
  });

  it('PUT /policies/{id}: 200; 404 unknown; 409 stale version or If-Match; 422 id mismatch; 400 bad version', async () => {
    await call('POST', '/policies', POLICY);
    const updated = await call('PUT', '/policies/p1', { ...POLICY, priority: 3, version: 1 });
    expect(updated.status).to.equal(200);
    expect(updated.body).to.deep.include({ priority: 3, version: 2 });
    expectError(await call('PUT', '/policies/p1', { ...POLICY, version: 1 }), 409, 'version');
    expectError(await call('PUT', '/policies/p1', POLICY, { 'If-Match': '"1"' }), 409, 'If-Match');
    expect((await call('PUT', '/policies/p1', POLICY, { 'If-Match': '"2"' })).status).to.equal(200);
    expectError(await call('PUT', '/policies/p1', { ...POLICY, policy_id: 'p2' }), 422, 'policy_id');
    expectError(await call('PUT', '/policies/p1', { ...POLICY, version: 'x' }), 400, 'version');
    expectError(await call('PUT', '/policies/p1', { ...POLICY, priority: 'high' }), 422, 'priority');
    expectError(await call('PUT', '/policies/zz', { ...POLICY, policy_id: 'zz' }), 404);
    expectError(await call('PUT', '/policies/p1', 'null'), 400);
  });

  it('PATCH /policies/{id}: 200 with application/merge-patch+json; 404; 409; 422', async () => {
    await call('POST', '/policies', POLICY);
    const mergeJson = { 'content-type': 'application/merge-patch+json' };
    const patched = await call('PATCH', '/policies/p1', { algorithm: { limit: 9 }, scope: { user_id: null } }, mergeJson);
    expect(patched.status).to.equal(200);
    expect(patched.body.algorithm.limit).to.equal(9);
    expect(patched.body.scope).to.deep.equal({ org_id: 'acme' });
    expect(patched.headers.get('etag')).to.equal('"2"');
    expectError(await call('PATCH', '/policies/p1', { version: 1, priority: 1 }, mergeJson), 409);
    expectError(await call('PATCH', '/policies/p1', { priority: 1 }, { ...mergeJson, 'If-Match': '"7"' }), 409);
    expectError(await call('PATCH', '/policies/p1', { algorithm: { type: 'nope' } }), 422, 'algorithm.type');
    expectError(await call('PATCH', '/policies/nope', { priority: 1 }), 404);
  });

  it('DELETE /policies/{id}: 200 {deleted, policy_id}; then 404, with audit and versions still readable', async () => {
    await call('POST', '/policies', POLICY);
    expectError(await call('DELETE', '/policies/p1', undefined, { 'If-Match': '"5"' }), 409);
    const deleted = await call('DELETE', '/policies/p1');
    expect(deleted.status).to.equal(200);
    expect(deleted.body).to.deep.equal({ deleted: true, policy_id: 'p1' });
    expectError(await call('GET', '/policies/p1'), 404);
    expectError(await call('DELETE', '/policies/p1'), 404);
    expect((await call('GET', '/policies/p1/versions')).status).to.equal(200);
    const audit = await call('GET', '/policies/p1/audit');
    expect(audit.status).to.equal(200);
    expect(audit.body.map((e: { action_type: string }) => e.action_type)).to.deep.equal(['create', 'delete']);
  });

  it('POST /policies/validate: 200 {valid, errors} for any JSON; 400 only for malformed JSON', async () => {
    const ok = await call('POST', '/policies/validate', { algorithm: POLICY.algorithm });
    expect(ok.status).to.equal(200);
    expect(ok.body).to.deep.equal({ valid: true, errors: [] });
    const bad = await call('POST', '/policies/validate', { ...POLICY, rollout_percent: 101 });
    expect(bad.status).to.equal(200);
    expect(bad.body.valid).to.equal(false);
    expect(bad.body.errors).to.deep.equal([{ field: 'rollout_percent', message: bad.body.errors[0].message }]);
    expect((await call('POST', '/policies/validate', [1])).body.valid).to.equal(false);
    expect((await call('POST', '/policies/validate')).body.valid).to.equal(false);
    expectError(await call('POST', '/policies/validate', '{'), 400);
  });

  it('POST /policies/{id}/rollout and /rollback: 200 with the stored policy; 400; 404', async () => {
    await call('POST', '/policies', POLICY);
    const rolled = await call('POST', '/policies/p1/rollout', { rollout_percent: 10 });
    expect(rolled.status).to.equal(200);
    expect(rolled.body).to.deep.include({ rollout_percent: 10, version: 2 });
    expectError(await call('POST', '/policies/p1/rollout', { rollout_percent: 200 }), 400, 'rollout_percent');
    expectError(await call('POST', '/policies/p1/rollout', {}), 400, 'rollout_percent');
    expectError(await call('POST', '/policies/nope/rollout', { rollout_percent: 5 }), 404);
    const back = await call('POST', '/policies/p1/rollback', { version: 1 });
    expect(back.status).to.equal(200);
    expect(back.body).to.deep.include({ rollout_percent: 100, version: 3 });
    expectError(await call('POST', '/policies/p1/rollback', { version: 42 }), 404, 'version 42');
    expectError(await call('POST', '/policies/p1/rollback', { version: 'one' }), 400, 'version');
    expectError(await call('POST', '/policies/nope/rollback', { version: 1 }), 404);
  });

  it('GET versions and audit: ascending / oldest first, with the caller as changed_by; 404 for unknown ids', async () => {
    await call('POST', '/policies', POLICY);
    principal = { subject: 'alice@example.com' };
    await call('PATCH', '/policies/p1', { priority: 2 });
    const versions = await call('GET', '/policies/p1/versions');
    expect(versions.status).to.equal(200);
    expect(versions.body.map((v: { version: number }) => v.version)).to.deep.equal([1, 2]);
    expect(Object.keys(versions.body[0]).sort()).to.deep.equal(['created_at', 'created_at_unix', 'policy_id', 'snapshot', 'version']);
    const audit = await call('GET', '/policies/p1/audit');
    expect(audit.body.map((e: { changed_by: string }) => e.changed_by)).to.deep.equal(['anonymous', 'alice@example.com']);
    expect(audit.body[1].old_value.priority).to.equal(0);
    expect(audit.body[1].new_value.priority).to.equal(2);
    expectError(await call('GET', '/policies/nope/versions'), 404);
    expectError(await call('GET', '/policies/nope/audit'), 404);
  });

  it('405 with Allow for a wrong method on a policy route', async () => {
    const r = await call('POST', '/policies/p1');
    expectError(r, 405);
    expect(r.headers.get('allow')).to.include('PUT');
    expectError(await call('DELETE', '/policies'), 405);
    expectError(await call('GET', '/policies/p1/rollback'), 405);
  });

  it('changes are live for decisions at once', async () => {
    const check = () => call('POST', '/check', { org_id: 'acme', user_id: 'u1' });
    expect((await check()).body.matched_policy_id).to.equal('');
    await call('POST', '/policies', POLICY);
    expect((await check()).body).to.include({ matched_policy_id: 'p1', allowed: true });
    await call('PATCH', '/policies/p1', { enabled: false });
    expect((await check()).body.matched_policy_id).to.equal('');
  });

  it('of concurrent PUTs with the same version exactly one gets 200, the rest 409', async () => {
    await call('POST', '/policies', POLICY);
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => call('PUT', '/policies/p1', { ...POLICY, priority: i, version: 1 })),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).to.deep.equal([200, 409, 409, 409, 409, 409, 409, 409]);
    expect((await call('GET', '/policies/p1')).body.version).to.equal(2);
  });

  it('fuzz: random JSON bodies against every policy route never yield a 5xx', async function () {
    this.timeout(60_000);
    const ids = ['p1', 'p2', 'validate', 'a.b:c-d_e', 'nope'];
    const routes: [string, (id: string) => string][] = [
      ['POST', () => '/policies'],
      ['POST', () => '/policies/validate'],
      ['PUT', (id) => `/policies/${encodeURIComponent(id)}`],
      ['PATCH', (id) => `/policies/${encodeURIComponent(id)}`],
      ['DELETE', (id) => `/policies/${encodeURIComponent(id)}`],
      ['POST', (id) => `/policies/${encodeURIComponent(id)}/rollout`],
      ['POST', (id) => `/policies/${encodeURIComponent(id)}/rollback`],
      ['GET', (id) => `/policies/${encodeURIComponent(id)}`],
      ['GET', (id) => `/policies/${encodeURIComponent(id)}/versions`],
      ['GET', (id) => `/policies/${encodeURIComponent(id)}/audit`],
    ];
    const anyValue = fc.jsonValue({ maxDepth: 4 });
    const duration = fc.oneof(fc.constantFrom('1s', '1m', '500ms', '1h30m', '0s', '10', '', '1d', '-1m'), fc.string(), fc.integer());
    const number = fc.oneof(fc.integer(), fc.double(), fc.constantFrom(0, -1, 1, 100, 101, 2 ** 53, Number.MAX_SAFE_INTEGER), fc.string(), fc.constant(null));
    const policyLike = fc.record(
      {
        policy_id: fc.oneof(fc.constantFrom(...ids), fc.string(), anyValue),
        id: fc.oneof(fc.constantFrom(...ids), anyValue),
        name: fc.oneof(fc.string(), anyValue),
        enabled: fc.oneof(fc.boolean(), anyValue),
        priority: number,
        version: number,
        rollout_percent: number,
        action: fc.oneof(fc.constantFrom('deny', 'delay', 'drop', 'sample', 'downgrade', 'drop_low_priority', 'allow'), anyValue),
        enforcement_mode: fc.oneof(fc.constantFrom('enforce', 'shadow'), anyValue),
        failure_mode: fc.oneof(fc.constantFrom('fail_open', 'fail_closed'), anyValue),
        scope: fc.oneof(fc.dictionary(fc.constantFrom('org_id', 'user_id', 'tags', 'signal_type', 'nope', '__proto__'), fc.oneof(fc.constantFrom('*', 'x', 'http', ''), anyValue)), anyValue),
        algorithm: fc.oneof(
          fc.record(
            {
              type: fc.oneof(fc.constantFrom(...ALGORITHM_TYPES), anyValue),
              limit: number,
              window: duration,
              burst: number,
              refill_rate: number,
              leak_rate: number,
              sub_window_count: number,
              max_concurrency: number,
              lease_ttl: fc.oneof(duration, number),
              quota_period: duration,
              cost_per_request: number,
              sample_rate: number,
            },
            { requiredKeys: [] },
          ),
          fc.constantFrom('quota', 'fixed_window'),
          anyValue,
        ),
        config: fc.oneof(fc.record({ quota: number, window_seconds: number }, { requiredKeys: [] }), anyValue),
        action_deny: fc.oneof(fc.boolean(), anyValue),
        resource: fc.oneof(fc.string(), anyValue),
        metadata: fc.oneof(
          fc.dictionary(fc.constantFrom('match_expr', 'min_severity', 'x', '__proto__'), fc.oneof(fc.string(), fc.constantFrom('severity == "info"', 'tags["a"] ==', 'warn'), anyValue)),
          anyValue,
        ),
        valid_from_unix: number,
        valid_to_unix: number,
      },
      { requiredKeys: [] },
    );
    const body = fc.oneof(
      { weight: 3, arbitrary: policyLike },
      { weight: 1, arbitrary: anyValue },
      { weight: 1, arbitrary: fc.constant(undefined) },
      { weight: 1, arbitrary: fc.string().map((s) => ({ raw: s })) },
    );
    const ifMatch = fc.option(fc.oneof(fc.constantFrom('"1"', '*', 'W/"2"', '"1", "3"'), fc.string()), { nil: undefined });
    const contentType = fc.constantFrom('application/json', 'application/merge-patch+json', 'application/json; charset=utf-8');

    const statuses = new Map<number, number>();
    setLogLevel('silent');
    try {
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...routes), fc.constantFrom(...ids), body, ifMatch, contentType, async ([method, path], id, b, im, ct) => {
          if (!store.get('p1')) await service.create(POLICY, 'fuzz').catch(() => undefined);
          const headers: Record<string, string> = {};
          if (im !== undefined && /^[\t\x20-\x7e]*$/.test(im)) headers['If-Match'] = im;
          let payload: string | undefined;
          if (b !== undefined && method !== 'GET') {
            payload = typeof b === 'object' && b !== null && 'raw' in b && Object.keys(b).length === 1 ? String((b as { raw: unknown }).raw) : JSON.stringify(b);
            headers['content-type'] = ct;
          }
          const r = await call(method, path(id), payload, headers);
          statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
          if (r.status >= 500) throw new Error(`${method} ${path(id)} ${payload} -> ${r.status} ${JSON.stringify(r.body)}`);
          expect(r.headers.get('content-type')).to.match(/^application\/json/);
        }),
        { numRuns: 600, seed: 5 }, // fixed: the statuses asserted below are a property of this run, not of chance
      );
    } finally {
      setLogLevel('info');
    }
    // The bodies reach every layer: successes, validation failures, conflicts, bad requests.
    for (const status of [200, 400, 404, 409, 422]) expect(statuses.get(status) ?? 0, `${status} in ${JSON.stringify([...statuses])}`).to.be.greaterThan(0);
  });
});
