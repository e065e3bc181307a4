import { expect } from 'chai';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Value } from '@sinclair/typebox/value';
import type { TSchema } from '@sinclair/typebox';
import type Router from '@koa/router';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Authenticator } from '../../src/auth/authenticator.js';
import { loadServerConfig } from '../../src/config.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { createHttpListener } from '../../src/http/app.js';
import { HttpAuth } from '../../src/http/auth-guard.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { analyticsRoutes } from '../../src/http/routes/analytics.js';
import { dashboardStreamRoutes } from '../../src/http/routes/dashboard.js';
import { DashboardHub } from '../../src/analytics/dashboard-hub.js';
import { decisionRoutes } from '../../src/http/routes/decisions.js';
import { healthRoutes } from '../../src/http/routes/health.js';
import { infoRoutes } from '../../src/http/routes/info.js';
import { metricsRoutes } from '../../src/http/routes/metrics.js';
import { DOCS_PATH, openApiRoutes } from '../../src/http/routes/openapi.js';
import { policyRoutes } from '../../src/http/routes/policies.js';
import { explainRoutes } from '../../src/http/routes/explain.js';
import { Explainer } from '../../src/decision/explainer.js';
import { Analytics } from '../../src/analytics/analytics.js';
import { Metrics } from '../../src/observability/metrics.js';
import { ObservabilityRecorder } from '../../src/analytics/recorder.js';
import { FilePolicyStore } from '../../src/policy-store/file-policy-store.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { PolicyService } from '../../src/policy-service/policy-service.js';
import { QUOTA_PASS_THROUGH } from '../../src/policy/quota-alias.js';
import { PolicyInputSchema, QuotaPolicyInputSchema } from '../../src/schema/policy.js';
import { COMPONENT_SCHEMAS, OPERATIONS, openApiDocument, openApiJson } from '../../src/schema/openapi.js';
import { setLogLevel } from '../../src/util/log.js';
import { serve, type TestServer } from '../support/http.js';

/**
 * The OpenAPI document against the server (issue 12): it is a valid OpenAPI 3.1 document; every route
 * the routers serve is in it and nothing else; and one request per documented operation (and per
 * documented error status that a request can provoke) goes to the server's real listener, its answer's
 * status must be documented for that operation and its body must match the documented schema, so the
 * document cannot drift from the server.
 */

const ADMIN = 'admin-key-0123456789';
const READER = 'reader-key-0123456789';
const VERSION = '9.9.9-test';

const references = Object.entries(COMPONENT_SCHEMAS).map(([name, schema]) => ({ ...schema, $id: `#/components/schemas/${name}` }));
const documentInMemory = openApiDocument(VERSION);

