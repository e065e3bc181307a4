import * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import { RlError } from '../../src/errors.js';
import { rateLimitUnitOf, shouldRateLimit } from '../../src/grpc/envoy.js';
import type { Decision } from '../../src/model/decision.js';
import type { DecisionService } from '../../src/decision/decision-service.js';
import { loadPackageDefinition, SERVICE_NAMES } from '../../src/grpc/protos.js';
import type { GrpcAuthenticate } from '../../src/grpc/server.js';
import { counterSpecOf } from '../../src/matching/counter-spec-of.js';
import { makePolicy } from '../support/policies.js';
import { callError, envoyClient, grpcSuite, unary } from './helpers.js';
import { lengthDelimited, messageField, readFields, stringField, varintField, varintFieldBytes, type WireValue } from '../support/protobuf-wire.js';

const POLICIES = [
  // Envoy traffic of domain "edge", per user: 3 per minute.
  makePolicy({
    policy_id: 'edge-per-user',
    scope: { user_id: '*', tags: { domain: 'edge' } },
    algorithm: { type: 'fixed_window', limit: 3, window: '1m' },
  }),
  // Per client IP (Envoy's remote_address entry fills source_ip): 2 per 10 seconds, unit UNKNOWN.
  makePolicy({
    policy_id: 'edge-per-ip',
    scope: { source_ip: '*', tags: { domain: 'edge' } },
    algorithm: { type: 'fixed_window', limit: 2, window: '10s' },
  }),
  // A path-level token bucket refilling its capacity every second: unit SECOND.
  makePolicy({
    policy_id: 'edge-search-bucket',
    scope: { endpoint: '/search', tags: { domain: 'edge' } },
    algorithm: { type: 'token_bucket', limit: 5, window: '1s' },
  }),
  // Over the limit this one lets requests through degraded: Envoy must see OK.
  makePolicy({
    policy_id: 'edge-recs-downgrade',
    scope: { service: 'recommendations', tags: { domain: 'edge' } },
    algorithm: { type: 'fixed_window', limit: 1, window: '1h' },
    action: 'downgrade',
  }),
  // Over the limit this one keeps every request (sample_rate 1): OK, and the upstream is told.
  makePolicy({
    policy_id: 'edge-sampled',
    scope: { service: 'sampled', tags: { domain: 'edge' } },
    algorithm: { type: 'fixed_window', limit: 1, window: '1h', sample_rate: 1 },
    action: 'sample',
  }),
  // An enforcing limit with a tighter shadow policy beside it, and a shadow policy alone.
  makePolicy({
    policy_id: 'edge-billing',
    scope: { service: 'billing', tags: { domain: 'edge' } },
    algorithm: { type: 'fixed_window', limit: 5, window: '1m' },
  }),
  makePolicy({
    policy_id: 'edge-billing-shadow',
    scope: { service: 'billing', tags: { domain: 'edge' } },
    algorithm: { type: 'fixed_window', limit: 1, window: '1m' },
    enforcement_mode: 'shadow',
  }),
  makePolicy({
    policy_id: 'edge-beta-shadow',
    scope: { service: 'beta', tags: { domain: 'edge' } },
    algorithm: { type: 'fixed_window', limit: 1, window: '1m' },
    enforcement_mode: 'shadow',
  }),
];

const user = (id: string) => ({ entries: [{ key: 'user_id', value: id }] });

