/**
 * Process leases inside DecisionService (docs/distribution.md "Process leases below a region, and sidecars"), over the emulator as an awaiting
 * store that can lend units (as Redis does, without the network): leased answers carry
 * metadata.lease "local"; a policy change, drain and max_hold idle give the unspent units back; the deny
 * cache answers a leased refusal as any other; a policy without a lease is decided by the store.
 */
import { expect } from 'chai';
import { CounterStoreUnavailableError } from '../../src/errors.js';
import type { RateSpec } from '../../src/counters/counter-spec.js';
import { counterKeys } from '../../src/counters/keys.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { parseRequestContext } from '../../src/model/request-context.js';
import type { Policy } from '../../src/policy/types.js';
import { awaitingOnly } from '../support/async-store.js';
import { makePolicy } from '../support/policies.js';

const leased = (limit: number, version = 1): Policy => ({
  ...makePolicy({
    policy_id: 'leased',
    scope: { service: 'api' },
    algorithm: { type: 'quota', limit, quota_period: '1h' },
    lease: { max_units: 20, max_hold: '1s' },
  }),
  version,
});
const plain = makePolicy({ policy_id: 'plain', scope: { service: 'plain' }, algorithm: { type: 'quota', limit: 1000, quota_period: '1h' } });
const SPEC = (limit: number): RateSpec => ({ type: 'quota', limit, periodMs: 3_600_000 });

function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

