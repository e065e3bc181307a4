/**
 * HTTP and gRPC give the same decision for the same input (README "gRPC and Envoy"): two DecisionServices
 * with identical policies, separate in-memory counter stores, one shared clock and identically seeded
 * random sources; every request goes to both transports at the same instant and the decisions must be
 * equal field by field, for every algorithm and every action (plus shadow mode and no match).
 */
import * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import { createApp } from '../../src/http/app.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { ALGORITHM_TYPES, LIMIT_ACTIONS } from '../../src/policy/types.js';
import type { Decision } from '../../src/model/decision.js';
import type { Policy } from '../../src/policy/types.js';
import { setLogLevel } from '../../src/util/log.js';
import { makePolicy } from '../support/policies.js';
import { postJson, serve, type TestServer } from '../support/http.js';
import { callError, makeDecisions, rateLimitClient, startGrpc, T0, unary, type GrpcFixture } from './helpers.js';

const ALGORITHMS: Record<string, Record<string, unknown>> = {
  fixed_window: { type: 'fixed_window', limit: 3, window: '1m' },
  sliding_window_log: { type: 'sliding_window_log', limit: 3, window: '1m' },
  sliding_window_counter: { type: 'sliding_window_counter', limit: 3, window: '1m', sub_window_count: 6 },
  token_bucket: { type: 'token_bucket', limit: 3, window: '3s' },
  leaky_bucket: { type: 'leaky_bucket', limit: 3, window: '3s' },
  quota: { type: 'quota', limit: 3, quota_period: '1h' },
  concurrency: { type: 'concurrency', max_concurrency: 2, lease_ttl: '1m' },
};

function buildPolicies(): Policy[] {
  const policies: Policy[] = [];
  for (const type of ALGORITHM_TYPES) {
    for (const action of LIMIT_ACTIONS) {
      policies.push(
        makePolicy({
          policy_id: `${type}.${action}`,
          scope: { service: `${type}.${action}`, user_id: '*' },
          algorithm: { ...ALGORITHMS[type], ...(action === 'sample' ? { sample_rate: 0.5 } : {}) },
          action,
          metadata: action === 'drop_low_priority' ? { min_severity: 'warn' } : {},
        }),
      );
    }
  }
  policies.push(
    makePolicy({
      policy_id: 'shadow-only',
      scope: { service: 'shadowed' },
      algorithm: { type: 'fixed_window', limit: 2, window: '1m' },
      enforcement_mode: 'shadow',
    }),
    makePolicy({
      policy_id: 'both-enforce',
      scope: { service: 'both' },
      algorithm: { type: 'sliding_window_log', limit: 3, window: '1m' },
    }),
    makePolicy({
      policy_id: 'both-shadow',
      scope: { service: 'both', tenant_id: '*' },
      algorithm: { type: 'fixed_window', limit: 1, window: '1m' },
      enforcement_mode: 'shadow',
    }),
    makePolicy({ policy_id: 'by-method', scope: { service: 'methods', method: 'post' }, algorithm: { type: 'fixed_window', limit: 3, window: '1m' } }),
    makePolicy({ policy_id: 'per-method', scope: { service: 'per-method', method: '*' }, algorithm: { type: 'fixed_window', limit: 1, window: '1m' } }),
    makePolicy({
      policy_id: 'expr',
      scope: { service: 'logs' },
      algorithm: { type: 'fixed_window', limit: 1, window: '1s' },
      metadata: { match_expr: 'severity in ["debug", "info"] && tags["env"] == "prod"' },
    }),
  );
  return policies;
}

/** The same pseudo-random sequence for each side. */
function seeded(): () => number {
  let state = 0x2545f491;
  return () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state / 0x1_0000_0000;
  };
}

type Operation = 'check' | 'acquire' | 'release';
const GRPC_METHOD: Record<Operation, string> = { check: 'CheckLimit', acquire: 'Acquire', release: 'Release' };

