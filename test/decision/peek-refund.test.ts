import { expect } from 'chai';
import * as grpc from '@grpc/grpc-js';
import { DecisionService, type DecisionEvent } from '../../src/decision/decision-service.js';
import type { CounterStore } from '../../src/counters/counter-store.js';
import { CounterStoreUnavailableError, RlError } from '../../src/errors.js';
import type { RequestContext } from '../../src/model/request-context.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { Analytics } from '../../src/analytics/analytics.js';
import { Metrics } from '../../src/observability/metrics.js';
import { ObservabilityRecorder } from '../../src/analytics/recorder.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { forEachStore } from '../support/counter-stores.js';
import { HTTP_PATHS, serveDecisions } from '../support/http-listeners.js';
import { postJson, type TestServer } from '../support/http.js';
import { makePolicy } from '../support/policies.js';
import { callError, rateLimitClient, startGrpc, unary, type GrpcFixture } from '../grpc/helpers.js';

/**
 * Decision `window`, peek (`quantity: 0`) and refund at the DecisionService level (both counter
 * stores), and over both HTTP paths and gRPC (README "Calling it": peek and refund).
 */

const HOUR = 3_600_000;
const LIMIT = 10;

/** One policy per algorithm, selected by `service`; a long period so nothing resets during a test. */
const ALGORITHMS: { type: string; algorithm: Record<string, unknown>; window: number }[] = [
  { type: 'fixed_window', algorithm: { type: 'fixed_window', limit: LIMIT, window: '1h' }, window: HOUR },
  { type: 'sliding_window_log', algorithm: { type: 'sliding_window_log', limit: LIMIT, window: '1h' }, window: HOUR },
  { type: 'sliding_window_counter', algorithm: { type: 'sliding_window_counter', limit: LIMIT, window: '1h', sub_window_count: 4 }, window: HOUR },
  { type: 'token_bucket', algorithm: { type: 'token_bucket', limit: LIMIT, window: '1h' }, window: HOUR },
  { type: 'leaky_bucket', algorithm: { type: 'leaky_bucket', limit: LIMIT, window: '1h' }, window: HOUR },
  { type: 'quota', algorithm: { type: 'quota', limit: LIMIT, quota_period: '1h' }, window: HOUR },
];

function policies() {
  return [
    ...ALGORITHMS.map(({ type, algorithm }) => makePolicy({ policy_id: type, scope: { service: type }, algorithm })),
    makePolicy({ policy_id: 'fast-bucket', scope: { service: 'fast-bucket' }, algorithm: { type: 'token_bucket', limit: 10, window: '1s', burst: 20 } }),
    makePolicy({ policy_id: 'leases', scope: { service: 'leases' }, algorithm: { type: 'concurrency', max_concurrency: 2 } }),
    makePolicy({ policy_id: 'delayed', scope: { service: 'delayed' }, action: 'delay', algorithm: { type: 'fixed_window', limit: 1, window: '1h' } }),
    // An enforcing policy with a tighter shadow policy beside it, and a shadow policy alone.
    makePolicy({ policy_id: 'enforced', scope: { service: 'shadowed' }, algorithm: { type: 'fixed_window', limit: LIMIT, window: '1h' } }),
    makePolicy({ policy_id: 'beside', scope: { service: 'shadowed' }, enforcement_mode: 'shadow', algorithm: { type: 'fixed_window', limit: 2, window: '1h' } }),
    makePolicy({ policy_id: 'alone', scope: { service: 'shadow-only' }, enforcement_mode: 'shadow', algorithm: { type: 'quota', limit: 1, quota_period: '1h' } }),
  ];
}

const ctx = (service: string, quantity = 1, extra: Partial<RequestContext> = {}): RequestContext => ({ service, quantity, tags: {}, ...extra });