describe('Envoy RLS (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit)', () => {
  const suite = grpcSuite(POLICIES, envoyClient);
  const start = suite.start;

  it('answers OK with current_limit, limit_remaining and duration_until_reset, then OVER_LIMIT', async () => {
    await start();
    suite.fixture.clock.now += 20_000; // 40s left in the minute window
    const expected = [2, 1, 0];
    for (const remaining of expected) {
      const response = await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [user('alice')] });
      expect({ overall_code: response.overall_code, statuses: response.statuses }).to.deep.equal({
        overall_code: 'OK',
        statuses: [
          {
            code: 'OK',
            current_limit: { name: 'edge-per-user', requests_per_unit: 3, unit: 'MINUTE' },
            limit_remaining: remaining,
            duration_until_reset: { seconds: 40, nanos: 0 },
          },
        ],
      });
    }
    suite.fixture.clock.now += 1_500;
    const over = await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [user('alice')] });
    expect(over.overall_code).to.equal('OVER_LIMIT');
    expect(over.statuses[0]).to.deep.include({ code: 'OVER_LIMIT', limit_remaining: 0 });
    expect(over.statuses[0].current_limit).to.deep.equal({ name: 'edge-per-user', requests_per_unit: 3, unit: 'MINUTE' });
    // 38.5 s left: Envoy reads whole seconds only, so it is rounded up.
    expect(over.statuses[0].duration_until_reset).to.deep.equal({ seconds: 39, nanos: 0 });
  });

  it('decides every descriptor: OVER_LIMIT overall when any one is over, statuses in request order', async () => {
    await start();
    for (let i = 0; i < 3; i++) await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [user('bob')] });
    const response = await unary(suite.client, 'ShouldRateLimit', {
      domain: 'edge',
      descriptors: [user('carol'), user('bob'), { entries: [{ key: 'path', value: '/nothing-matches' }] }],
    });
    expect(response.overall_code).to.equal('OVER_LIMIT');
    expect(response.statuses.map((s: { code: string }) => s.code)).to.deep.equal(['OK', 'OVER_LIMIT', 'OK']);
    // Refused by bob's descriptor, the call consumed in none: carol's counter is whole (3 left before and after).
    expect(response.statuses[0]).to.deep.include({ limit_remaining: 3 });
    // No policy for the third: OK, no current_limit, nothing remaining to report.
    expect(response.statuses[2]).to.deep.include({ code: 'OK', current_limit: null, limit_remaining: 0, duration_until_reset: null });
    const carol = await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [user('carol')] });
    expect(carol.statuses[0]).to.deep.include({ code: 'OK', limit_remaining: 2 });
  });

  it('RL_ENVOY_CONSUME_ALL=true: every descriptor counts, whatever the others answer', async () => {
    await start({ envoyConsumeAll: true });
    for (let i = 0; i < 3; i++) await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [user('bob')] });
    const response = await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [user('carol'), user('bob')] });
    expect(response.statuses.map((s: { code: string; limit_remaining: number }) => [s.code, s.limit_remaining])).to.deep.equal([['OK', 2], ['OVER_LIMIT', 0]]);
  });

  it('ten calls refused by one descriptor take nothing of the others; allowed calls take from every one', async () => {
    await start();
    for (let i = 0; i < 3; i++) await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [user('bob')] });
    for (let i = 0; i < 10; i++) {
      const refused = await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [user('dave'), user('bob')] });
      expect(refused.overall_code).to.equal('OVER_LIMIT');
    }
    const both = await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [user('dave'), user('erin')] });
    expect(both.statuses.map((s: { limit_remaining: number }) => s.limit_remaining)).to.deep.equal([2, 2]);
  });

  it('applies policies only to their domain (the domain is the tag "domain")', async () => {
    await start();
    const response = await unary(suite.client, 'ShouldRateLimit', { domain: 'other', descriptors: [user('alice')] });
    expect(response.statuses[0]).to.deep.include({ code: 'OK', current_limit: null });
  });

  it('counts hits_addend (request level, overridden per descriptor; 0 = 1)', async () => {
    await start();
    let response = await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [user('dave')], hits_addend: 2 });
    expect(response.statuses[0]).to.deep.include({ code: 'OK', limit_remaining: 1 });
    response = await unary(suite.client, 'ShouldRateLimit', {
      domain: 'edge',
      descriptors: [{ ...user('erin'), hits_addend: { value: 3 } }, user('frank')],
      hits_addend: 0,
    });
    expect(response.statuses.map((s: { limit_remaining: number }) => s.limit_remaining)).to.deep.equal([0, 2]);
    response = await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [{ ...user('gina'), hits_addend: { value: 4 } }] });
    expect(response.statuses[0]).to.deep.include({ code: 'OVER_LIMIT', limit_remaining: 3 });
  });

  it("maps Envoy's remote_address onto source_ip and reports a 10s window as unit UNKNOWN", async () => {
    await start();
    const descriptor = { entries: [{ key: 'remote_address', value: '10.0.0.7' }] };
    const first = await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [descriptor] });
    expect(first.statuses[0]).to.deep.include({ code: 'OK', limit_remaining: 1 });
    expect(first.statuses[0].current_limit).to.deep.equal({ name: 'edge-per-ip', requests_per_unit: 2, unit: 'UNKNOWN' });
    expect(first.statuses[0].duration_until_reset).to.deep.equal({ seconds: 10, nanos: 0 });
    await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [descriptor] });
    const third = await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [descriptor] });
    expect(third.overall_code).to.equal('OVER_LIMIT');
  });

  it('reports a bucket that refills its capacity in one second as unit SECOND', async () => {
    await start();
    const response = await unary(suite.client, 'ShouldRateLimit', {
      domain: 'edge',
      descriptors: [{ entries: [{ key: 'endpoint', value: '/search' }] }],
    });
    expect(response.statuses[0].current_limit).to.deep.equal({ name: 'edge-search-bucket', requests_per_unit: 5, unit: 'SECOND' });
    expect(response.statuses[0].limit_remaining).to.equal(4);
  });

  it('answers OK for an action that lets the request through (downgrade)', async () => {
    await start();
    const descriptor = { entries: [{ key: 'service', value: 'recommendations' }] };
    await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [descriptor] });
    const response = await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [descriptor] });
    expect(response.overall_code).to.equal('OK');
    expect(response.statuses[0]).to.deep.include({ code: 'OK', limit_remaining: 0 });
  });

  it('INVALID_ARGUMENT naming the descriptor and field for bad input', async () => {
    await start();
    let error = await callError(suite.client, 'ShouldRateLimit', {
      domain: 'edge',
      descriptors: [user('x'), { entries: [{ key: 'signal_type', value: 'smoke' }] }],
    });
    expect(error.code).to.equal(grpc.status.INVALID_ARGUMENT);
    expect(error.details).to.match(/^descriptors\[1\]\.signal_type: must be one of/);
    error = await callError(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [] });
    expect(error.code).to.equal(grpc.status.INVALID_ARGUMENT);
    expect(error.details).to.match(/^descriptors: /);
    error = await callError(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [{ entries: [{ key: '', value: 'v' }] }] });
    expect(error.details).to.match(/^descriptors\[0\]\.entries\[0\]\.key: /);
    // Bounded work: too many descriptors, or entries in one, are refused before any is read.
    error = await callError(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: Array.from({ length: 65 }, () => user('x')) });
    expect(error.code).to.equal(grpc.status.INVALID_ARGUMENT);
    expect(error.details).to.match(/^descriptors: must hold at most 64 descriptors, got 65/);
    const entries = Array.from({ length: 5000 }, (_, i) => ({ key: `k${i}`, value: 'v' }));
    error = await callError(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [{ entries }] });
    expect(error.code).to.equal(grpc.status.INVALID_ARGUMENT);
    expect(error.details).to.match(/^descriptors\[0\]\.entries: must hold at most \d+ entries/);
  });

  it('applies authentication (decide access) and readiness like the other RPCs', async () => {
    const methods: string[] = [];
    const authenticate: GrpcAuthenticate = (metadata, method) => {
      methods.push(method);
      if (metadata.get('x-api-key')[0] !== 'envoy-key') throw new RlError('unauthenticated', 'bad key');
      return { subject: 'envoy', role: 'read-only' };
    };
    await start({ authenticate });
    const error = await callError(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [user('a')] });
    expect(error.code).to.equal(grpc.status.UNAUTHENTICATED);
    const ok = await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [user('a')] }, { metadata: { 'x-api-key': 'envoy-key' } });
    expect(ok.overall_code).to.equal('OK');
    expect(methods[0]).to.equal('/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit');
    suite.fixture.readiness.markDraining();
    const draining = await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [user('a')] }, { metadata: { 'x-api-key': 'envoy-key' } });
    expect(draining.overall_code, 'a draining server still answers').to.equal('OK');
  });

  describe('wire compatibility with Envoy field numbers', () => {
    const method = () => (loadPackageDefinition()[SERVICE_NAMES.envoy] as unknown as Record<string, grpc.MethodDefinition<any, any>>).ShouldRateLimit;

    it('decodes a request encoded by hand from the public definition', () => {
      // RateLimitRequest{domain(1)="edge", descriptors(2)=[{entries(1)=[{key(1)="user_id", value(2)="al"}],
      // hits_addend(3)=UInt64Value{value(1)=5}}], hits_addend(3)=2}
      const entry = Buffer.from([0x0a, 0x07, ...Buffer.from('user_id'), 0x12, 0x02, ...Buffer.from('al')]);
      const descriptor = Buffer.from([0x0a, entry.length, ...entry, 0x1a, 0x02, 0x08, 0x05]);
      const bytes = Buffer.from([0x0a, 0x04, ...Buffer.from('edge'), 0x12, descriptor.length, ...descriptor, 0x18, 0x02]);
      const decoded = method().requestDeserialize(bytes);
      expect(decoded).to.deep.equal({
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'user_id', value: 'al' }], hits_addend: { value: '5' } }],
        hits_addend: 2,
      });
    });

    it('encodes a response with the field numbers Envoy reads', () => {
      const bytes = method().responseSerialize({
        overall_code: 'OVER_LIMIT',
        statuses: [
          {
            code: 'OVER_LIMIT',
            current_limit: { name: 'p', requests_per_unit: 3, unit: 'MINUTE' },
            limit_remaining: 1,
            duration_until_reset: { seconds: 2, nanos: 5 },
          },
        ],
      });
      // RateLimit{requests_per_unit(1)=3, unit(2)=MINUTE(2), name(3)="p"}
      const limit = [0x08, 0x03, 0x10, 0x02, 0x1a, 0x01, 0x70];
      // Duration{seconds(1)=2, nanos(2)=5}
      const duration = [0x08, 0x02, 0x10, 0x05];
      // DescriptorStatus{code(1)=OVER_LIMIT(2), current_limit(2), limit_remaining(3)=1, duration_until_reset(4)}
      const status = [0x08, 0x02, 0x12, limit.length, ...limit, 0x18, 0x01, 0x22, duration.length, ...duration];
      expect([...bytes]).to.deep.equal([0x08, 0x02, 0x12, status.length, ...status]);
    });
  });

  it('names a global budget (and the region, when there are regions) in the dynamic metadata', async () => {
    const globalBudget = makePolicy({
      policy_id: 'edge-global',
      scope: { user_id: '*', tags: { domain: 'edge' } },
      budget: 'global',
      algorithm: { type: 'fixed_window', limit: 3, window: '1m' },
    });
    await start({}, [globalBudget]);
    const response = await unary(suite.client, 'ShouldRateLimit', { domain: 'edge', descriptors: [user('alice')] });
    const fields = Object.fromEntries(Object.entries(response.dynamic_metadata.fields).map(([k, v]) => [k, (v as { stringValue: string }).stringValue]));
    // Without regions configured `budget: "global"` means the one store there is: no region to name.
    expect(fields).to.deep.include({ policy_id: 'edge-global', budget: 'global' });
    expect(fields).to.not.have.property('region');
  });

  it('rateLimitUnitOf: exact windows and periods map to units, other shapes to UNKNOWN', () => {
    const unit = (algorithm: Record<string, unknown>) => rateLimitUnitOf(counterSpecOf(algorithm as never));
    expect(unit({ type: 'fixed_window', limit: 1, window: '1s' })).to.equal('SECOND');
    expect(unit({ type: 'sliding_window_log', limit: 1, window: '60s' })).to.equal('MINUTE');
    expect(unit({ type: 'sliding_window_counter', limit: 1, window: '1h' })).to.equal('HOUR');
    expect(unit({ type: 'quota', limit: 1, quota_period: '1d' })).to.equal('DAY');
    expect(unit({ type: 'fixed_window', limit: 1, window: '10s' })).to.equal('UNKNOWN');
    expect(unit({ type: 'token_bucket', limit: 600, window: '1m' })).to.equal('MINUTE');
    expect(unit({ type: 'token_bucket', limit: 600, window: '1m', burst: 50, refill_rate: 10 })).to.equal('UNKNOWN');
    expect(unit({ type: 'leaky_bucket', limit: 10, window: '1s', burst: 60, leak_rate: 1 })).to.equal('MINUTE');
    expect(unit({ type: 'concurrency', max_concurrency: 3 })).to.equal('UNKNOWN');
  });

  describe('what Envoy\'s ratelimit filter reads, decoded by Envoy\'s field numbers alone', () => {
    let raw: grpc.Client | undefined;
    afterEach(() => {
      raw?.close();
      raw = undefined;
    });

    /** RateLimitRequest{domain(1), descriptors(2)=[{entries(1)=[{key(1), value(2)}], hits_addend(3)=UInt64Value{value(1)}}]} */
    function request(domain: string, descriptors: { entries: [string, string][]; hitsAddend?: number }[]): Buffer {
      const parts = [lengthDelimited(1, Buffer.from(domain))];
      for (const d of descriptors) {
        const entries = d.entries.map(([k, v]) => lengthDelimited(1, Buffer.concat([lengthDelimited(1, Buffer.from(k)), lengthDelimited(2, Buffer.from(v))])));
        // UInt64Value holding 0 is an empty message: present, so "explicitly 0".
        const addend = d.hitsAddend === undefined ? [] : [lengthDelimited(3, d.hitsAddend === 0 ? Buffer.alloc(0) : varintFieldBytes(1, d.hitsAddend))];
        parts.push(lengthDelimited(2, Buffer.concat([...entries, ...addend])));
      }
      return Buffer.concat(parts);
    }

    function call(bytes: Buffer): Promise<Map<number, WireValue[]>> {
      const client = (raw ??= new grpc.Client(suite.fixture.target, grpc.credentials.createInsecure()));
      return new Promise((resolve, reject) =>
        client.makeUnaryRequest(
          '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
          (b: Buffer) => b,
          (b: Buffer) => b,
          bytes,
          (error, response) => (error ? reject(error) : resolve(readFields(response!))),
        ),
      );
    }

    /** HeaderValue{key(1), value(2)} list of field `n`. */
    function headers(fields: Map<number, WireValue[]>, n: number): [string, string][] {
      return (fields.get(n) ?? []).map((v) => {
        const header = readFields(v as Buffer);
        return [stringField(header, 1), stringField(header, 2)];
      });
    }

    /** google.protobuf.Struct{fields(1)=map<string, Value{string_value(3)}>} as a plain object. */
    function struct(fields: Map<number, WireValue[]>, n: number): Record<string, string> {
      const out: Record<string, string> = {};
      for (const entry of messageField(fields, n).get(1) ?? []) {
        const pair = readFields(entry as Buffer);
        out[stringField(pair, 1)] = stringField(messageField(pair, 2), 3);
      }
      return out;
    }

    it('OK: the limiting descriptor\'s headers (fewest remaining), metadata, and a reset rounded up', async () => {
      await start();
      suite.fixture.clock.now += 59_100; // 900 ms left in the minute window
      const answer = await call(request('edge', [{ entries: [['user_id', 'hdr']] }, { entries: [['remote_address', '10.0.0.9']] }]));
      expect(varintField(answer, 1), 'overall_code OK').to.equal(1);
      // edge-per-user: 3/min, 2 left; edge-per-ip: 2/10 s, 1 left — the second is the limiting one.
      expect(headers(answer, 3)).to.deep.equal([
        ['RateLimit-Policy', '"edge-per-ip";q=2;w=10'],
        ['RateLimit', '"edge-per-ip";r=1;t=1'],
      ]);
      const firstStatus = readFields(answer.get(2)![0] as Buffer);
      expect(varintField(messageField(firstStatus, 4), 1), '900 ms reads as 1 s, not 0').to.equal(1);
      expect(headers(answer, 4), 'no request headers without a downgrade').to.deep.equal([]);
      expect(answer.has(5), 'no body on OK').to.equal(false);
      expect(struct(answer, 6)).to.deep.equal({ policy_id: 'edge-per-ip', action: 'allow', reason: 'within_limit' });
    });

    it('OVER_LIMIT: Retry-After, the problem+json raw_body and its content type, a reset rounded up', async () => {
      await start();
      for (let i = 0; i < 3; i++) await call(request('edge', [{ entries: [['user_id', 'over']] }]));
      suite.fixture.clock.now += 20_100; // 39.9 s left in the minute window
      const answer = await call(request('edge', [{ entries: [['user_id', 'over']] }]));
      expect(varintField(answer, 1), 'overall_code OVER_LIMIT').to.equal(2);
      const status = readFields(answer.get(2)![0] as Buffer);
      expect(varintField(status, 1), 'descriptor code OVER_LIMIT').to.equal(2);
      expect(varintField(messageField(status, 4), 1), '39.9 s reads as 40').to.equal(40);
      expect(varintField(messageField(status, 4), 2), 'nanos 0: Envoy reads whole seconds').to.equal(0);
      expect(headers(answer, 3)).to.deep.equal([
        ['RateLimit-Policy', '"edge-per-user";q=3;w=60'],
        ['RateLimit', '"edge-per-user";r=0;t=40'],
        ['Retry-After', '40'],
        ['content-type', 'application/problem+json'],
      ]);
      expect(headers(answer, 4), 'no request headers on OVER_LIMIT').to.deep.equal([]);
      const body = JSON.parse((answer.get(5)![0] as Buffer).toString('utf8'));
      expect(body).to.deep.equal({
        type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
        title: 'Quota exceeded',
        status: 429,
        detail: 'Policy "edge-per-user" allows 3 per 60 s; retry in 40 s.',
        'violated-policies': ['edge-per-user'],
      });
      expect(struct(answer, 6)).to.deep.equal({ policy_id: 'edge-per-user', action: 'deny', reason: 'limit_exceeded' });
    });

    it('OK through a kept sample: x-ratelimit-action sample goes to the upstream', async () => {
      await start();
      const sampled = { entries: [['service', 'sampled']] as [string, string][] };
      expect(headers(await call(request('edge', [sampled])), 4), 'within the limit: nothing to tell').to.deep.equal([]);
      const answer = await call(request('edge', [sampled]));
      expect(varintField(answer, 1)).to.equal(1);
      expect(headers(answer, 4)).to.deep.equal([['x-ratelimit-action', 'sample']]);
      expect(struct(answer, 6)).to.deep.equal({ policy_id: 'edge-sampled', action: 'sample', reason: 'limit_exceeded' });
    });

    it('dynamic metadata names the shadow policy and its verdict, beside an enforcing one or alone', async () => {
      await start();
      const billing = { entries: [['service', 'billing']] as [string, string][] };
      expect(struct(await call(request('edge', [billing])), 6)).to.deep.equal({
        policy_id: 'edge-billing', action: 'allow', reason: 'within_limit', shadow_policy_id: 'edge-billing-shadow', shadow_action: 'allow',
      });
      expect(struct(await call(request('edge', [billing])), 6)).to.deep.equal({
        policy_id: 'edge-billing', action: 'allow', reason: 'within_limit', shadow_policy_id: 'edge-billing-shadow', shadow_action: 'deny',
      });
      const beta = { entries: [['service', 'beta']] as [string, string][] };
      await call(request('edge', [beta]));
      const alone = await call(request('edge', [beta]));
      expect(varintField(alone, 1), 'a shadow policy never limits').to.equal(1);
      expect(headers(alone, 3), 'no headers for a shadow-only answer').to.deep.equal([]);
      expect(struct(alone, 6)).to.deep.equal({
        policy_id: 'edge-beta-shadow', action: 'shadow_only', reason: 'limit_exceeded', shadow_policy_id: 'edge-beta-shadow', shadow_action: 'shadow_only',
      });
    });

    it('OK through a downgrade: x-ratelimit-action goes to the upstream', async () => {
      await start();
      const recs = { entries: [['service', 'recommendations']] as [string, string][] };
      await call(request('edge', [recs]));
      const answer = await call(request('edge', [recs]));
      expect(varintField(answer, 1)).to.equal(1);
      expect(headers(answer, 4)).to.deep.equal([['x-ratelimit-action', 'downgrade']]);
    });

    it('a descriptor hits_addend explicitly 0 is a peek; a request-level 0 still counts 1', async () => {
      await start();
      await call(request('edge', [{ entries: [['user_id', 'peek']] }]));
      for (let i = 0; i < 3; i++) {
        const peek = await call(request('edge', [{ entries: [['user_id', 'peek']], hitsAddend: 0 }]));
        expect(varintField(readFields(peek.get(2)![0] as Buffer), 3), 'limit_remaining unchanged by peeks').to.equal(2);
        expect(struct(peek, 6)).to.deep.include({ policy_id: 'edge-per-user', peek: 'true' });
      }
      // An explicit hits_addend of 2 on the descriptor counts 2, where the request-level one says 0.
      const two = await call(request('edge', [{ entries: [['user_id', 'peek-2']], hitsAddend: 2 }]));
      expect(varintField(readFields(two.get(2)![0] as Buffer), 3)).to.equal(1);
      const counted = await call(request('edge', [{ entries: [['user_id', 'peek']] }]));
      expect(varintField(readFields(counted.get(2)![0] as Buffer), 3)).to.equal(1);
    });

    it('RL_ENVOY_HEADERS: legacy X-RateLimit-* headers, or none', async () => {
      await start({ envoyHeaders: 'legacy' });
      const legacy = await call(request('edge', [{ entries: [['user_id', 'legacy']] }]));
      expect(headers(legacy, 3)).to.deep.equal([
        ['X-RateLimit-Limit', '3'],
        ['X-RateLimit-Remaining', '2'],
        ['X-RateLimit-Reset', '60'],
      ]);
      for (let i = 0; i < 3; i++) await call(request('edge', [{ entries: [['user_id', 'legacy']] }]));
      suite.fixture.clock.now += 700; // 59.3 s left
      const refused = await call(request('edge', [{ entries: [['user_id', 'legacy']] }]));
      expect(headers(refused, 3)).to.deep.equal([
        ['X-RateLimit-Limit', '3'],
        ['X-RateLimit-Remaining', '0'],
        ['X-RateLimit-Reset', '60'],
        ['Retry-After', '60'],
        ['content-type', 'application/problem+json'],
      ]);
      await suite.fixture.close();
      raw?.close();
      raw = undefined;
      await start({ envoyHeaders: 'off' });
      const off = await call(request('edge', [{ entries: [['user_id', 'off']] }]));
      expect(headers(off, 3)).to.deep.equal([]);
      for (let i = 0; i < 3; i++) await call(request('edge', [{ entries: [['user_id', 'off']] }]));
      const refusedOff = await call(request('edge', [{ entries: [['user_id', 'off']] }]));
      expect(varintField(refusedOff, 1)).to.equal(2);
      expect(headers(refusedOff, 3), 'off: only the body\'s content type').to.deep.equal([['content-type', 'application/problem+json']]);
      expect(refusedOff.has(5), 'the 429 body is sent whatever the header mode').to.equal(true);
      expect(struct(off, 6).policy_id, 'metadata is not a header').to.equal('edge-per-user');
    });

    it('RL_ENVOY_HEADER_DESCRIPTORS=all: one IETF list item per enforced descriptor, the limiting one first; legacy stays single', async () => {
      await start({ envoyHeaderDescriptors: 'all' });
      suite.fixture.clock.now += 59_100; // 900 ms left in the minute window, 900 ms in the 10 s one
      const descriptors = [
        { entries: [['user_id', 'all']] as [string, string][] },
        { entries: [['service', 'beta']] as [string, string][] }, // shadow only: no item
        { entries: [['service', 'unmatched-service'], ['tier', 'x']] as [string, string][] }, // no policy: no item
        { entries: [['remote_address', '10.0.0.7']] as [string, string][] },
      ];
      const answer = await call(request('edge', descriptors));
      expect(varintField(answer, 1)).to.equal(1);
      // edge-per-ip (1 left) limits; edge-per-user (2 left) follows in the request's order.
      expect(headers(answer, 3)).to.deep.equal([
        ['RateLimit-Policy', '"edge-per-ip";q=2;w=10, "edge-per-user";q=3;w=60'],
        ['RateLimit', '"edge-per-ip";r=1;t=1, "edge-per-user";r=2;t=1'],
      ]);
      // Refused by edge-per-ip: it leads, Retry-After is its own, the body names it alone.
      await call(request('edge', [descriptors[3]]));
      const refused = await call(request('edge', descriptors));
      expect(varintField(refused, 1)).to.equal(2);
      // The refused call took nothing of edge-per-user: 2 left, as before it.
      expect(headers(refused, 3)).to.deep.equal([
        ['RateLimit-Policy', '"edge-per-ip";q=2;w=10, "edge-per-user";q=3;w=60'],
        ['RateLimit', '"edge-per-ip";r=0;t=1, "edge-per-user";r=2;t=1'],
        ['Retry-After', '1'],
        ['content-type', 'application/problem+json'],
      ]);
      expect(JSON.parse((refused.get(5)![0] as Buffer).toString('utf8'))['violated-policies']).to.deep.equal(['edge-per-ip']);
      // Two descriptors of one policy and one user: two items, the one with fewer units left first.
      const twice = await call(request('edge', [{ entries: [['user_id', 'twice']] }, { entries: [['user_id', 'twice']] }]));
      expect(headers(twice, 3)).to.deep.equal([
        ['RateLimit-Policy', '"edge-per-user";q=3;w=60, "edge-per-user";q=3;w=60'],
        ['RateLimit', '"edge-per-user";r=1;t=1, "edge-per-user";r=2;t=1'],
      ]);
      await suite.fixture.close();
      raw?.close();
      raw = undefined;

      await start({ envoyHeaders: 'legacy', envoyHeaderDescriptors: 'all' });
      const legacy = await call(request('edge', [descriptors[0], descriptors[3]]));
      expect(headers(legacy, 3), 'legacy: the limiting descriptor alone').to.deep.equal([
        ['X-RateLimit-Limit', '2'],
        ['X-RateLimit-Remaining', '1'],
        ['X-RateLimit-Reset', '10'],
      ]);
    });
  });
});