describe('HTTP / gRPC parity', () => {
  let grpcSide: GrpcFixture;
  let http: TestServer;
  let client: grpc.Client;
  let compared = 0;

  before(async () => {
    setLogLevel('silent');
    const policies = buildPolicies();
    grpcSide = await startGrpc(policies, { random: seeded() });
    // The HTTP side: same policies, its own counters, the gRPC side's clock, the same random sequence.
    const { decisions } = makeDecisions(policies, grpcSide.clock, seeded());
    const readiness = new Readiness();
    readiness.markReady();
    http = await serve(createApp({ decisions, readiness, maxBodyBytes: 1 << 20 }));
    client = rateLimitClient(grpcSide.target);
  });

  after(async () => {
    client?.close();
    await grpcSide?.close();
    await http?.close();
    setLogLevel('info');
  });

  /** Sends `body` over both transports at the same instant and demands identical decisions. */
  async function same(operation: Operation, body: Record<string, unknown>): Promise<Decision> {
    const overHttp = await postJson(`${http.url}/rl/v1/${operation}`, body);
    expect(overHttp.status, JSON.stringify(overHttp.body)).to.equal(200);
    const overGrpc = await unary<Decision>(client, GRPC_METHOD[operation], body);
    // proto3 sends no absent repeated field, and decoding with defaults reads it back as []: a one-layer
    // answer carries no `layers` on the wire, as over HTTP (the SDK reads it the same way).
    if (Array.isArray(overGrpc.layers) && overGrpc.layers.length === 0) delete overGrpc.layers;
    expect(overGrpc, `${operation} ${JSON.stringify(body)}`).to.deep.equal(overHttp.body);
    compared++;
    return overGrpc;
  }

  for (const type of ALGORITHM_TYPES.filter((t) => t !== 'concurrency')) {
    for (const action of LIMIT_ACTIONS) {
      it(`${type} / ${action}`, async () => {
        const service = `${type}.${action}`;
        const reasons = new Set<string>();
        for (let i = 0; i < 7; i++) {
          grpcSide.clock.now = T0 + 60_000 * 60 + i * 250;
          const body: Record<string, unknown> = {
            service,
            user_id: 'u1',
            severity: i % 2 === 0 ? 'error' : 'debug',
            quantity: i === 0 ? 2 : 1,
            tags: { env: 'prod' },
          };
          // The sample action draws per request_id when there is one, else from the random source.
          if (i % 3 !== 2) body.request_id = `req-${i}`;
          const decision = await same('check', body);
          reasons.add(decision.reason);
          expect(decision.matched_policy_id).to.equal(service);
        }
        expect([...reasons]).to.include.members(['within_limit', 'limit_exceeded']);
      });
    }
  }

  for (const action of LIMIT_ACTIONS) {
    it(`concurrency / ${action}`, async () => {
      const service = `concurrency.${action}`;
      const lease = (id?: string, severity = 'info') => ({ service, user_id: 'u1', severity, ...(id ? { request_id: id } : {}) });
      grpcSide.clock.now = T0 + 7_200_000;
      const reasons: string[] = [];
      const steps: [Operation, Record<string, unknown>][] = [
        ['acquire', lease('a')],
        ['acquire', lease('b', 'error')],
        ['acquire', lease('c')],
        ['acquire', lease('c', 'fatal')],
        ['acquire', lease('a')],
        ['release', lease('a')],
        ['release', lease('a')],
        ['acquire', lease()],
        ['release', lease()],
      ];
      for (const [operation, body] of steps) {
        grpcSide.clock.now += 1_000;
        reasons.push((await same(operation, body)).reason);
      }
      expect(reasons).to.include.members(['lease_acquired', 'limit_exceeded', 'lease_released', 'lease_not_found']);
    });
  }

  it('shadow mode, an enforce decision with a shadow policy beside it, match_expr and no match', async () => {
    grpcSide.clock.now = T0 + 3 * 3_600_000;
    const shadowed = [];
    for (let i = 0; i < 3; i++) shadowed.push(await same('check', { service: 'shadowed' }));
    expect(shadowed.map((d) => d.action)).to.deep.equal(['allow', 'allow', 'shadow_only']);
    expect(shadowed.every((d) => d.shadow_mode)).to.equal(true);

    for (let i = 0; i < 4; i++) await same('check', { service: 'both', tenant_id: 't' });
    const both = await same('check', { service: 'both', tenant_id: 't' });
    expect(both.metadata).to.deep.include({ shadow_policy_id: 'both-shadow', shadow_action: 'deny' });

    expect((await same('check', { service: 'logs', severity: 'debug', tags: { env: 'prod' } })).matched_policy_id).to.equal('expr');
    expect((await same('check', { service: 'logs', severity: 'debug', tags: { env: 'prod' } })).allowed).to.equal(false);
    expect((await same('check', { service: 'logs', severity: 'error', tags: { env: 'prod' } })).reason).to.equal('no_matching_policy');
    expect((await same('check', {})).reason).to.equal('no_matching_policy');
    for (const operation of ['acquire', 'release'] as const) {
      expect((await same(operation, { service: 'none' })).reason).to.equal('no_matching_policy');
    }
  });

  it('HTTP method names compare case-insensitively, other values exactly, alike on both', async () => {
    grpcSide.clock.now = T0 + 4 * 3_600_000;
    const spellings = ['POST', 'post', 'Post', 'pOST'];
    const byMethod = [];
    for (const method of spellings) byMethod.push(await same('check', { service: 'methods', method }));
    expect(byMethod.map((d) => d.matched_policy_id)).to.deep.equal(['by-method', 'by-method', 'by-method', 'by-method']);
    expect(byMethod.map((d) => d.reason)).to.deep.equal(['within_limit', 'within_limit', 'within_limit', 'limit_exceeded']);
    expect((await same('check', { service: 'methods', method: 'posts' })).reason).to.equal('no_matching_policy');
    // `method: "*"` counts by method: one counter for every spelling of POST, another for an unknown verb's exact spelling.
    expect((await same('check', { service: 'per-method', method: 'post' })).allowed).to.equal(true);
    expect((await same('check', { service: 'per-method', method: 'POST' })).allowed).to.equal(false);
    expect((await same('check', { service: 'per-method', method: 'purge' })).allowed).to.equal(true);
    expect((await same('check', { service: 'per-method', method: 'PURGE' })).allowed).to.equal(true);
  });

  it('rejects the same bad input with the same message (HTTP 400, gRPC INVALID_ARGUMENT)', async () => {
    const bad: Record<string, unknown>[] = [
      { signal_type: 'carrier-pigeon' },
      { quantity: -4 },
      { quantity: 9007199254740992 },
      { quantity: '9007199254740993' },
    ];
    for (const body of bad) {
      const overHttp = await postJson(`${http.url}/rl/v1/check`, body);
      expect(overHttp.status).to.equal(400);
      const error = await callError(client, 'CheckLimit', body);
      expect(error.code, JSON.stringify(body)).to.equal(grpc.status.INVALID_ARGUMENT);
      expect(error.details).to.equal(overHttp.body.error);
    }
  });

  it('compared every decision', () => {
    expect(compared).to.be.greaterThan((ALGORITHM_TYPES.length - 1) * LIMIT_ACTIONS.length * 7);
  });
});