describe('DecisionService: window, peek and refund', () => {
  forEachStore((storeName, getStore) => {
    let decisions: DecisionService;
    let recorded: DecisionEvent[];
    beforeEach(() => {
      const { store, prefix, clock } = getStore();
      recorded = [];
      decisions = new DecisionService({
        policies: new LiveMatcher(policies()),
        counters: store,
        keyPrefix: prefix,
        recorder: { record: (event) => recorded.push(event) },
        now: storeName === 'memory' ? () => clock.now : undefined,
      });
    });

    it('every decision carries the window of its policy (0 for concurrency and no match)', async () => {
      for (const { type, window } of ALGORITHMS) expect((await decisions.check(ctx(type))).window, type).to.equal(window);
      // A bucket of 20 refilled at 10/s takes 2 s to fill.
      expect((await decisions.check(ctx('fast-bucket'))).window).to.equal(2_000);
      expect((await decisions.acquire(ctx('leases', 1, { request_id: 'w' }))).window).to.equal(0);
      expect((await decisions.check(ctx('nothing-matches'))).window).to.equal(0);
    });

    for (const { type } of ALGORITHMS) {
      it(`${type}: a peek after N consumptions reports what the next check leaves plus its cost, and is not recorded`, async () => {
        let last = await decisions.check(ctx(type));
        for (let i = 1; i < 3; i++) last = await decisions.check(ctx(type));
        recorded = [];
        const peek = await decisions.check(ctx(type, 0));
        expect(peek).to.deep.include({ allowed: true, matched_policy_id: type, reason: 'within_limit', window: HOUR });
        // reset_after is current: the memory store's clock stands still; Redis TIME has moved on a little.
        if (storeName === 'memory') expect(peek.reset_after).to.equal(last.reset_after);
        else expect(peek.reset_after).to.be.within(1, last.reset_after);
        expect(peek.metadata.peek).to.equal('true');
        expect(recorded, 'a peek is not a decision').to.have.length(0);
        const next = await decisions.check(ctx(type));
        expect(next.remaining, 'next check').to.equal(peek.remaining - 1);
        expect(recorded).to.have.length(1);
      });

      it(`${type}: a peek on an exhausted key is refused with retry_after > 0 and consumes nothing`, async () => {
        expect((await decisions.check(ctx(type, LIMIT))).allowed).to.equal(true);
        const first = await decisions.check(ctx(type, 0));
        expect(first).to.deep.include({ allowed: false, action: 'deny', remaining: 0, reason: 'limit_exceeded' });
        expect(first.retry_after).to.be.greaterThan(0);
        const second = await decisions.check(ctx(type, 0));
        expect(second.remaining).to.equal(first.remaining);
        // Nothing was consumed by the peeks: a refund of 1 admits exactly one more.
        await decisions.refund(ctx(type, 1));
        expect((await decisions.check(ctx(type))).allowed).to.equal(true);
        expect((await decisions.check(ctx(type))).allowed).to.equal(false);
      });

      it(`${type}: consume 10 of 10, refund 4, exactly 4 more admitted; a refund beyond the usage is capped`, async () => {
        expect((await decisions.check(ctx(type, LIMIT))).remaining).to.equal(0);
        const refund = await decisions.refund(ctx(type, 4));
        expect(refund).to.deep.include({ allowed: true, reason: 'refunded', remaining: 4, matched_policy_id: type });
        for (let i = 0; i < 4; i++) expect((await decisions.check(ctx(type))).allowed, `after refund #${i}`).to.equal(true);
        expect((await decisions.check(ctx(type))).allowed).to.equal(false);
        const capped = await decisions.refund(ctx(type, 1000));
        expect(capped.remaining, 'never below zero usage / above capacity').to.equal(LIMIT);
        expect(capped.reset_after, 'whole again: nothing left to reset').to.equal(0);
        expect(await decisions.check(ctx(type, 0)), 'a peek agrees').to.deep.include({ remaining: LIMIT, reset_after: 0 });
        expect((await decisions.check(ctx(type, LIMIT))).allowed).to.equal(true);
        expect((await decisions.check(ctx(type))).allowed).to.equal(false);
      });
    }

    it('a peek refused by a delay policy names the policy action', async () => {
      await decisions.check(ctx('delayed'));
      const peek = await decisions.check(ctx('delayed', 0));
      expect(peek).to.deep.include({ allowed: false, action: 'delay' });
      expect(peek.retry_after).to.be.greaterThan(0);
    });

    it('a token bucket is never refunded above its burst', async () => {
      const refund = await decisions.refund(ctx('fast-bucket', 50));
      expect(refund.remaining).to.equal(20);
      expect((await decisions.check(ctx('fast-bucket', 21))).allowed).to.equal(false);
    });

    it('a refund is counted as operation refund; refunds to concurrency policies are refused naming quantity', async () => {
      await decisions.refund(ctx('quota', 1));
      expect(recorded.map((e) => e.operation)).to.deep.equal(['refund']);
      const error = await decisions.refund(ctx('leases', 1)).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).to.be.instanceOf(RlError);
      expect((error as RlError).field).to.equal('quantity');
      expect((error as RlError).message).to.match(/concurrency policy "leases"/);
      expect(await decisions.refund(ctx('nothing-matches', 1))).to.deep.include({ allowed: true, reason: 'no_matching_policy' });
    });

    it('a peek and a refund reach the shadow policy beside the enforcing one', async () => {
      for (let i = 0; i < 3; i++) await decisions.check(ctx('shadowed'));
      recorded = [];
      const peek = await decisions.check(ctx('shadowed', 0));
      expect(peek).to.deep.include({ allowed: true, matched_policy_id: 'enforced', remaining: LIMIT - 3, shadow_mode: false });
      expect(peek.metadata).to.deep.equal({ shadow_policy_id: 'beside', shadow_action: 'deny', peek: 'true' });
      expect(recorded, 'a peek is not a decision, for the shadow policy either').to.have.length(0);

      const refund = await decisions.refund(ctx('shadowed', 3));
      expect(refund).to.deep.include({ allowed: true, reason: 'refunded', matched_policy_id: 'enforced', remaining: LIMIT });
      expect(refund.metadata).to.deep.equal({ shadow_policy_id: 'beside', shadow_action: 'allow' });
      expect(recorded.map((e) => [e.operation, e.shadow])).to.deep.equal([['refund', { policyId: 'beside', limited: false }]]);
      // The shadow counter got its 3 back too (it had counted only 2: capped at zero usage).
      expect((await decisions.check(ctx('shadowed', 0))).metadata.shadow_action).to.equal('allow');
      expect((await decisions.check(ctx('shadowed', 2))).metadata.shadow_action).to.equal('allow');
      expect((await decisions.check(ctx('shadowed'))).metadata.shadow_action).to.equal('deny');
    });

    it('a shadow policy alone: a peek never blocks, a refund gives back to it', async () => {
      expect(await decisions.check(ctx('shadow-only'))).to.deep.include({ allowed: true, action: 'allow', shadow_mode: true });
      const peek = await decisions.check(ctx('shadow-only', 0));
      expect(peek).to.deep.include({ allowed: true, action: 'shadow_only', reason: 'limit_exceeded', shadow_mode: true, remaining: 0 });
      expect(peek.retry_after).to.be.greaterThan(0);
      expect(peek.metadata).to.deep.equal({ peek: 'true' });
      const refund = await decisions.refund(ctx('shadow-only', 1));
      expect(refund).to.deep.include({ allowed: true, reason: 'refunded', shadow_mode: true, matched_policy_id: 'alone', remaining: 1 });
      expect(await decisions.check(ctx('shadow-only', 0))).to.deep.include({ allowed: true, action: 'allow', remaining: 1 });
    });

    it('a peek where only a concurrency policy matches: check never counts leases, so no policy matched', async () => {
      const peek = await decisions.check(ctx('leases', 0));
      expect(peek).to.deep.include({ allowed: true, reason: 'no_matching_policy', matched_policy_id: '', window: 0 });
      expect(peek.metadata).to.deep.equal({ peek: 'true' });
      expect(recorded, 'not recorded').to.have.length(0);
      // Nothing was taken: both lease slots are still free.
      expect((await decisions.acquire(ctx('leases', 1, { request_id: 'a' }))).remaining).to.equal(1);
      expect((await decisions.acquire(ctx('leases', 1, { request_id: 'b' }))).remaining).to.equal(0);
    });

    it('quantity 0 is a peek on check only', async () => {
      for (const operation of ['acquire', 'release', 'refund'] as const) {
        const error = await decisions[operation](ctx('quota', 0)).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect((error as RlError).field, operation).to.equal('quantity');
      }
    });
  });
});

