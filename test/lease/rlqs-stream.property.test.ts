/**
 * RLQS streams as capacity-lease holders whose units sit in Envoys, driven deterministically: the very
 * RlqsStream code on a test clock and an in-memory counter, model Envoys that apply assignments as the
 * protocol says (a different strategy: report, then a full new bucket; the same: a longer life; DENY_ALL
 * before the first and after expiry), messages both ways delayed by arbitrary amounts (in order, each
 * way under half the reporting interval: the round trip the settling rule assumes), requests at
 * arbitrary instants, and streams that end with a last report, are cut, or are drained by the server. Never over: all Envoys together
 * admit at most the limit. Nothing lost: once every stream ended with its last report, the counter has
 * consumed exactly what they admitted; a cut stream only leaves units consumed, never admits more.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import type { Assignment } from '../../src/lease/rlqs-assignment.js';
import { RlqsStream, type BucketUsage } from '../../src/lease/rlqs-stream.js';
import { counterKeys } from '../../src/counters/keys.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { parseRequestContext } from '../../src/model/request-context.js';
import { makePolicy } from '../support/policies.js';
import { TestClock } from './support/test-clock.js';

const T0 = Date.UTC(2031, 0, 1);
const BUCKET = { user_id: 'u' };

/** How a stream ends: Envoy closes it after a last report, it is cut, or the server drains it (then ends it). */
type End = 'close' | 'cut' | 'drain';

interface Scenario {
  limit: number;
  holdMs: number;
  reportEveryMs: number;
  envoys: { toEnvoyMs: number; toServerMs: number; end: End }[];
  requests: { envoy: number; afterMs: number }[];
}

/** A data plane as the protocol describes it, for one bucket. */
class ModelEnvoy {
  admitted = 0;
  private allowed = 0;
  private denied = 0;
  private lastReport: number;
  private active?: { assignment: Assignment; expiresAt: number; tokens: number; at: number };
  private inbox = 0;
  private outbox = 0;
  stream!: RlqsStream;

  constructor(
    private readonly clock: TestClock,
    private readonly delays: { toEnvoyMs: number; toServerMs: number },
  ) {
    this.lastReport = clock.now;
  }

  /** The server's send: delivered after the delay, in order. */
  deliver(assignment: Assignment): void {
    this.inbox = Math.max(this.inbox, this.clock.now + this.delays.toEnvoyMs);
    this.clock.clockFor().setTimer(() => this.apply(assignment), this.inbox - this.clock.now);
  }

  request(first: boolean): void {
    const ok = this.decide();
    if (ok) this.admitted++;
    if (ok) this.allowed++;
    else this.denied++;
    if (first) this.report();
  }

  report(): void {
    const usage: BucketUsage = {
      key: 'u',
      bucketId: BUCKET,
      ctx: parseRequestContext({ user_id: 'u', tags: { domain: 'edge' } }),
      allowed: this.allowed,
      denied: this.denied,
      elapsedMs: this.clock.now - this.lastReport,
    };
    this.allowed = 0;
    this.denied = 0;
    this.lastReport = this.clock.now;
    this.outbox = Math.max(this.outbox, this.clock.now + this.delays.toServerMs);
    this.clock.clockFor().setTimer(() => this.stream.report([usage]), this.outbox - this.clock.now);
  }

  private decide(): boolean {
    const active = this.active;
    if (active === undefined || active.expiresAt <= this.clock.now) return false;
    const a = active.assignment;
    if (a.strategy !== 'token_bucket') return a.strategy === 'allow_all';
    active.tokens = Math.min(a.maxTokens, active.tokens + (this.clock.now - active.at) / (a.fillIntervalMs + a.fillTagNanos / 1e6));
    active.at = this.clock.now;
    if (active.tokens < 1) return false;
    active.tokens -= 1;
    return true;
  }

  private apply(assignment: Assignment): void {
    if (assignment.strategy === 'abandon') return void (this.active = undefined);
    const now = this.clock.now;
    const active = this.active;
    if (active && active.expiresAt > now && JSON.stringify({ ...active.assignment, ttlMs: 0 }) === JSON.stringify({ ...assignment, ttlMs: 0 })) {
      active.expiresAt = now + assignment.ttlMs;
      return;
    }
    if (active) this.report();
    this.active = { assignment, expiresAt: now + assignment.ttlMs, tokens: assignment.strategy === 'token_bucket' ? assignment.maxTokens : 0, at: now };
  }
}