describe('Envoy access-log metadata: the decision that speaks for the answer', () => {
  const decision = (policy: string, allowed: boolean, reason: string, remaining = 0) =>
    ({ allowed, reason, shadow_mode: false, action: allowed ? 'allow' : 'deny', matched_policy_id: policy, remaining, retry_after: 0, reset_after: 0, limit: 10, window: 1000, metadata: {} }) as Decision;
  const answerFor = async (results: Decision[]) => {
    let next = 0;
    const decisions = { check: async () => results[next++], checkTogether: async () => results } as unknown as DecisionService;
    const request = { domain: 'edge', descriptors: results.map((_, i) => ({ entries: [{ key: 'user_id', value: `u${i}` }] })) };
    const response = await shouldRateLimit(decisions, request, { unitOf: () => 'SECOND', headers: 'off' });
    const fields = response.dynamic_metadata?.fields ?? {};
    return { code: response.overall_code, logged: Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, (v as { stringValue: string }).stringValue])) };
  };

  it('a call refused by a failure mode logs that refusal, not an admitted descriptor beside it', async () => {
    const { code, logged } = await answerFor([decision('roomy', true, 'within_limit', 3), decision('down', false, 'counter_store_unavailable')]);
    expect(code).to.equal('OVER_LIMIT');
    expect(logged).to.include({ policy_id: 'down', reason: 'counter_store_unavailable', action: 'deny' });
  });

  it('a refusal that speaks for a limit comes first; an admitted call logs its limiting descriptor', async () => {
    const refused = await answerFor([decision('down', false, 'counter_store_unavailable'), decision('tight', false, 'limit_exceeded')]);
    expect(refused.logged).to.include({ policy_id: 'tight', reason: 'limit_exceeded' });
    const admitted = await answerFor([decision('roomy', true, 'within_limit', 3), decision('closer', true, 'within_limit', 1)]);
    expect(admitted.code).to.equal('OK');
    expect(admitted.logged).to.include({ policy_id: 'closer' });
  });
});