describe('metrics and analytics: a peek is no decision, a refund is operation refund', () => {
  it('peeks move no series and no analytics total; a refund counts in rl_decisions_total only', async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const analytics = new Analytics();
    const counters = new MemoryCounterStore({ sweepIntervalMs: 0 });
    const decisions = new DecisionService({
      policies: new LiveMatcher(policies()),
      counters,
      keyPrefix: 'obs:',
      recorder: new ObservabilityRecorder(metrics, analytics),
    });
    try {
      await decisions.check(ctx('quota', LIMIT, { tenant_id: 'acme' }));
      for (let i = 0; i < 5; i++) await decisions.check(ctx('quota', 0, { tenant_id: 'acme' }));
      await decisions.check(ctx('nothing-matches', 0));
      await decisions.refund(ctx('quota', 2, { tenant_id: 'acme' }));
      const lines = (await metrics.exposition()).split('\n');
      for (const line of [
        'rl_decisions_total{operation="check",outcome="allowed"} 1',
        'rl_decisions_total{operation="check",outcome="denied"} 0',
        'rl_decisions_total{operation="refund",outcome="allowed"} 1',
        'rl_decision_duration_seconds_count 2',
        'rl_policy_cache_misses_total 0',
      ]) {
        expect(lines, line).to.include(line);
      }
      expect(analytics.summary()).to.deep.include({ total: 1, allowed: 1, denied: 0, shadow: 0 });
    } finally {
      await counters.close();
    }
  });
});

