/**
 * OpenTelemetry traces (docs/tracing.md) from a real server process to a real
 * OTLP/HTTP receiver in this test process: the spans exported, their parents (a W3C traceparent on
 * HTTP, on both HTTP paths, and in gRPC metadata, rl.v1 and Envoy) and their attributes; in OTLP JSON
 * and in OTLP protobuf (the default protocol), decoded here by field number.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import { spanDecisionOf } from '../../src/grpc/envoy.js';
import type { Decision } from '../../src/model/decision.js';
import { failureModeOf } from '../../src/observability/tracing.js';
import { envoyClient, rateLimitClient, unary } from '../grpc/helpers.js';
import { postJson } from '../support/http.js';
import { messageField, readFields, stringField, varintField, type WireValue } from '../support/protobuf-wire.js';
import { startServerProcess, type ServerProcessHandle } from '../support/server-process.js';

interface ExportedSpan {
  service: string;
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  attributes: Record<string, string | number | boolean>;
}

/** A caller's span context: what it sends as `traceparent`. */
function callerContext() {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

// --- OTLP JSON (ids in hex, as the OTLP/HTTP JSON mapping writes them)

type JsonAnyValue = { stringValue?: string; boolValue?: boolean; intValue?: number | string; doubleValue?: number };
type JsonKeyValue = { key: string; value: JsonAnyValue };

function jsonValue(v: JsonAnyValue): string | number | boolean {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  throw new Error(`unexpected attribute value ${JSON.stringify(v)}`);
}

function jsonAttributes(list: JsonKeyValue[] | undefined): Record<string, string | number | boolean> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, jsonValue(kv.value)]));
}

function spansFromJson(body: Buffer): ExportedSpan[] {
  const request = JSON.parse(body.toString('utf8'));
  const out: ExportedSpan[] = [];
  for (const rs of request.resourceSpans ?? []) {
    const service = String(jsonAttributes(rs.resource?.attributes)['service.name']);
    for (const ss of rs.scopeSpans ?? []) {
      for (const span of ss.spans ?? []) {
        out.push({ service, traceId: span.traceId, spanId: span.spanId, parentSpanId: span.parentSpanId ?? '', name: span.name, attributes: jsonAttributes(span.attributes) });
      }
    }
  }
  return out;
}

// --- OTLP protobuf (opentelemetry/proto/collector/trace/v1, by field number)

function protoValue(any: Map<number, WireValue[]>): string | number | boolean {
  if (any.has(1)) return stringField(any, 1);
  if (any.has(2)) return varintField(any, 2) === 1;
  if (any.has(3)) return varintField(any, 3);
  if (any.has(4)) return (any.get(4)![0] as Buffer).readDoubleLE(0);
  throw new Error('unexpected attribute value');
}

function protoAttributes(values: WireValue[] | undefined): Record<string, string | number | boolean> {
  return Object.fromEntries((values ?? []).map((kv) => readFields(kv as Buffer)).map((kv) => [stringField(kv, 1), protoValue(messageField(kv, 2))]));
}

function spansFromProtobuf(body: Buffer): ExportedSpan[] {
  const hex = (fields: Map<number, WireValue[]>, n: number) => ((fields.get(n)?.[0] as Buffer | undefined) ?? Buffer.alloc(0)).toString('hex');
  const out: ExportedSpan[] = [];
  for (const rsBytes of readFields(body).get(1) ?? []) {
    const rs = readFields(rsBytes as Buffer);
    const service = String(protoAttributes(messageField(rs, 1).get(1))['service.name']);
    for (const ssBytes of rs.get(2) ?? []) {
      for (const spanBytes of readFields(ssBytes as Buffer).get(2) ?? []) {
        const span = readFields(spanBytes as Buffer);
        out.push({ service, traceId: hex(span, 1), spanId: hex(span, 2), parentSpanId: hex(span, 4), name: stringField(span, 5), attributes: protoAttributes(span.get(9)) });
      }
    }
  }
  return out;
}

