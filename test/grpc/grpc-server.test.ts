import * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import type { DecisionService } from '../../src/decision/decision-service.js';
import { unmatchedDecision } from '../../src/decision/decisions.js';
import { RlError } from '../../src/errors.js';
import {
  bindGrpcServer,
  createGrpcServer,
  credentialsFromMetadata,
  grpcAuthenticate,
  shutdownGrpcServer,
  type GrpcAuthenticate,
  type Principal,
} from '../../src/grpc/server.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { INVALID_FIELD_METADATA_KEY } from '../../src/grpc/status.js';
import type { Decision } from '../../src/model/decision.js';
import type { RequestContext } from '../../src/model/request-context.js';
import { makePolicy } from '../support/policies.js';
import { callError, grpcSuite, healthClient, makeDecisions, rateLimitClient, T0, unary } from './helpers.js';

const POLICIES = [
  makePolicy({
    policy_id: 'api-per-user',
    scope: { service: 'api', user_id: '*' },
    algorithm: { type: 'fixed_window', limit: 2, window: '1m' },
  }),
  makePolicy({
    policy_id: 'llm-budget',
    scope: { resource: 'llm' },
    algorithm: { type: 'quota', limit: 10, quota_period: '1h' },
  }),
  makePolicy({
    policy_id: 'exports',
    scope: { job_type: 'export', tenant_id: '*' },
    algorithm: { type: 'concurrency', max_concurrency: 1, lease_ttl: '10m' },
  }),
];

const allow: Principal = { subject: 'tester', role: 'read-only' };