describe('peek and refund while the counter store is down', () => {
  const down = () => Promise.reject(new CounterStoreUnavailableError('down'));
  const deadStore: CounterStore = { consume: down, peek: down, refund: down, acquire: down, release: down, isHealthy: () => false, close: async () => {} };
  const closed = makePolicy({ policy_id: 'closed', scope: { service: 'closed' }, failure_mode: 'fail_closed', algorithm: { type: 'quota', limit: 5, quota_period: '1h' } });

  it('a peek answers by the failure mode and is not recorded; a refund says the units were not taken back', async () => {
    const events: DecisionEvent[] = [];
    const decisions = new DecisionService({ policies: new LiveMatcher([closed]), counters: deadStore, keyPrefix: 'dead:', recorder: { record: (e) => events.push(e) } });
    const peek = await decisions.check(ctx('closed', 0));
    expect(peek).to.deep.include({ allowed: false, action: 'deny', reason: 'counter_store_unavailable' });
    expect(peek.metadata).to.deep.equal({ peek: 'true' });
    expect(events).to.have.length(0);
    const refund = await decisions.refund(ctx('closed', 2));
    expect(refund).to.deep.include({ allowed: true, action: 'allow', reason: 'counter_store_unavailable', matched_policy_id: 'closed' });
    expect(events.map((e) => [e.operation, e.failureMode])).to.deep.equal([['refund', undefined]]);
  });
});

for (const [path, build] of HTTP_PATHS) {
  describe(`HTTP refund and peek (${path})`, () => {
    let server: TestServer;
    beforeEach(async () => {
      server = await serveDecisions(build, policies(), 64 * 1024);
    });
    afterEach(() => server.close());

    it('POST /rl/v1/refund gives units back; peek reports without consuming; decisions carry window', async () => {
      const used = await postJson(`${server.url}/rl/v1/check`, { service: 'quota', quantity: 10 });
      expect(used.body).to.deep.include({ allowed: true, remaining: 0, window: HOUR });
      const refund = await postJson(`${server.url}/rl/v1/refund`, { service: 'quota', quantity: 3 });
      expect(refund.status).to.equal(200);
      expect(refund.body).to.deep.include({ allowed: true, reason: 'refunded', remaining: 3, window: HOUR });
      const peek = await postJson(`${server.url}/rl/v1/check`, { service: 'quota', quantity: 0 });
      expect(peek.body).to.deep.include({ allowed: true, remaining: 3, metadata: { peek: 'true' } });
      expect((await postJson(`${server.url}/rl/v1/check`, { service: 'quota', quantity: 0 })).body.remaining).to.equal(3);
    });

    it('refund errors name quantity: missing, 0, and a concurrency policy', async () => {
      for (const body of [{ service: 'quota' }, { service: 'quota', quantity: 0 }, { service: 'leases', quantity: 1 }]) {
        const answer = await postJson(`${server.url}/rl/v1/refund`, body);
        expect(answer.status, JSON.stringify(body)).to.equal(400);
        expect(answer.body.field ?? answer.body.error).to.match(/quantity/);
      }
      const acquire = await postJson(`${server.url}/rl/v1/acquire`, { service: 'leases', quantity: 0 });
      expect(acquire.status).to.equal(400);
    });
  });
}

describe('gRPC Refund and peek', () => {
  let fixture: GrpcFixture;
  let client: grpc.Client;
  beforeEach(async () => {
    fixture = await startGrpc(policies());
    client = rateLimitClient(fixture.target);
  });
  afterEach(async () => {
    client.close();
    await fixture.close();
  });

  it('Refund, an explicit quantity 0 on CheckLimit as a peek, window on every answer', async () => {
    const used = await unary(client, 'CheckLimit', { service: 'quota', quantity: 10 });
    expect(used).to.deep.include({ allowed: true, remaining: 0, window: HOUR });
    const refund = await unary(client, 'Refund', { service: 'quota', quantity: 4 });
    expect(refund).to.deep.include({ allowed: true, reason: 'refunded', remaining: 4, window: HOUR });
    const peek = await unary(client, 'CheckLimit', { service: 'quota', quantity: 0 });
    expect(peek).to.deep.include({ allowed: true, remaining: 4 });
    expect(peek.metadata).to.deep.equal({ peek: 'true' });
    // Unset quantity is 1, as before.
    expect((await unary(client, 'CheckLimit', { service: 'quota' })).remaining).to.equal(3);
  });

  it('Refund without a quantity, or to a concurrency policy, is INVALID_ARGUMENT naming quantity', async () => {
    for (const request of [{ service: 'quota' }, { service: 'leases', quantity: 1 }]) {
      const error = await callError(client, 'Refund', request);
      expect(error.code).to.equal(grpc.status.INVALID_ARGUMENT);
      expect(error.details).to.match(/^quantity/);
    }
  });
});
