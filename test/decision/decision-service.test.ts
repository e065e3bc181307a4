import { expect } from 'chai';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import type { CounterStore } from '../../src/counters/counter-store.js';
import { DecisionService, type DecisionEvent } from '../../src/decision/decision-service.js';
import { slotIdOf } from '../../src/decision/slot-id.js';
import { CounterStoreUnavailableError } from '../../src/errors.js';
import { parseRequestContext } from '../../src/model/request-context.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { makePolicy } from '../support/policies.js';
import { awaitingOnly } from '../support/async-store.js';

const T0 = Date.UTC(2030, 0, 1);

function fixedWindow(id: string, limit: number, extra: Record<string, unknown> = {}) {
  return makePolicy({ policy_id: id, scope: { service: 'api' }, algorithm: { type: 'fixed_window', limit, window: '1m' }, ...extra });
}

function setup(policies: ReturnType<typeof makePolicy>[], options: { counters?: CounterStore; random?: () => number } = {}) {
  let now = T0;
  const events: DecisionEvent[] = [];
  const storeErrors: Error[] = [];
  const counters = options.counters ?? new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0 });
  const service = new DecisionService({
    policies: new LiveMatcher(policies),
    counters,
    keyPrefix: 'test:',
    recorder: { record: (e) => events.push(e) },
    onCounterStoreError: (e) => storeErrors.push(e),
    now: () => now,
    random: options.random,
  });
  return {
    service,
    events,
    storeErrors,
    advance: (ms: number) => (now += ms),
    check: (body: Record<string, unknown>) => service.check(parseRequestContext(body)),
    acquire: (body: Record<string, unknown>) => service.acquire(parseRequestContext(body)),
    release: (body: Record<string, unknown>) => service.release(parseRequestContext(body)),
  };
}

/** A counter store whose backend is down: every operation fails as the Redis store does. */
const deadStore: CounterStore = {
  consume: () => Promise.reject(new CounterStoreUnavailableError('down')),
  peek: () => Promise.reject(new CounterStoreUnavailableError('down')),
  refund: () => Promise.reject(new CounterStoreUnavailableError('down')),
  acquire: () => Promise.reject(new CounterStoreUnavailableError('down')),
  release: () => Promise.reject(new CounterStoreUnavailableError('down')),
  isHealthy: () => false,
  close: async () => {},
};

/** A store that answers synchronously by throwing `error` (and rejects with it on the async path). */
function failingSyncStore(error: () => Error): CounterStore {
  const fail = () => {
    throw error();
  };
  return {
    sync: { clock: Date.now, consume: fail, peek: fail, refund: fail, acquire: fail, release: fail },
    consume: () => Promise.reject(error()),
    peek: () => Promise.reject(error()),
    refund: () => Promise.reject(error()),
    acquire: () => Promise.reject(error()),
    release: () => Promise.reject(error()),
    isHealthy: () => false,
    close: async () => {},
  };
}