describe('gRPC server (rl.v1.RateLimitService)', () => {
  const suite = grpcSuite(POLICIES, rateLimitClient);
  const start = suite.start;

  describe('CheckLimit', () => {
    it('admits up to the limit and then denies, with every Decision field', async () => {
      await start();
      const first = await unary<Decision>(suite.client, 'CheckLimit', { service: 'api', user_id: 'u1' });
      expect(first).to.deep.equal({
        allowed: true,
        action: 'allow',
        reason: 'within_limit',
        matched_policy_id: 'api-per-user',
        remaining: 1,
        retry_after: 0,
        reset_after: 60_000,
        limit: 2,
        window: 60_000,
        shadow_mode: false,
        metadata: {},
        // One layer decided: nothing on the wire; decoding with defaults reads the absent list as empty.
        layers: [],
      });
      await unary(suite.client, 'CheckLimit', { service: 'api', user_id: 'u1' });
      suite.fixture.clock.now += 15_000;
      const denied = await unary<Decision>(suite.client, 'CheckLimit', { service: 'api', user_id: 'u1' });
      expect(denied).to.deep.include({
        allowed: false,
        action: 'deny',
        reason: 'limit_exceeded',
        remaining: 0,
        retry_after: 45_000,
        reset_after: 45_000,
        limit: 2,
      });
      // Another user has a counter of their own.
      const other = await unary<Decision>(suite.client, 'CheckLimit', { service: 'api', user_id: 'u2' });
      expect(other).to.deep.include({ allowed: true, remaining: 1 });
    });

    it('answers no_matching_policy when nothing matches', async () => {
      await start();
      const d = await unary<Decision>(suite.client, 'CheckLimit', { service: 'elsewhere' });
      expect(d).to.deep.include({ allowed: true, reason: 'no_matching_policy', matched_policy_id: '', limit: 0 });
    });

    it('takes quantity as int64 (unset = 1, an explicit 0 is a peek) and tags as a map', async () => {
      await start();
      let d = await unary<Decision>(suite.client, 'CheckLimit', { resource: 'llm', quantity: 7, tags: { model: 'x' } });
      expect(d).to.deep.include({ allowed: true, remaining: 3, matched_policy_id: 'llm-budget' });
      d = await unary<Decision>(suite.client, 'CheckLimit', { resource: 'llm', quantity: 0 });
      expect(d).to.deep.include({ allowed: true, remaining: 3, metadata: { peek: 'true' } });
      d = await unary<Decision>(suite.client, 'CheckLimit', { resource: 'llm' });
      expect(d).to.deep.include({ allowed: true, remaining: 2 });
      d = await unary<Decision>(suite.client, 'CheckLimit', { resource: 'llm', quantity: '3' });
      expect(d).to.deep.include({ allowed: false, reason: 'limit_exceeded', remaining: 2 });
    });

    it('treats empty strings as absent (proto3 has no presence), so they never match a `*` scope', async () => {
      await start();
      const d = await unary<Decision>(suite.client, 'CheckLimit', { service: 'api', user_id: '' });
      expect(d.reason).to.equal('no_matching_policy');
    });
  });

  describe('Acquire and Release', () => {
    it('takes, refuses, returns and reports unknown leases', async () => {
      await start();
      const a = await unary<Decision>(suite.client, 'Acquire', { job_type: 'export', tenant_id: 't1', request_id: 'job-a' });
      expect(a).to.deep.include({ allowed: true, reason: 'lease_acquired', matched_policy_id: 'exports', remaining: 0, limit: 1 });
      expect(a.metadata).to.deep.equal({ lease_id: 'job-a' });

      const b = await unary<Decision>(suite.client, 'Acquire', { job_type: 'export', tenant_id: 't1', request_id: 'job-b' });
      expect(b).to.deep.include({ allowed: false, action: 'deny', reason: 'limit_exceeded' });
      expect(b.retry_after).to.equal(600_000);

      const released = await unary<Decision>(suite.client, 'Release', { job_type: 'export', tenant_id: 't1', request_id: 'job-a' });
      expect(released).to.deep.include({ allowed: true, action: 'allow', reason: 'lease_released', remaining: 1 });

      const again = await unary<Decision>(suite.client, 'Release', { job_type: 'export', tenant_id: 't1', request_id: 'job-a' });
      expect(again).to.deep.include({ allowed: true, reason: 'lease_not_found' });
    });

    it('finds the lease by the digest of the fields when there is no request_id', async () => {
      await start();
      const ctx = { job_type: 'export', tenant_id: 't2', user_id: 'u' };
      const a = await unary<Decision>(suite.client, 'Acquire', ctx);
      expect(a.reason).to.equal('lease_acquired');
      const r = await unary<Decision>(suite.client, 'Release', ctx);
      expect(r.reason).to.equal('lease_released');
      expect(r.metadata.lease_id).to.equal(a.metadata.lease_id);
    });
  });

  describe('errors', () => {
    it('INVALID_ARGUMENT naming the field for a bad signal_type', async () => {
      await start();
      const error = await callError(suite.client, 'CheckLimit', { service: 'api', signal_type: 'carrier-pigeon' });
      expect(error.code).to.equal(grpc.status.INVALID_ARGUMENT);
      expect(error.details).to.match(/^signal_type: must be one of http, grpc/);
      expect(error.metadata.get(INVALID_FIELD_METADATA_KEY)).to.deep.equal(['signal_type']);
    });

    it('INVALID_ARGUMENT for a negative or too large quantity, on every RPC', async () => {
      await start();
      for (const method of ['CheckLimit', 'Acquire', 'Release']) {
        const negative = await callError(suite.client, method, { quantity: -1 });
        expect(negative.code, method).to.equal(grpc.status.INVALID_ARGUMENT);
        expect(negative.details).to.match(/^quantity: /);
      }
      const huge = await callError(suite.client, 'CheckLimit', { quantity: '9007199254740993' });
      expect(huge.code).to.equal(grpc.status.INVALID_ARGUMENT);
      expect(huge.details).to.match(/^quantity: must be between 0 and 9007199254740991/);
    });

    it('UNAUTHENTICATED and PERMISSION_DENIED from the authenticate hook, which sees the metadata', async () => {
      const seen: { credentials: unknown; method: string }[] = [];
      const authenticate: GrpcAuthenticate = (metadata, method) => {
        const credentials = credentialsFromMetadata(metadata);
        seen.push({ credentials, method });
        if (credentials.apiKey === 'good') return allow;
        if (credentials.apiKey === 'other') throw new RlError('permission_denied', 'not allowed to decide');
        throw new RlError('unauthenticated', 'missing or invalid credentials');
      };
      await start({ authenticate });

      const none = await callError(suite.client, 'CheckLimit', { service: 'api', user_id: 'u' });
      expect(none.code).to.equal(grpc.status.UNAUTHENTICATED);
      expect(none.details).to.equal('missing or invalid credentials');

      const bearer = await callError(suite.client, 'Acquire', {}, { metadata: { authorization: 'Bearer nope' } });
      expect(bearer.code).to.equal(grpc.status.UNAUTHENTICATED);

      const denied = await callError(suite.client, 'Release', {}, { metadata: { 'x-api-key': 'other' } });
      expect(denied.code).to.equal(grpc.status.PERMISSION_DENIED);

      const ok = await unary<Decision>(suite.client, 'CheckLimit', { service: 'api', user_id: 'u' }, { metadata: { 'x-api-key': 'good' } });
      expect(ok.allowed).to.equal(true);

      expect(seen.map((s) => s.method)).to.deep.equal([
        '/rl.v1.RateLimitService/CheckLimit',
        '/rl.v1.RateLimitService/Acquire',
        '/rl.v1.RateLimitService/Release',
        '/rl.v1.RateLimitService/CheckLimit',
      ]);
      expect(seen[0].credentials).to.deep.equal({});
      expect(seen[1].credentials).to.deep.equal({ authorization: 'Bearer nope' });
      expect(seen[2].credentials).to.deep.equal({ apiKey: 'other' });

      // Health stays exempt.
      const health = healthClient(suite.fixture.target);
      try {
        expect(await unary(health, 'Check', { service: '' })).to.deep.equal({ status: 'SERVING' });
      } finally {
        health.close();
      }
    });

    it('grpcAuthenticate asks the authenticator for "decide" access with the metadata credentials', async () => {
      const calls: unknown[] = [];
      const authenticate = grpcAuthenticate({
        authenticate(credentials) {
          calls.push(['authenticate', credentials]);
          if (!credentials.apiKey) throw new RlError('unauthenticated', 'no credentials');
          return { subject: 'k', role: 'read-only' };
        },
        authorize(principal, access) {
          calls.push(['authorize', principal.subject, access]);
        },
      });
      await start({ authenticate });
      expect((await callError(suite.client, 'CheckLimit', {})).code).to.equal(grpc.status.UNAUTHENTICATED);
      await unary(suite.client, 'CheckLimit', {}, { metadata: { 'x-api-key': 'k1', authorization: 'Bearer t' } });
      expect(calls).to.deep.equal([
        ['authenticate', {}],
        ['authenticate', { apiKey: 'k1', authorization: 'Bearer t' }],
        ['authorize', 'k', 'decide'],
      ]);
    });

    it('UNAVAILABLE while starting; still answering while draining (until the listener closes)', async () => {
      await start({ notReady: true });
      const starting = await callError(suite.client, 'CheckLimit', { service: 'api' });
      expect(starting.code).to.equal(grpc.status.UNAVAILABLE);
      expect(starting.details).to.equal('server is starting');

      suite.fixture.readiness.markReady();
      expect((await unary<Decision>(suite.client, 'CheckLimit', { service: 'api' })).allowed).to.equal(true);

      suite.fixture.readiness.markDraining();
      expect((await unary<Decision>(suite.client, 'CheckLimit', { service: 'api' })).allowed).to.equal(true);
    });

    it('RESOURCE_EXHAUSTED above the maximum message size', async () => {
      await start({ maxMessageBytes: 1024 });
      const error = await callError(suite.client, 'CheckLimit', { service: 'api', tags: { big: 'x'.repeat(2048) } });
      expect(error.code).to.equal(grpc.status.RESOURCE_EXHAUSTED);
      // Below the limit the same server answers.
      expect((await unary<Decision>(suite.client, 'CheckLimit', { service: 'api', tags: { small: 'x' } })).allowed).to.equal(true);
    });

    it('DEADLINE_EXCEEDED when the decision outlasts the deadline', async () => {
      const slow = {
        decideNow: (_operation: string, _ctx: RequestContext) => new Promise<Decision>((resolve) => setTimeout(() => resolve(unmatchedDecision('no_matching_policy')), 400)),
      } as unknown as DecisionService;
      await start({ decisions: slow });
      const started = Date.now();
      const error = await callError(suite.client, 'CheckLimit', { service: 'api' }, { timeoutMs: 100 });
      expect(error.code).to.equal(grpc.status.DEADLINE_EXCEEDED);
      expect(Date.now() - started).to.be.below(390);
    });

    it('does no work for a call whose deadline has passed before the decision', async () => {
      let decided = 0;
      const counting = {
        decideNow: async () => {
          decided++;
          return unmatchedDecision('no_matching_policy');
        },
      } as unknown as DecisionService;
      // Authentication that blocks the event loop past the client's deadline.
      const slowAuth: GrpcAuthenticate = () => {
        const until = Date.now() + 150;
        while (Date.now() < until);
        return allow;
      };
      await start({ decisions: counting, authenticate: slowAuth });
      const error = await callError(suite.client, 'CheckLimit', { service: 'api' }, { timeoutMs: 60 });
      expect(error.code).to.equal(grpc.status.DEADLINE_EXCEEDED);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(decided).to.equal(0);
    });

    it('INTERNAL (logged, no details leaked) for an unexpected failure', async () => {
      const broken = {
        check: async () => {
          throw new Error('secret internals');
        },
      } as unknown as DecisionService;
      await start({ decisions: broken });
      const error = await callError(suite.client, 'CheckLimit', {});
      expect(error.code).to.equal(grpc.status.INTERNAL);
      expect(error.details).to.equal('internal error');
    });
  });

  describe('grpc.health.v1.Health', () => {
    it('Check reports SERVING when ready and NOT_SERVING while starting or draining', async () => {
      await start({ notReady: true });
      const health = healthClient(suite.fixture.target);
      try {
        for (const service of ['', 'rl.v1.RateLimitService', 'envoy.service.ratelimit.v3.RateLimitService']) {
          expect(await unary(health, 'Check', { service }), service).to.deep.equal({ status: 'NOT_SERVING' });
        }
        suite.fixture.readiness.markReady();
        for (const service of ['', 'rl.v1.RateLimitService']) {
          expect(await unary(health, 'Check', { service }), service).to.deep.equal({ status: 'SERVING' });
        }
        suite.fixture.readiness.markDraining();
        expect(await unary(health, 'Check', {})).to.deep.equal({ status: 'NOT_SERVING' });
        const unknown = await callError(health, 'Check', { service: 'no.such.Service' });
        expect(unknown.code).to.equal(grpc.status.NOT_FOUND);
      } finally {
        health.close();
      }
    });

    it('Watch streams the current status and every change', async () => {
      await start();
      const health = healthClient(suite.fixture.target);
      try {
        const call = (health as any).Watch({ service: 'rl.v1.RateLimitService' }) as grpc.ClientReadableStream<{ status: string }>;
        const statuses: string[] = [];
        const twoSeen = new Promise<void>((resolve, reject) => {
          call.on('data', (message) => {
            statuses.push(message.status);
            if (statuses.length === 1) suite.fixture.readiness.markDraining();
            if (statuses.length === 2) resolve();
          });
          call.on('error', (error: grpc.ServiceError) => {
            if (error.code !== grpc.status.CANCELLED) reject(error);
          });
        });
        await twoSeen;
        expect(statuses).to.deep.equal(['SERVING', 'NOT_SERVING']);
        call.cancel();
      } finally {
        health.close();
      }
    });
  });

  describe('binding and shutdown', () => {
    it('binds every interface when no host is given, and reports the chosen port', async () => {
      const readiness = new Readiness();
      readiness.markReady();
      const server = createGrpcServer({ decisions: makeDecisions(POLICIES, { now: T0 }).decisions, readiness, maxMessageBytes: 4096 });
      const port = await bindGrpcServer(server, { port: 0 }, grpc.ServerCredentials.createInsecure());
      expect(port).to.be.greaterThan(0);
      const local = rateLimitClient(`127.0.0.1:${port}`);
      try {
        expect((await unary<Decision>(local, 'CheckLimit', { service: 'api', user_id: 'u' })).remaining).to.equal(1);
      } finally {
        local.close();
        await shutdownGrpcServer(server, 1000);
      }
    });

    it('rejects a bad maxMessageBytes at construction', () => {
      const readiness = new Readiness();
      expect(() => createGrpcServer({ decisions: makeDecisions([], { now: T0 }).decisions, readiness, maxMessageBytes: 0 })).to.throw(/maxMessageBytes/);
    });

    it('shuts down promptly even with an open health Watch', async () => {
      await start();
      const health = healthClient(suite.fixture.target);
      const call = (health as any).Watch({ service: '' }) as grpc.ClientReadableStream<{ status: string }>;
      const ended = new Promise<void>((resolve) => {
        call.on('error', () => resolve());
        call.on('end', () => resolve());
      });
      call.on('data', () => {});
      await new Promise((resolve) => call.once('data', resolve));
      const started = Date.now();
      await shutdownGrpcServer(suite.fixture.server, 5000);
      expect(Date.now() - started).to.be.below(1000);
      await ended;
      health.close();
    });
  });
});