async function run(s: Scenario): Promise<{ admitted: number; consumed: number; anyCut: boolean; drainsDone: boolean }> {
  const clock = new TestClock(T0);
  const policy = makePolicy({ policy_id: 'p', scope: { user_id: '*' }, algorithm: { type: 'fixed_window', limit: s.limit, window: '1h' }, lease: { max_hold: `${s.holdMs}ms` } });
  const matcher = new LiveMatcher([policy]);
  const store = new MemoryCounterStore({ now: () => clock.now, sweepIntervalMs: 0 });
  const envoys = s.envoys.map((delays) => {
    const envoy = new ModelEnvoy(clock, delays);
    envoy.stream = new RlqsStream(
      { policies: matcher, store, keyPrefix: 'sim:', clock: clock.clockFor(), idleMs: 60_000, wallNow: () => clock.now, events: {} },
      (_bucket, assignment) => envoy.deliver(assignment),
    );
    return envoy;
  });
  const reporting = { on: true };
  const tick = () => {
    if (!reporting.on) return;
    for (const envoy of envoys) envoy.report();
    clock.clockFor().setTimer(tick, s.reportEveryMs);
  };
  clock.clockFor().setTimer(tick, s.reportEveryMs);
  const seen = new Set<number>();
  for (const { envoy, afterMs } of s.requests) {
    await clock.advanceTo(clock.now + afterMs);
    const i = envoy % envoys.length;
    envoys[i]!.request(!seen.has(i));
    seen.add(i);
  }
  // A drain first, the reports going on: each draining stream is told to stop spending, and settles.
  const ends = s.envoys.map((e) => e.end);
  let drainsLeft = ends.filter((end) => end === 'drain').length;
  envoys.forEach((envoy, i) => {
    if (ends[i] === 'drain') void envoy.stream.drain().then(() => drainsLeft--);
  });
  for (let step = 0; step < 20 && drainsLeft > 0; step++) await clock.advanceTo(clock.now + s.reportEveryMs);
  const drainsDone = drainsLeft === 0;
  // The end: a last report (and its delivery), then the stream's end; or a cut; a drained stream holds nothing.
  reporting.on = false;
  for (const [i, envoy] of envoys.entries()) if (ends[i] === 'close') envoy.report();
  await clock.advanceTo(clock.now + 100);
  await Promise.all(envoys.map((envoy, i) => envoy.stream.end(ends[i] === 'close')));
  await clock.advanceTo(clock.now + 2 * s.holdMs);
  const spec = matcher.current().get('p')!.spec;
  const peek = await store.peek(counterKeys('sim:', 'p', spec, ['user_id', 'u']), spec as never);
  store.close();
  return { admitted: envoys.reduce((sum, e) => sum + e.admitted, 0), consumed: s.limit - peek.remaining, anyCut: ends.includes('cut'), drainsDone };
}

describe('RLQS streams under arbitrary delays and interleavings (deterministic)', function () {
  this.timeout(120_000);

  it('never admit over the limit, and end with the counter at exactly what was admitted unless a stream was cut (a drained one is settled)', async () => {
    const scenario = fc
      .record({ limit: fc.integer({ min: 1, max: 40 }), holdMs: fc.integer({ min: 100, max: 1000 }), reportEveryMs: fc.integer({ min: 20, max: 120 }), ends: fc.array(fc.constantFrom<End>('close', 'cut', 'drain'), { minLength: 1, maxLength: 3 }) })
      .chain(({ limit, holdMs, reportEveryMs, ends }) => {
        const delay = fc.integer({ min: 0, max: Math.floor(reportEveryMs / 2) - 1 });
        return fc.record({
          limit: fc.constant(limit),
          holdMs: fc.constant(holdMs),
          reportEveryMs: fc.constant(reportEveryMs),
          envoys: fc.tuple(...ends.map((end) => fc.record({ toEnvoyMs: delay, toServerMs: delay, end: fc.constant(end) }))),
          requests: fc.array(fc.record({ envoy: fc.nat(2), afterMs: fc.integer({ min: 0, max: 15 }) }), { minLength: 60, maxLength: 300 }),
        });
      });
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const { admitted, consumed, anyCut, drainsDone } = await run(s);
        expect(drainsDone, 'every drain settled from the reports').to.equal(true);
        expect(admitted).to.be.at.most(s.limit);
        if (anyCut) expect(consumed).to.be.at.least(admitted);
        else expect(consumed).to.equal(admitted);
      }),
      { numRuns: 60, seed: 38 },
    );
  });
});