interface Call {
  operationId: string;
  status: number;
  method?: string;
  path: string;
  key?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

/**
 * The routers of the server (src/server.ts) that make up the API: those createApp mounts itself
 * (health, decisions), those the server adds behind authentication, and the public reference. The
 * dashboard's static files (/dashboard) are a page, not API, like the docs page's own files.
 */
function apiRouters(deps: {
  decisions: DecisionService;
  readiness: Readiness;
  policies: PolicyService;
  analytics: Analytics;
  metrics: Metrics;
  counters: MemoryCounterStore;
  matcher: LiveMatcher;
}) {
  return {
    builtIn: [healthRoutes(deps.readiness), decisionRoutes(deps.decisions)],
    guarded: [
      policyRoutes(deps.policies),
      explainRoutes(new Explainer(deps.matcher, deps.policies)),
      analyticsRoutes(deps.analytics),
      metricsRoutes(deps.metrics),
      infoRoutes({ version: VERSION, counters: 'memory', policy_store: 'file', auth: 'apikey', tls: false }),
      dashboardStreamRoutes(new DashboardHub(deps)),
    ],
    open: [openApiRoutes(VERSION)],
  };
}

/** The body as text; an event stream never ends, so of one only the first event is read. */
async function bodyText(response: Response, abort: AbortController): Promise<string> {
  if (!response.headers.get('content-type')?.startsWith('text/event-stream')) return response.text();
  const reader = response.body!.getReader();
  let text = '';
  while (!text.includes('\n\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString('utf8');
  }
  abort.abort();
  expect(text).to.match(/^event: hello\ndata: \{/);
  return text;
}

/** The path of an operation with its `{id}` replaced. */
const at = (path: string, id = 'p1') => path.replace('{id}', encodeURIComponent(id));

describe('OpenAPI document (GET /rl/v1/openapi.json) against the server', function () {
  this.timeout(30_000);
  let dir: string;
  let store: FilePolicyStore;
  let policies: PolicyService;
  let counters: MemoryCounterStore;
  let server: TestServer;
  let routers: Router[];

  before(async () => {
    setLogLevel('error');
    dir = mkdtempSync(join(tmpdir(), 'rl-openapi-'));
    store = await FilePolicyStore.open(dir);
    const matcher = new LiveMatcher();
    policies = new PolicyService({ store, matcher });
    counters = new MemoryCounterStore({ sweepIntervalMs: 0 });
    const metrics = new Metrics({ labelCap: 100 });
    const analytics = new Analytics();
    const readiness = new Readiness();
    readiness.markReady();
    const decisions = new DecisionService({ policies: matcher, counters, keyPrefix: 't:', recorder: new ObservabilityRecorder(metrics, analytics) });
    const { builtIn, guarded, open } = apiRouters({ decisions, readiness, policies, analytics, metrics, counters, matcher });
    routers = [...builtIn, ...guarded, ...open];
    const auth = loadServerConfig({ RL_AUTH_ENABLED: 'true', RL_AUTH_MODE: 'apikey', RL_AUTH_API_KEYS: `${ADMIN},${READER}:read-only`, RL_AUTH_EXEMPT_PATHS: '/healthz' }).auth;
    const listener = createHttpListener({
      decisions,
      readiness,
      maxBodyBytes: 64 * 1024,
      auth: new HttpAuth(new Authenticator(auth), auth),
      routers: guarded,
      publicRouters: open,
    });
    server = await serve(listener);
  });
  after(async () => {
    await server?.close();
    policies?.close();
    await store?.close();
    await counters?.close();
    rmSync(dir, { recursive: true, force: true });
    setLogLevel('info');
  });

  it('is served as built, and passes an OpenAPI 3.1 validator', async () => {
    const response = await fetch(`${server.url}/rl/v1/openapi.json`);
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.match(/^application\/json/);
    const text = await response.text();
    expect(text).to.equal(openApiJson(VERSION));
    const document = JSON.parse(text);
    expect(document.openapi).to.equal('3.1.0');
    expect(document.info.version).to.equal(VERSION);
    const result = await new Validator().validate(document);
    expect(result, JSON.stringify(result.errors)).to.deep.include({ valid: true });
    expect(Object.keys(document.components.securitySchemes)).to.have.members(['ApiKey', 'ApiKeyBearer', 'JwtBearer']);
  });

  it('documents every route the routers serve, and no other', () => {
    const served = new Set<string>();
    for (const router of routers) {
      for (const layer of router.stack) {
        const path = String(layer.path);
        // The docs page's own files are part of the page, not of the API.
        if (path.startsWith(`${DOCS_PATH}/`)) continue;
        for (const method of layer.methods) if (method !== 'HEAD') served.add(`${method} ${path.replace(/:(\w+)/g, '{$1}')}`);
      }
    }
    const documented = new Set(OPERATIONS.map((op) => `${op.method.toUpperCase()} ${op.path}`));
    expect([...served].sort()).to.deep.equal([...documented].sort());
  });

  it('every real answer, one request per documented operation and error status, matches the document', async () => {
    const policy = { policy_id: 'p1', scope: { user_id: '*' }, algorithm: { type: 'fixed_window', limit: 5, window: '1m' }, metadata: { owner: 'a' } };
    const lease = { policy_id: 'lease', algorithm: { type: 'concurrency', max_concurrency: 2 }, scope: { resource: 'db' } };
    const calls: Call[] = [
      { operationId: 'healthz', status: 200, path: '/healthz' },
      { operationId: 'readyz', status: 401, path: '/readyz' },
      { operationId: 'readyz', status: 200, path: '/readyz', key: READER },
      { operationId: 'metrics', status: 200, path: '/metrics', key: READER },
      { operationId: 'metrics', status: 401, path: '/metrics' },
      { operationId: 'info', status: 200, path: '/rl/v1/info', key: READER },
      { operationId: 'openapi', status: 200, path: '/rl/v1/openapi.json' },
      { operationId: 'openapi', status: 406, path: '/rl/v1/openapi.json', headers: { accept: 'text/html' } },
      { operationId: 'stream', status: 200, path: '/rl/v1/stream', key: READER },
      { operationId: 'docs', status: 200, path: '/rl/v1/docs' },
      { operationId: 'docs', status: 406, path: '/rl/v1/docs', headers: { accept: 'application/json' } },
      { operationId: 'createPolicy', status: 201, method: 'POST', path: '/rl/v1/policies', key: ADMIN, body: policy },
      { operationId: 'createPolicy', status: 201, method: 'POST', path: '/rl/v1/policies', key: ADMIN, body: lease },
      { operationId: 'createPolicy', status: 201, method: 'POST', path: '/rl/v1/policies', key: ADMIN, body: { id: 'quota', resource: 'llm', algorithm: 'quota', config: { quota: 100, window_seconds: 3600 }, action_deny: true } },
      // Ties p1 (specificity 1, priority 0, both cover every request with a user_id): answered with warnings.
      { operationId: 'createPolicy', status: 201, method: 'POST', path: '/rl/v1/policies', key: ADMIN, body: { ...policy, policy_id: 'p1-twin' } },
      { operationId: 'createPolicy', status: 409, method: 'POST', path: '/rl/v1/policies', key: ADMIN, body: policy },
      { operationId: 'createPolicy', status: 422, method: 'POST', path: '/rl/v1/policies', key: ADMIN, body: { policy_id: 'bad', algorithm: { type: 'nope' } } },
      { operationId: 'createPolicy', status: 400, method: 'POST', path: '/rl/v1/policies', key: ADMIN, body: '{"policy_id": ' },
      { operationId: 'createPolicy', status: 415, method: 'POST', path: '/rl/v1/policies', key: ADMIN, body: 'x', headers: { 'content-type': 'text/plain' } },
      { operationId: 'createPolicy', status: 413, method: 'POST', path: '/rl/v1/policies', key: ADMIN, body: { ...policy, description: 'x'.repeat(70_000) } },
      { operationId: 'createPolicy', status: 403, method: 'POST', path: '/rl/v1/policies', key: READER, body: policy },
      { operationId: 'createPolicy', status: 401, method: 'POST', path: '/rl/v1/policies', body: policy },
      { operationId: 'check', status: 200, method: 'POST', path: '/rl/v1/check', key: READER, body: { user_id: 'u1', tags: { env: 'prod' } } },
      { operationId: 'check', status: 200, method: 'POST', path: '/rl/v1/check', key: READER, body: { user_id: 'u1', quantity: 0 } },
      { operationId: 'check', status: 200, method: 'POST', path: '/rl/v1/check', key: READER, body: { user_id: 'u1', quantity: 100 } },
      { operationId: 'check', status: 400, method: 'POST', path: '/rl/v1/check', key: READER, body: { quantity: -1 } },
      { operationId: 'check', status: 401, method: 'POST', path: '/rl/v1/check', body: {} },
      { operationId: 'acquire', status: 200, method: 'POST', path: '/rl/v1/acquire', key: READER, body: { resource: 'db', request_id: 'r1' } },
      { operationId: 'release', status: 200, method: 'POST', path: '/rl/v1/release', key: READER, body: { resource: 'db', request_id: 'r1' } },
      { operationId: 'release', status: 200, method: 'POST', path: '/rl/v1/release', key: READER, body: { resource: 'db', request_id: 'unknown' } },
      { operationId: 'refund', status: 200, method: 'POST', path: '/rl/v1/refund', key: ADMIN, body: { user_id: 'u1', quantity: 1 } },
      { operationId: 'refund', status: 400, method: 'POST', path: '/rl/v1/refund', key: ADMIN, body: { user_id: 'u1' } },
      { operationId: 'explain', status: 200, method: 'POST', path: '/rl/v1/explain', key: READER, body: { user_id: 'u1' } },
      { operationId: 'explain', status: 200, method: 'POST', path: '/rl/v1/explain?decision=acquire', key: READER, body: { resource: 'db' } },
      { operationId: 'explain', status: 400, method: 'POST', path: '/rl/v1/explain?decision=nope', key: READER, body: {} },
      { operationId: 'explain', status: 400, method: 'POST', path: '/rl/v1/explain', key: READER, body: { quantity: -1 } },
      { operationId: 'explain', status: 401, method: 'POST', path: '/rl/v1/explain', body: {} },
      { operationId: 'listPolicies', status: 200, path: '/rl/v1/policies', key: READER },
      { operationId: 'validatePolicy', status: 200, method: 'POST', path: '/rl/v1/policies/validate', key: READER, body: policy },
      { operationId: 'validatePolicy', status: 200, method: 'POST', path: '/rl/v1/policies/validate', key: READER, body: { algorithm: 1 } },
      { operationId: 'getPolicy', status: 200, path: at('/rl/v1/policies/{id}'), key: READER },
      { operationId: 'getPolicy', status: 404, path: at('/rl/v1/policies/{id}', 'none'), key: READER },
      { operationId: 'replacePolicy', status: 200, method: 'PUT', path: at('/rl/v1/policies/{id}'), key: ADMIN, body: { ...policy, priority: 3 } },
      { operationId: 'replacePolicy', status: 409, method: 'PUT', path: at('/rl/v1/policies/{id}'), key: ADMIN, body: policy, headers: { 'if-match': '"1"' } },
      { operationId: 'replacePolicy', status: 422, method: 'PUT', path: at('/rl/v1/policies/{id}'), key: ADMIN, body: { ...policy, policy_id: 'other' } },
      { operationId: 'replacePolicy', status: 404, method: 'PUT', path: at('/rl/v1/policies/{id}', 'none'), key: ADMIN, body: { ...policy, policy_id: 'none' } },
      { operationId: 'patchPolicy', status: 200, method: 'PATCH', path: at('/rl/v1/policies/{id}'), key: ADMIN, body: { priority: 4 }, headers: { 'content-type': 'application/merge-patch+json' } },
      { operationId: 'patchPolicy', status: 422, method: 'PATCH', path: at('/rl/v1/policies/{id}'), key: ADMIN, body: { rollout_percent: 500 } },
      { operationId: 'rolloutPolicy', status: 200, method: 'POST', path: at('/rl/v1/policies/{id}/rollout'), key: ADMIN, body: { rollout_percent: 50 } },
      { operationId: 'rolloutPolicy', status: 400, method: 'POST', path: at('/rl/v1/policies/{id}/rollout'), key: ADMIN, body: { rollout_percent: 'half' } },
      { operationId: 'rollbackPolicy', status: 200, method: 'POST', path: at('/rl/v1/policies/{id}/rollback'), key: ADMIN, body: { version: 1 } },
      { operationId: 'rollbackPolicy', status: 404, method: 'POST', path: at('/rl/v1/policies/{id}/rollback'), key: ADMIN, body: { version: 99 } },
      { operationId: 'policyVersions', status: 200, path: at('/rl/v1/policies/{id}/versions'), key: READER },
      { operationId: 'policyVersions', status: 404, path: at('/rl/v1/policies/{id}/versions', 'none'), key: READER },
      { operationId: 'policyAudit', status: 200, path: at('/rl/v1/policies/{id}/audit'), key: READER },
      { operationId: 'policyAudit', status: 404, path: at('/rl/v1/policies/{id}/audit', 'none'), key: READER },
      { operationId: 'analyticsSummary', status: 200, path: '/rl/v1/analytics/summary?top=5', key: READER },
      { operationId: 'analyticsSummary', status: 400, path: '/rl/v1/analytics/summary?top=0', key: READER },
      { operationId: 'deletePolicy', status: 409, method: 'DELETE', path: at('/rl/v1/policies/{id}'), key: ADMIN, headers: { 'if-match': '"1"' } },
      { operationId: 'deletePolicy', status: 400, method: 'DELETE', path: at('/rl/v1/policies/{id}'), key: ADMIN, body: '{' },
      { operationId: 'deletePolicy', status: 200, method: 'DELETE', path: at('/rl/v1/policies/{id}'), key: ADMIN },
      { operationId: 'deletePolicy', status: 404, method: 'DELETE', path: at('/rl/v1/policies/{id}'), key: ADMIN },
      { operationId: 'policyAudit', status: 200, path: at('/rl/v1/policies/{id}/audit'), key: READER },
    ];

    const exercised = new Set<string>();
    for (const call of calls) {
      const op = OPERATIONS.find((o) => o.operationId === call.operationId)!;
      const method = call.method ?? 'GET';
      expect(op.method.toUpperCase(), call.operationId).to.equal(method);
      const headers: Record<string, string> = { ...(call.key ? { 'x-api-key': call.key } : {}) };
      if (call.body !== undefined) headers['content-type'] = 'application/json';
      Object.assign(headers, call.headers);
      const abort = new AbortController();
      const response = await fetch(`${server.url}${call.path}`, {
        method,
        headers,
        body: call.body === undefined ? undefined : typeof call.body === 'string' ? call.body : JSON.stringify(call.body),
        signal: abort.signal,
      });
      const where = `${method} ${call.path} (${call.operationId})`;
      const text = await bodyText(response, abort);
      expect(response.status, `${where}: ${text.slice(0, 300)}`).to.equal(call.status);

      const documented = documentInMemory.paths[op.path][op.method].responses[String(response.status)];
      expect(documented, `${where}: status ${response.status} is not documented`).to.not.equal(undefined);
      const [mediaType] = Object.keys(documented.content);
      expect(response.headers.get('content-type'), where).to.satisfy((t: string) => t.startsWith(mediaType));
      expect(response.headers.get('x-request-id'), where).to.be.a('string');
      const body = mediaType === 'application/json' ? JSON.parse(text) : text;
      const schema = documented.content[mediaType].schema as TSchema;
      const problems = [...Value.Errors(schema, references, body)].map((e) => `${e.path}: ${e.message}`);
      expect(problems, `${where}: the answer does not match the document: ${text.slice(0, 300)}`).to.deep.equal([]);
      exercised.add(call.operationId);
    }
    expect([...exercised].sort()).to.deep.equal(OPERATIONS.map((o) => o.operationId).sort());
  });

  it('types the PATCH body: every field of either policy shape, optional and nullable, nested objects partial', () => {
    const patch = documentInMemory.components.schemas.PolicyPatch as TSchema;
    const [policyShape, quotaShape] = patch.anyOf as TSchema[];
    expect(Object.keys(policyShape.properties)).to.have.members(Object.keys(PolicyInputSchema.properties));
    expect(Object.keys(quotaShape.properties)).to.have.members(Object.keys(QuotaPolicyInputSchema.properties));
    expect(policyShape.required).to.equal(undefined);
    expect(quotaShape.required).to.equal(undefined);
    const valid = [{ priority: 4 }, { description: null }, { algorithm: { limit: 3 } }, { scope: { user_id: null } }, { metadata: { owner: null } }, { config: { quota: 500 } }];
    for (const body of valid) expect(Value.Check(patch, references, body), JSON.stringify(body)).to.equal(true);
    const invalid = [{ priority: 'high' }, { rollout_percent: 500 }, { algorithm: { limit: 0 } }, { enabled: 'yes' }, { name: 7 }];
    for (const body of invalid) expect(Value.Check(patch, references, body), JSON.stringify(body)).to.equal(false);
  });

  it('the quota shape documents every policy field the server passes through with it', () => {
    expect(Object.keys(QuotaPolicyInputSchema.properties)).to.include.members([...QUOTA_PASS_THROUGH]);
  });
});