/** An OTLP/HTTP trace receiver: answers every export 200 and keeps the spans. */
async function startReceiver() {
  const spans: ExportedSpan[] = [];
  const contentTypes: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const type = req.headers['content-type'] ?? '';
      contentTypes.push(type);
      if (req.url === '/v1/traces') spans.push(...(type.startsWith('application/json') ? spansFromJson(Buffer.concat(chunks)) : spansFromProtobuf(Buffer.concat(chunks))));
      res.writeHead(200, { 'content-type': type.startsWith('application/json') ? 'application/json' : 'application/x-protobuf' });
      res.end(type.startsWith('application/json') ? '{}' : '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    contentTypes,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Polls until `find` returns something (the exporter batches); the deadline only guards against a hang. */
async function exported<T>(find: () => T | undefined, what: string): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const found = find();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`no exported span: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const POLICIES = {
  policies: [
    { policy_id: 'traced', scope: { service: 'traced', user_id: '*' }, algorithm: { type: 'fixed_window', limit: 5, window: '1h' } },
    { policy_id: 'traced-leases', scope: { job_type: 'traced' }, algorithm: { type: 'concurrency', max_concurrency: 2 } },
  ],
};

describe('OpenTelemetry traces (real server, real OTLP/HTTP receiver)', function () {
  this.timeout(60_000);
  let dir: string;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-tracing-'));
    writeFileSync(join(dir, 'policies.json'), JSON.stringify(POLICIES));
    receiver = await startReceiver();
  });
  after(async () => {
    await receiver?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const serverEnv = (protocol: string | undefined, name: string) => ({
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
    OTEL_SERVICE_NAME: name,
    OTEL_TRACES_SAMPLER: 'always_on',
    OTEL_BSP_SCHEDULE_DELAY: '50',
    RL_POLICY_FILE: join(dir, 'policies.json'),
    RL_DATA_DIR: join(dir, name),
  });

  const childOf = (caller: ReturnType<typeof callerContext>, name: string, service: string) =>
    exported(() => receiver.spans.find((s) => s.service === service && s.traceId === caller.traceId && s.name === name), `${name} in trace ${caller.traceId}`);

  describe('OTLP JSON (OTEL_EXPORTER_OTLP_PROTOCOL=http/json)', () => {
    let server: ServerProcessHandle;
    let grpcTarget: string;
    const clients: grpc.Client[] = [];
    before(async () => {
      server = await startServerProcess(serverEnv('http/json', 'rl-json'));
      const listening = server.logs().find((l) => l.message === 'listening')!;
      expect(listening.tracing).to.equal('http/json');
      grpcTarget = `127.0.0.1:${listening.grpc}`;
    });
    after(async () => {
      for (const client of clients) client.close();
      await server?.stop('SIGTERM', 10_000);
    });

    it('HTTP check on the fast path: an rl.check span, child of the traceparent, with the decision attributes', async () => {
      const caller = callerContext();
      const answer = await postJson(`${server.url}/rl/v1/check`, { service: 'traced', user_id: 'u1' }, { traceparent: caller.traceparent });
      expect(answer.body).to.include({ allowed: true, remaining: 4 });
      const span = await childOf(caller, 'rl.check', 'rl-json');
      expect(span.parentSpanId).to.equal(caller.spanId);
      expect(span.attributes).to.deep.equal({ 'rl.policy_id': 'traced', 'rl.allowed': true, 'rl.reason': 'within_limit', 'rl.remaining': 4 });
    });

    it('HTTP check through Koa (a compressed body): the same span', async () => {
      const caller = callerContext();
      const response = await fetch(`${server.url}/rl/v1/check`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', traceparent: caller.traceparent },
        body: gzipSync(JSON.stringify({ service: 'traced', user_id: 'u2' })),
      });
      expect(response.status).to.equal(200);
      const span = await childOf(caller, 'rl.check', 'rl-json');
      expect(span.parentSpanId).to.equal(caller.spanId);
      expect(span.attributes).to.deep.equal({ 'rl.policy_id': 'traced', 'rl.allowed': true, 'rl.reason': 'within_limit', 'rl.remaining': 4 });
    });

    it('acquire, release and refund have their spans; a denial says so; no traceparent starts a trace', async () => {
      const lease = { job_type: 'traced', request_id: 'lease-1' };
      for (const [operation, body] of [['acquire', lease], ['release', lease], ['refund', { service: 'traced', user_id: 'u1', quantity: 1 }]] as const) {
        const caller = callerContext();
        await postJson(`${server.url}/rl/v1/${operation}`, body, { traceparent: caller.traceparent });
        const span = await childOf(caller, `rl.${operation}`, 'rl-json');
        expect(span.parentSpanId).to.equal(caller.spanId);
        expect(span.attributes['rl.reason']).to.equal({ acquire: 'lease_acquired', release: 'lease_released', refund: 'refunded' }[operation]);
      }
      for (let i = 0; i < 5; i++) await postJson(`${server.url}/rl/v1/check`, { service: 'traced', user_id: 'u3' });
      const caller = callerContext();
      await postJson(`${server.url}/rl/v1/check`, { service: 'traced', user_id: 'u3' }, { traceparent: caller.traceparent });
      expect((await childOf(caller, 'rl.check', 'rl-json')).attributes).to.deep.equal({ 'rl.policy_id': 'traced', 'rl.allowed': false, 'rl.reason': 'limit_exceeded', 'rl.remaining': 0 });
      // The five untraced checks each began a trace of their own: root spans.
      const roots = await exported(() => {
        const found = receiver.spans.filter((s) => s.service === 'rl-json' && s.name === 'rl.check' && s.parentSpanId === '');
        return found.length >= 5 ? found : undefined;
      }, 'five root rl.check spans');
      expect(new Set(roots.map((s) => s.traceId)).size).to.equal(roots.length);
    });

    it('gRPC CheckLimit and Envoy ShouldRateLimit: traceparent in the metadata', async () => {
      const rl = rateLimitClient(grpcTarget);
      const envoy = envoyClient(grpcTarget);
      clients.push(rl, envoy);
      const caller = callerContext();
      const answer = await unary(rl, 'CheckLimit', { service: 'traced', user_id: 'g1' }, { metadata: { traceparent: caller.traceparent } });
      expect(answer).to.include({ allowed: true, remaining: 4 });
      const span = await childOf(caller, 'rl.check', 'rl-json');
      expect(span.parentSpanId).to.equal(caller.spanId);
      expect(span.attributes).to.deep.equal({ 'rl.policy_id': 'traced', 'rl.allowed': true, 'rl.reason': 'within_limit', 'rl.remaining': 4 });

      const edge = callerContext();
      const descriptors = [{ entries: [{ key: 'service', value: 'traced' }, { key: 'user_id', value: 'g2' }] }];
      expect((await unary(envoy, 'ShouldRateLimit', { domain: 'edge', descriptors }, { metadata: { traceparent: edge.traceparent } })).overall_code).to.equal('OK');
      const envoySpan = await childOf(edge, 'rl.envoy', 'rl-json');
      expect(envoySpan.parentSpanId).to.equal(edge.spanId);
      expect(envoySpan.attributes).to.deep.equal({ 'rl.policy_id': 'traced', 'rl.allowed': true, 'rl.reason': 'within_limit', 'rl.remaining': 4 });

      // A call no policy decided says so, as rl.check does.
      const unmatched = callerContext();
      const nobody = [{ entries: [{ key: 'service', value: 'untraced' }] }];
      expect((await unary(envoy, 'ShouldRateLimit', { domain: 'edge', descriptors: nobody }, { metadata: { traceparent: unmatched.traceparent } })).overall_code).to.equal('OK');
      expect((await childOf(unmatched, 'rl.envoy', 'rl-json')).attributes).to.deep.equal({ 'rl.policy_id': '', 'rl.allowed': true, 'rl.reason': 'no_matching_policy', 'rl.remaining': 0 });
    });

    it('policy changes: rl.policy.<action> with rl.policy_id and rl.version', async () => {
      // [action, span, request, the version the span names]
      const steps: [string, string, () => Promise<Response>, number][] = [
        ['create', 'rl.policy.create', () => fetchJson('POST', '/rl/v1/policies', { policy_id: 'traced-new', algorithm: { type: 'fixed_window', limit: 1, window: '1m' } }), 1],
        ['patch', 'rl.policy.patch', () => fetchJson('PATCH', '/rl/v1/policies/traced-new', { priority: 2 }), 2],
        ['update', 'rl.policy.update', () => fetchJson('PUT', '/rl/v1/policies/traced-new', { policy_id: 'traced-new', algorithm: { type: 'fixed_window', limit: 2, window: '1m' } }), 3],
        ['rollout', 'rl.policy.rollout', () => fetchJson('POST', '/rl/v1/policies/traced-new/rollout', { rollout_percent: 50 }), 4],
        ['rollback', 'rl.policy.rollback', () => fetchJson('POST', '/rl/v1/policies/traced-new/rollback', { version: 1 }), 5],
        // delete: the version deleted.
        ['delete', 'rl.policy.delete', () => fetchJson('DELETE', '/rl/v1/policies/traced-new'), 5],
      ];
      let caller = callerContext();
      const fetchJson = (method: string, path: string, body?: unknown) =>
        fetch(`${server.url}${path}`, { method, headers: { 'content-type': 'application/json', traceparent: caller.traceparent }, body: body === undefined ? undefined : JSON.stringify(body) });
      for (const [action, name, send, version] of steps) {
        caller = callerContext();
        const response = await send();
        expect(response.status, action).to.equal(action === 'create' ? 201 : 200);
        if (action === 'delete') expect(await response.json()).to.deep.equal({ deleted: true, policy_id: 'traced-new' });
        const span = await childOf(caller, name, 'rl-json');
        expect(span.parentSpanId).to.equal(caller.spanId);
        expect(span.attributes).to.deep.equal({ 'rl.policy_id': 'traced-new', 'rl.version': version });
      }
    });
  });

  describe('OTLP protobuf (the default protocol)', () => {
    let server: ServerProcessHandle;
    before(async () => {
      server = await startServerProcess(serverEnv(undefined, 'rl-proto'));
    });
    after(() => server?.stop('SIGTERM', 10_000));

    it('exports rl.check as protobuf, child of the traceparent', async () => {
      const caller = callerContext();
      await postJson(`${server.url}/rl/v1/check`, { service: 'traced', user_id: 'p1' }, { traceparent: caller.traceparent });
      const span = await childOf(caller, 'rl.check', 'rl-proto');
      expect(span.parentSpanId).to.equal(caller.spanId);
      expect(span.attributes).to.deep.equal({ 'rl.policy_id': 'traced', 'rl.allowed': true, 'rl.reason': 'within_limit', 'rl.remaining': 4 });
      expect(receiver.contentTypes).to.include('application/x-protobuf');
    });
  });
});

describe('no tracing code without an OTLP endpoint', function () {
  this.timeout(60_000);
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-tracing-off-'));
    writeFileSync(join(dir, 'policies.json'), '{"policies": []}');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  /** The @opentelemetry packages a server process holds after one decision. */
  async function packagesLoaded(env: Record<string, string>, name: string): Promise<string[]> {
    const server = await startServerProcess({ RL_POLICY_FILE: join(dir, 'policies.json'), RL_DATA_DIR: join(dir, name), ...env }, { entry: 'test/support/otel-modules-child.ts' });
    try {
      const line = await exported(() => server.logs().find((l) => l.message === 'opentelemetry packages'), 'the package report');
      return line.loaded as string[];
    } finally {
      await server.stop('SIGTERM', 10_000);
    }
  }

  // prom-client (the metrics) loads @opentelemetry/api for its exemplars whatever this server does: the
  // tracing SDK, its exporters and resources are what tracing would add.
  it('a server without an endpoint loads nothing of OpenTelemetry but the API prom-client uses; with one, the SDK', async () => {
    const off = await packagesLoaded({ OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_TRACES_SAMPLER: 'always_on' }, 'off');
    expect(off.filter((name) => name !== '@opentelemetry/api')).to.deep.equal([]);
    const on = await packagesLoaded({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_SERVICE_NAME: 'probe' }, 'on');
    expect(on).to.include.members(['@opentelemetry/sdk-trace-base', '@opentelemetry/exporter-trace-otlp-proto', '@opentelemetry/resources']);
  });
});

describe('rl.failure_mode: when a failure mode answered', () => {
  const decision = (allowed: boolean, reason: string, shadow = false) =>
    ({ allowed, reason, shadow_mode: shadow, action: 'allow', matched_policy_id: 'p', remaining: 0, retry_after: 0, reset_after: 0, limit: 1, window: 1, metadata: {} }) as never;
  it('fail_open / fail_closed for an enforced answer of an unavailable store, nothing otherwise', () => {
    expect(failureModeOf('rl.check', decision(true, 'counter_store_unavailable'))).to.equal('fail_open');
    expect(failureModeOf('rl.acquire', decision(false, 'counter_store_unavailable'))).to.equal('fail_closed');
    expect(failureModeOf('rl.check', decision(true, 'within_limit'))).to.equal(undefined);
    expect(failureModeOf('rl.check', decision(true, 'counter_store_unavailable', true))).to.equal(undefined);
    expect(failureModeOf('rl.refund', decision(true, 'counter_store_unavailable'))).to.equal(undefined);
  });
});

describe('rl.envoy: the descriptor its span reports', () => {
  const decision = (policy: string, allowed: boolean, reason: string, remaining = 0) =>
    ({ allowed, reason, shadow_mode: false, action: allowed ? 'allow' : 'deny', matched_policy_id: policy, remaining, retry_after: 0, reset_after: 0, limit: 10, window: 1000, metadata: {} }) as Decision;
  const within = decision('roomy', true, 'within_limit', 3);
  const failedClosed = decision('down', false, 'counter_store_unavailable');
  const unmatched = decision('', true, 'no_matching_policy');

  it('a refused call reports a refusal: the limiting one, else a failure mode\'s (which speaks for no limit)', () => {
    const reported = spanDecisionOf([within, failedClosed]);
    expect(reported).to.equal(failedClosed);
    expect(failureModeOf('rl.envoy', reported)).to.equal('fail_closed');
    const limited = decision('tight', false, 'limit_exceeded');
    expect(spanDecisionOf([failedClosed, within, limited])).to.equal(limited);
  });

  it('an admitted call reports the limiting descriptor, else the first a policy decided, else the first', () => {
    const closer = decision('closer', true, 'within_limit', 1);
    expect(spanDecisionOf([within, closer])).to.equal(closer);
    expect(spanDecisionOf([unmatched, within])).to.equal(within);
    expect(spanDecisionOf([unmatched, decision('', true, 'no_matching_policy')])).to.equal(unmatched);
  });
});