describe('process leases in DecisionService', () => {
  let emulator: MemoryCounterStore;
  let matcher: LiveMatcher;
  let service: DecisionService;
  const api = parseRequestContext({ service: 'api' });
  const used = async (limit: number) => limit - (await emulator.peek(counterKeys('t:', 'leased', SPEC(limit), []), SPEC(limit))).remaining;

  beforeEach(() => {
    emulator = new MemoryCounterStore({ sweepIntervalMs: 0 });
    matcher = new LiveMatcher([leased(1000), plain]);
    service = new DecisionService({ policies: matcher, counters: awaitingOnly(emulator, { lend: true }), keyPrefix: 't:' });
  });
  afterEach(async () => {
    await service.letGoLeases();
    await emulator.close();
  });

  it('answers a leased counter from units held (metadata.lease "local"), a plain one from the store', async () => {
    const decisions = [];
    for (let i = 0; i < 30; i++) decisions.push(await service.check(api));
    expect(decisions.every((d) => d.allowed && d.metadata.lease === 'local')).to.equal(true);
    // Units were taken ahead: the counter counts more than was admitted.
    expect(await used(1000)).to.be.greaterThan(30);
    // Most answers came without waiting: decideNow answers synchronously while units are held.
    let sync = 0;
    for (let i = 0; i < 20; i++) if (!(service.decideNow('check', api) instanceof Promise)) sync++;
    expect(sync).to.be.greaterThan(10);
    const other = await service.check(parseRequestContext({ service: 'plain' }));
    expect(other.matched_policy_id).to.equal('plain');
    expect(other.metadata.lease).to.equal(undefined);
  });

  it('a policy change lets go: the unspent units go back at once', async () => {
    for (let i = 0; i < 30; i++) await service.check(api);
    await settle();
    expect(await used(1000)).to.be.greaterThan(30);
    matcher.apply('leased', leased(1000, 2));
    await settle();
    await settle();
    expect(await used(1000)).to.equal(30);
    expect(service.leases?.size).to.equal(0);
  });

  it('drain (letGoLeases) gives every unspent unit back; no lease is taken afterwards', async () => {
    for (let i = 0; i < 25; i++) await service.check(api);
    await service.letGoLeases();
    expect(await used(1000)).to.equal(25);
    // After drain the store decides alone (exact), still correct.
    const after = await service.check(api);
    expect(after.allowed).to.equal(true);
    expect(after.metadata.lease).to.equal(undefined);
    expect(await used(1000)).to.equal(26);
  });

  it('never over on a small limit, and the refusal is answered from the deny cache afterwards', async () => {
    matcher.apply('leased', leased(7, 2));
    const answers = [];
    for (let i = 0; i < 15; i++) answers.push(await service.check(api));
    expect(answers.filter((d) => d.allowed)).to.have.length(7);
    const refused = answers.filter((d) => !d.allowed);
    expect(refused.every((d) => d.reason === 'limit_exceeded' && d.retry_after > 0)).to.equal(true);
    expect(service.denyCache?.size ?? 0).to.be.greaterThan(0);
    expect(await used(7)).to.equal(7);
  });

  it('a holder that only answered peeks is let go after max_hold too (no holder outlives its use)', async () => {
    let now = Date.UTC(2030, 0, 1);
    const timers: (() => void)[] = [];
    const { ProcessLeases } = await import('../../src/lease/process-leases.js');
    const leases = new ProcessLeases({
      store: awaitingOnly(emulator, { lend: true }) as never,
      maxWaitMs: 100,
      takeTimeoutMs: 100,
      clock: { now: () => now, setTimer: (fn) => timers.push(fn), clearTimer: () => undefined },
    });
    const compiled = matcher.current().get('leased')!;
    const ops = leases.operationsFor(['k-peek'], compiled)!;
    await ops.peek(['k-peek'], compiled.spec);
    expect(leases.size).to.equal(1);
    now += 1000;
    for (const fire of timers.splice(0)) fire();
    await settle();
    expect(leases.size).to.equal(0);
  });

  it('a refill slower than RL_LEASE_MAX_WAIT_MS: refused with reason lease_wait_timeout and retry_after ≤ max_hold, even under fail_open (a slow parent is not a failed one)', async () => {
    const open = { ...leased(1000), failure_mode: 'fail_open' as const };
    const takes: (() => void)[] = [];
    const slow = awaitingOnly(emulator, { lend: true });
    const take = slow.take!;
    slow.take = (...args) => new Promise((resolve, reject) => takes.push(() => take(...args).then(resolve, reject)));
    const waiting = new DecisionService({ policies: new LiveMatcher([open]), counters: slow, keyPrefix: 't:', leases: { maxWaitMs: 0 } });
    const refused = await waiting.check(api);
    expect(refused).to.include({ allowed: false, reason: 'lease_wait_timeout', matched_policy_id: 'leased' });
    expect(refused.retry_after).to.be.within(1, 1000);
    // The refill it started lands: the next decision is served from its units.
    expect(takes).to.have.length(1);
    takes.shift()!();
    await settle();
    const served = await waiting.check(api);
    expect(served).to.include({ allowed: true, reason: 'within_limit' });
    // The refill ahead that decision started: answered, so the drain does not wait on it.
    for (const run of takes.splice(0)) run();
    await waiting.letGoLeases();
  });

  it('a take whose answer was lost is reclaimed on drain, though its holder let go meanwhile with the store unreachable for the reclaim', async () => {
    const counts = { taken: 0, lost: 0, returned: 0, lapsed: 0 };
    const link = { loseNextAnswer: false, reclaimDown: false };
    const lending = awaitingOnly(emulator, { lend: true });
    const store = {
      ...lending,
      take: async (...args: Parameters<MemoryCounterStore['take']>) => {
        const answer = await emulator.take(...args);
        counts.taken += answer.units;
        if (!link.loseNextAnswer) return answer;
        link.loseNextAnswer = false;
        counts.lost += answer.units;
        throw new CounterStoreUnavailableError('the answer was lost on the link');
      },
      reclaim: (...args: Parameters<MemoryCounterStore['reclaim']>) =>
        link.reclaimDown ? Promise.reject(new CounterStoreUnavailableError('unreachable')) : emulator.reclaim(...args),
    };
    const events = { returned: (units: number) => (counts.returned += units), lapsed: (units: number) => (counts.lapsed += units) };
    const lossy = new DecisionService({ policies: matcher, counters: store, keyPrefix: 't:', leases: { takeTimeoutMs: 100, events: () => events } });
    let admitted = 0;
    const decide = async (): Promise<void> => {
      const decision = await lossy.check(api);
      if (decision.allowed && decision.reason === 'within_limit') admitted++;
    };
    for (let i = 0; i < 30; i++) await decide();
    Object.assign(link, { loseNextAnswer: true, reclaimDown: true });
    for (let i = 0; i < 200 && link.loseNextAnswer; i++) await decide();
    expect(counts.lost).to.be.above(0);
    for (let i = 0; i < 30; i++) await decide();
    // The policy changes: its holder gives its units back and lets go; the reclaim fails then.
    matcher.apply('leased', leased(1000, 2));
    await settle();
    await settle();
    expect(lossy.leases?.size).to.equal(0);
    expect(await used(1000)).to.be.above(admitted);
    link.reclaimDown = false;
    await lossy.letGoLeases();
    // Every unit taken was admitted or given back, exactly.
    expect(await used(1000)).to.equal(admitted);
    expect(counts.returned).to.equal(counts.taken - admitted);
    expect(counts.lapsed).to.equal(0);
  });

  it('one door: a counter store that holds units itself (a region) is told of policy changes and let go on drain, after the process leases', async () => {
    const calls: string[] = [];
    const store = {
      ...awaitingOnly(emulator, { lend: true }),
      policiesChanged: (current: (policyId: string) => unknown) => void calls.push(`changed:${current('leased') === undefined ? 'gone' : 'current'}`),
      letGoAll: async () => void calls.push(`region let go after ${await used(1000)} used`),
    };
    const withRegion = new DecisionService({ policies: matcher, counters: store, keyPrefix: 't:' });
    for (let i = 0; i < 5; i++) expect((await withRegion.check(api)).allowed).to.equal(true);
    expect(await used(1000)).to.be.greaterThan(5);
    matcher.apply('plain', undefined);
    expect(calls).to.deep.equal(['changed:current']);
    await withRegion.letGoLeases();
    // The process leases gave their unspent units back before the region let go.
    expect(calls).to.deep.equal(['changed:current', 'region let go after 5 used']);
  });
});