describe('DecisionService', () => {
  it('allows with no_matching_policy when nothing matches', async () => {
    const { check } = setup([fixedWindow('p', 1)]);
    const d = await check({ service: 'other' });
    expect(d).to.deep.include({ allowed: true, action: 'allow', reason: 'no_matching_policy', matched_policy_id: '' });
  });

  it('admits exactly the limit, then denies with retry_after, limit and remaining', async () => {
    const { check, advance } = setup([fixedWindow('p', 3)]);
    const remaining: number[] = [];
    for (let i = 0; i < 3; i++) {
      const d = await check({ service: 'api' });
      expect(d).to.deep.include({ allowed: true, action: 'allow', reason: 'within_limit', matched_policy_id: 'p', limit: 3 });
      remaining.push(d.remaining);
    }
    expect(remaining).to.deep.equal([2, 1, 0]);
    advance(15_000);
    const denied = await check({ service: 'api' });
    expect(denied).to.deep.include({ allowed: false, action: 'deny', reason: 'limit_exceeded', remaining: 0 });
    expect(denied.retry_after).to.equal(45_000);
    expect(denied.reset_after).to.equal(45_000);
    advance(45_000);
    expect((await check({ service: 'api' })).allowed).to.equal(true);
  });

  it('charges quantity × cost_per_request, all or nothing', async () => {
    const p = makePolicy({
      policy_id: 'tokens', scope: { service: 'llm' },
      algorithm: { type: 'quota', limit: 100, quota_period: '1h', cost_per_request: 10 },
    });
    const { check } = setup([p]);
    expect(await check({ service: 'llm', quantity: 3 })).to.deep.include({ allowed: true, remaining: 70, limit: 100 });
    expect(await check({ service: 'llm', quantity: 8 })).to.deep.include({ allowed: false, remaining: 70 });
    expect(await check({ service: 'llm', quantity: 7 })).to.deep.include({ allowed: true, remaining: 0 });
  });

  it('keeps a separate counter per value of a * scope field', async () => {
    const p = makePolicy({ policy_id: 'per-user', scope: { service: 'api', user_id: '*' }, algorithm: { type: 'fixed_window', limit: 1, window: '1m' } });
    const { check } = setup([p]);
    expect((await check({ service: 'api', user_id: 'alice' })).allowed).to.equal(true);
    expect((await check({ service: 'api', user_id: 'alice' })).allowed).to.equal(false);
    expect((await check({ service: 'api', user_id: 'bob' })).allowed).to.equal(true);
    // `*` requires the field: without user_id the policy does not match.
    expect((await check({ service: 'api' })).reason).to.equal('no_matching_policy');
  });

  describe('actions when the limit is exceeded', () => {
    async function overLimit(extra: Record<string, unknown>, body: Record<string, unknown> = {}, random?: () => number) {
      const { check } = setup([fixedWindow('p', 1, extra)], { random });
      await check({ service: 'api', ...body });
      return check({ service: 'api', ...body });
    }

    it('deny: not allowed, retry_after set', async () => {
      const d = await overLimit({ action: 'deny' });
      expect(d).to.deep.include({ allowed: false, action: 'deny', reason: 'limit_exceeded' });
      expect(d.retry_after).to.be.greaterThan(0);
    });

    it('delay: not allowed, retry_after = when it would conform', async () => {
      const d = await overLimit({ action: 'delay' });
      expect(d).to.deep.include({ allowed: false, action: 'delay', reason: 'limit_exceeded', retry_after: 60_000 });
    });

    it('drop: not allowed, no retry', async () => {
      expect(await overLimit({ action: 'drop' })).to.deep.include({ allowed: false, action: 'drop', retry_after: 0 });
    });

    it('downgrade: allowed, caller degrades', async () => {
      expect(await overLimit({ action: 'downgrade' })).to.deep.include({ allowed: true, action: 'downgrade', reason: 'limit_exceeded' });
    });

    it('sample: stable per request_id, random draw otherwise', async () => {
      const all = { action: 'sample', algorithm: { type: 'fixed_window', limit: 1, window: '1m', sample_rate: 1 } };
      const none = { action: 'sample', algorithm: { type: 'fixed_window', limit: 1, window: '1m', sample_rate: 0 } };
      expect(await overLimit(all, { request_id: 'r1' })).to.deep.include({ allowed: true, action: 'sample' });
      expect(await overLimit(none, { request_id: 'r1' })).to.deep.include({ allowed: false, action: 'sample' });
      const half = { action: 'sample', algorithm: { type: 'fixed_window', limit: 1, window: '1m', sample_rate: 0.5 } };
      expect(await overLimit(half, {}, () => 0.49)).to.deep.include({ allowed: true });
      expect(await overLimit(half, {}, () => 0.51)).to.deep.include({ allowed: false });

      // Same request_id, same answer, every time; different ids split near the rate.
      const { check } = setup([fixedWindow('p', 1, half)]);
      await check({ service: 'api' });
      const first = await check({ service: 'api', request_id: 'stable' });
      for (let i = 0; i < 5; i++) expect((await check({ service: 'api', request_id: 'stable' })).allowed).to.equal(first.allowed);
      let allowed = 0;
      for (let i = 0; i < 1000; i++) if ((await check({ service: 'api', request_id: `id-${i}` })).allowed) allowed++;
      expect(allowed).to.be.within(400, 600);
    });

    it('drop_low_priority: drops below min_severity (default warn), keeps the rest', async () => {
      const extra = { action: 'drop_low_priority' };
      expect(await overLimit(extra, { severity: 'debug' })).to.deep.include({ allowed: false, action: 'drop_low_priority' });
      expect(await overLimit(extra, { severity: 'info' })).to.deep.include({ allowed: false });
      expect(await overLimit(extra, { severity: 'warn' })).to.deep.include({ allowed: true, action: 'drop_low_priority' });
      expect(await overLimit(extra, { severity: 'fatal' })).to.deep.include({ allowed: true });
      expect(await overLimit(extra, {})).to.deep.include({ allowed: false });
      const strict = { action: 'drop_low_priority', metadata: { min_severity: 'error' } };
      expect(await overLimit(strict, { severity: 'warn' })).to.deep.include({ allowed: false });
      expect(await overLimit(strict, { severity: 'error' })).to.deep.include({ allowed: true });
    });
  });

  describe('shadow mode', () => {
    it('evaluates the shadow policy beside the enforcing one without changing its decision', async () => {
      const enforce = fixedWindow('enforce', 5);
      const shadow = fixedWindow('shadow', 1, { enforcement_mode: 'shadow' });
      const { check, events } = setup([enforce, shadow]);
      const first = await check({ service: 'api' });
      expect(first).to.deep.include({ allowed: true, matched_policy_id: 'enforce', shadow_mode: false });
      expect(first.metadata).to.deep.equal({ shadow_policy_id: 'shadow', shadow_action: 'allow' });
      const second = await check({ service: 'api' });
      expect(second).to.deep.include({ allowed: true, matched_policy_id: 'enforce', remaining: 3 });
      expect(second.metadata).to.deep.equal({ shadow_policy_id: 'shadow', shadow_action: 'deny' });
      expect(events[1].shadow).to.deep.equal({ policyId: 'shadow', limited: true });
    });

    it('answers from the shadow policy when no enforcing policy matches, never blocking', async () => {
      const { check } = setup([fixedWindow('shadow', 1, { enforcement_mode: 'shadow' })]);
      expect(await check({ service: 'api' })).to.deep.include({
        allowed: true, action: 'allow', shadow_mode: true, matched_policy_id: 'shadow', reason: 'within_limit', limit: 1,
      });
      expect(await check({ service: 'api' })).to.deep.include({
        allowed: true, action: 'shadow_only', shadow_mode: true, reason: 'limit_exceeded',
      });
    });
  });

  describe('leases', () => {
    const lease = () =>
      makePolicy({ policy_id: 'workers', scope: { job_type: 'export' }, algorithm: { type: 'concurrency', max_concurrency: 2, lease_ttl: '30s' } });

    it('acquires up to max_concurrency, denies beyond, releases and frees the slot', async () => {
      const { acquire, release, advance } = setup([lease()]);
      const a = await acquire({ job_type: 'export', request_id: 'a' });
      expect(a).to.deep.include({ allowed: true, reason: 'lease_acquired', remaining: 1, matched_policy_id: 'workers', limit: 2 });
      expect(a.metadata.lease_id).to.equal('a');
      advance(1000);
      await acquire({ job_type: 'export', request_id: 'b' });
      const full = await acquire({ job_type: 'export', request_id: 'c' });
      expect(full).to.deep.include({ allowed: false, action: 'deny', reason: 'limit_exceeded', remaining: 0 });
      expect(full.retry_after).to.equal(29_000); // until lease "a" expires
      expect(await release({ job_type: 'export', request_id: 'a' })).to.deep.include({ allowed: true, reason: 'lease_released', remaining: 1 });
      expect(await release({ job_type: 'export', request_id: 'a' })).to.deep.include({ allowed: true, reason: 'lease_not_found' });
      expect((await acquire({ job_type: 'export', request_id: 'c' })).allowed).to.equal(true);
    });

    it('names a lease without request_id by a digest of its identifying fields', async () => {
      const { acquire, release } = setup([lease()]);
      const body = { job_type: 'export', org_id: 'o1', user_id: 'u1', signal_type: 'job', operation: 'run' };
      const a = await acquire(body);
      expect(a.metadata.lease_id).to.equal(slotIdOf(parseRequestContext(body)));
      expect((await acquire(body)).remaining).to.equal(1); // re-acquire refreshes, takes no second slot
      expect(await release(body)).to.deep.include({ reason: 'lease_released', remaining: 2 });
    });

    it('holds a lease given by request_id in its organisation: another organisation cannot release it', async () => {
      // A policy without org_id in its scope is shared by every organisation (a platform's global one).
      const { acquire, release } = setup([lease()]);
      const held = await acquire({ job_type: 'export', org_id: 'team-b', request_id: 'r1' });
      expect(held.metadata.lease_id).to.equal('r1');
      await acquire({ job_type: 'export', org_id: 'team-b', request_id: 'r2' });
      expect(await release({ job_type: 'export', org_id: 'team-a', request_id: 'r1' })).to.deep.include({ reason: 'lease_not_found' });
      expect((await acquire({ job_type: 'export', org_id: 'team-a', request_id: 'r3' })).allowed).to.equal(false);
      expect(await release({ job_type: 'export', org_id: 'team-b', request_id: 'r1' })).to.deep.include({ reason: 'lease_released', remaining: 1 });
    });

    it('keeps check and acquire families apart', async () => {
      const { check, acquire } = setup([lease(), fixedWindow('rate', 1, { scope: { job_type: 'export' } })]);
      expect((await check({ job_type: 'export' })).matched_policy_id).to.equal('rate');
      expect((await acquire({ job_type: 'export' })).matched_policy_id).to.equal('workers');
    });
  });

  describe('counter store failure', () => {
    it('fail_open allows and fail_closed denies, both with counter_store_unavailable', async () => {
      const open = setup([fixedWindow('p', 1, { failure_mode: 'fail_open' })], { counters: deadStore });
      expect(await open.check({ service: 'api' })).to.deep.include({ allowed: true, action: 'allow', reason: 'counter_store_unavailable', matched_policy_id: 'p' });
      expect(open.events[0].failureMode).to.equal('fail_open');
      expect(open.storeErrors).to.have.length(1);
      const closed = setup([fixedWindow('p', 1, { failure_mode: 'fail_closed' })], { counters: deadStore });
      expect(await closed.check({ service: 'api' })).to.deep.include({ allowed: false, action: 'deny', reason: 'counter_store_unavailable' });
      expect(await closed.acquire({ service: 'api' })).to.deep.include({ reason: 'no_matching_policy' });
    });

    it('lets a shadow policy fail without touching the decision', async () => {
      const { check } = setup([fixedWindow('shadow', 1, { enforcement_mode: 'shadow', failure_mode: 'fail_closed' })], { counters: deadStore });
      expect(await check({ service: 'api' })).to.deep.include({ allowed: true, shadow_mode: true, reason: 'counter_store_unavailable' });
    });
  });

  it('records every decision with its duration', async () => {
    const { check, events } = setup([fixedWindow('p', 1)]);
    await check({ service: 'api', tenant_id: 't1' });
    await check({ service: 'nope' });
    expect(events.map((e) => [e.operation, e.decision.reason])).to.deep.equal([
      ['check', 'within_limit'],
      ['check', 'no_matching_policy'],
    ]);
    expect(events[0].ctx.tenant_id).to.equal('t1');
    expect(events[0].durationSeconds).to.be.a('number').and.to.be.at.least(0);
  });

  describe('synchronous store path (memory) and awaiting path (Redis)', () => {
    const policies = () => [
      fixedWindow('per-user', 3, { scope: { service: 'api', user_id: '*' } }),
      fixedWindow('per-user-shadow', 2, { scope: { service: 'api', user_id: '*' }, enforcement_mode: 'shadow' }),
      fixedWindow('per-pair', 2, { scope: { service: 'pairs', user_id: '*', api_key: '*' }, action: 'delay' }),
      fixedWindow('shadow-only', 1, { scope: { service: 'quiet' }, enforcement_mode: 'shadow' }),
      makePolicy({ policy_id: 'tokens', scope: { service: 'llm', tenant_id: '*' }, algorithm: { type: 'token_bucket', limit: 5, window: '5s' } }),
      makePolicy({ policy_id: 'workers', scope: { job_type: 'export' }, algorithm: { type: 'concurrency', max_concurrency: 2, lease_ttl: '30s' } }),
    ];

    it('gives the same decisions and records the same events on both', async () => {
      const run = async (counters: (now: () => number) => CounterStore) => {
        let now = T0 + 123;
        const clock = () => now;
        const events: DecisionEvent[] = [];
        const service = new DecisionService({
          policies: new LiveMatcher(policies()),
          counters: counters(clock),
          keyPrefix: 'test:',
          recorder: { record: (e) => events.push(e) },
          now: clock,
          random: () => 0.5,
        });
        const answers: unknown[] = [];
        for (let i = 0; i < 60; i++) {
          const user = `u${i % 4}`;
          const body = [
            { service: 'api', user_id: user },
            { service: 'pairs', user_id: user, api_key: `k${i % 2}` },
            { service: 'quiet' },
            { service: 'llm', tenant_id: `t${i % 3}`, quantity: 1 + (i % 3) },
            { service: 'other' },
          ][i % 5];
          answers.push(await service.check(parseRequestContext(body)));
          if (i % 7 === 0) answers.push(await service.acquire(parseRequestContext({ job_type: 'export', request_id: `job-${i % 3}` })));
          if (i % 11 === 0) answers.push(await service.release(parseRequestContext({ job_type: 'export', request_id: `job-${i % 3}` })));
          now += 250 * (i % 4);
        }
        return { answers, events: events.map((e) => ({ ...e, durationSeconds: 0 })) };
      };
      const memory = (clock: () => number) => new MemoryCounterStore({ now: clock, sweepIntervalMs: 0 });
      const viaSync = await run(memory);
      const viaAwait = await run((clock) => awaitingOnly(memory(clock)));
      expect(viaSync.answers.map((d) => (d as { reason: string }).reason)).to.include.members(['within_limit', 'limit_exceeded', 'lease_acquired', 'no_matching_policy']);
      expect(viaSync).to.deep.equal(viaAwait);
    });

    it('returns a promise on both, already settled on the synchronous one', async () => {
      const { service } = setup([fixedWindow('p', 1)]);
      const pending = service.check(parseRequestContext({ service: 'api' }));
      expect(pending).to.be.instanceOf(Promise);
      let settled = false;
      void pending.then(() => (settled = true));
      await Promise.resolve();
      expect(settled).to.equal(true);
    });

    it('decideNow answers with a Decision on the synchronous path and a promise on the awaiting one, slot ids included', async () => {
      const lease = makePolicy({ policy_id: 'workers', scope: { job_type: 'export' }, algorithm: { type: 'concurrency', max_concurrency: 1, lease_ttl: '30s' } });
      const sync = setup([fixedWindow('p', 1), lease]).service;
      const awaiting = setup([fixedWindow('p', 1), lease], { counters: awaitingOnly(new MemoryCounterStore({ sweepIntervalMs: 0 })) }).service;
      const job = parseRequestContext({ job_type: 'export', request_id: 'job-1' });
      for (const service of [sync, awaiting]) {
        const answers = [
          service.decideNow('check', parseRequestContext({ service: 'api' })),
          service.decideNow('check', parseRequestContext({ service: 'api' })),
          service.decideNow('acquire', job),
          service.decideNow('release', job),
          service.decideNow('release', parseRequestContext({ job_type: 'none' })),
        ];
        expect(answers.every((a) => a instanceof Promise)).to.equal(service === awaiting);
        const decisions = await Promise.all(answers);
        expect(decisions.map((d) => d.reason)).to.deep.equal(['within_limit', 'limit_exceeded', 'lease_acquired', 'lease_released', 'no_matching_policy']);
        expect(decisions.map((d) => d.metadata.lease_id)).to.deep.equal([undefined, undefined, 'job-1', 'job-1', undefined]);
      }
    });

    it('lets the failure mode decide when a synchronous store is unavailable, exactly as on the awaiting path', async () => {
      const unavailable = () => new CounterStoreUnavailableError('down');
      for (const counters of [failingSyncStore(unavailable), deadStore]) {
        const open = setup([fixedWindow('p', 1, { failure_mode: 'fail_open' }), fixedWindow('s', 1, { enforcement_mode: 'shadow' })], { counters });
        const d = await open.check({ service: 'api' });
        expect(d).to.deep.include({ allowed: true, action: 'allow', reason: 'counter_store_unavailable', matched_policy_id: 'p', limit: 1 });
        expect(d.metadata).to.deep.equal({ shadow_policy_id: 's', shadow_action: 'allow' });
        expect(open.events[0].failureMode).to.equal('fail_open');
        expect(open.events[0].shadow).to.deep.equal({ policyId: 's', limited: false });
        expect(open.storeErrors).to.have.length(2);
        const closed = setup([fixedWindow('p', 1, { failure_mode: 'fail_closed' })], { counters });
        expect(await closed.check({ service: 'api' })).to.deep.include({ allowed: false, action: 'deny', reason: 'counter_store_unavailable' });
      }
    });

    it('rejects (never throws) when the store fails in a way no failure mode covers', async () => {
      for (const counters of [failingSyncStore(() => new TypeError('bug')), awaitingOnly(new MemoryCounterStore({ sweepIntervalMs: 0 }))]) {
        const { service, storeErrors } = setup([fixedWindow('p', 1)], { counters });
        if (!counters.sync) (counters as { consume: CounterStore['consume'] }).consume = () => Promise.reject(new TypeError('bug'));
        let pending: Promise<unknown> | undefined;
        expect(() => (pending = service.check(parseRequestContext({ service: 'api' })))).to.not.throw();
        const error = await pending!.then(() => undefined, (e: unknown) => e);
        expect(error).to.be.instanceOf(TypeError);
        expect(storeErrors).to.have.length(0);
      }
    });

    it('reads a clock it shares with the store once per decision', async () => {
      let reads = 0;
      const clock = () => (reads++, T0);
      const service = new DecisionService({
        policies: new LiveMatcher([fixedWindow('p', 5)]),
        counters: new MemoryCounterStore({ now: clock, sweepIntervalMs: 0 }),
        keyPrefix: 'test:',
        now: clock,
      });
      expect((await service.check(parseRequestContext({ service: 'api' }))).remaining).to.equal(4);
      expect(reads).to.equal(1);
      // Separate clocks (tests inject them): the store keeps reading its own.
      let storeReads = 0;
      const separate = new DecisionService({
        policies: new LiveMatcher([fixedWindow('p', 5)]),
        counters: new MemoryCounterStore({ now: () => (storeReads++, T0), sweepIntervalMs: 0 }),
        keyPrefix: 'test:',
        now: () => T0,
      });
      await separate.check(parseRequestContext({ service: 'api' }));
      expect(storeReads).to.equal(1);
    });
  });

  it('counts on the counters of the new policies after a policy change', async () => {
    const policies = new LiveMatcher([fixedWindow('p', 2, { scope: { service: 'api', user_id: '*' } })]);
    const service = new DecisionService({ policies, counters: new MemoryCounterStore({ sweepIntervalMs: 0 }), keyPrefix: 'test:', now: () => T0 });
    const check = () => service.check(parseRequestContext({ service: 'api', user_id: 'u', api_key: 'u' }));
    expect((await check()).remaining).to.equal(1);
    // Same policy id, another `*` field with the same value: a different counter.
    policies.replace([fixedWindow('p', 2, { scope: { service: 'api', api_key: '*' } })]);
    expect((await check()).remaining).to.equal(1);
    // Back to the first: its counter kept counting.
    policies.replace([fixedWindow('p', 2, { scope: { service: 'api', user_id: '*' } })]);
    expect((await check()).remaining).to.equal(0);
  });
});
