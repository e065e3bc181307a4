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
import { RlqsStream } from '../../src/lease/rlqs-stream.js';
import { counterKeys } from '../../src/counters/keys.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { makePolicy } from '../support/policies.js';
import { ModelEnvoy } from './support/rlqs-model-envoy.js';
import { TestClock } from './support/test-clock.js';

const T0 = Date.UTC(2031, 0, 1);

/** How a stream ends: Envoy closes it after a last report, it is cut, or the server drains it (then ends it). */
type End = 'close' | 'cut' | 'drain';

interface Scenario {
  limit: number;
  holdMs: number;
  reportEveryMs: number;
  envoys: { toEnvoyMs: number; toServerMs: number; end: End }[];
  requests: { envoy: number; afterMs: number }[];
}

/** A model Envoy whose messages go both ways after fixed delays, in order (the round trip the settling rule assumes). */
class DelayedEnvoy {
  readonly model: ModelEnvoy;
  stream!: RlqsStream;
  private inbox = 0;
  private outbox = 0;

  constructor(
    private readonly clock: TestClock,
    private readonly delays: { toEnvoyMs: number; toServerMs: number },
  ) {
    this.model = new ModelEnvoy(clock, (usage) => {
      this.outbox = Math.max(this.outbox, clock.now + delays.toServerMs);
      clock.clockFor().setTimer(() => this.stream.report([usage]), this.outbox - clock.now);
    });
  }

  /** The server's send: delivered after the delay, in order. */
  deliver(assignment: Assignment): void {
    this.inbox = Math.max(this.inbox, this.clock.now + this.delays.toEnvoyMs);
    this.clock.clockFor().setTimer(() => this.model.apply(assignment), this.inbox - this.clock.now);
  }
}

async function run(s: Scenario): Promise<{ admitted: number; consumed: number; anyCut: boolean; drainsDone: boolean }> {
  const clock = new TestClock(T0);
  const policy = makePolicy({ policy_id: 'p', scope: { user_id: '*' }, algorithm: { type: 'fixed_window', limit: s.limit, window: '1h' }, lease: { max_hold: `${s.holdMs}ms` } });
  const matcher = new LiveMatcher([policy]);
  const store = new MemoryCounterStore({ now: () => clock.now, sweepIntervalMs: 0 });
  const envoys = s.envoys.map((delays) => {
    const envoy = new DelayedEnvoy(clock, delays);
    envoy.stream = new RlqsStream(
      { policies: matcher, store, keyPrefix: 'sim:', clock: clock.clockFor(), idleMs: 60_000, wallNow: () => clock.now, events: {} },
      (_bucket, assignment) => envoy.deliver(assignment),
    );
    return envoy;
  });
  const reporting = { on: true };
  const tick = () => {
    if (!reporting.on) return;
    for (const envoy of envoys) envoy.model.report();
    clock.clockFor().setTimer(tick, s.reportEveryMs);
  };
  clock.clockFor().setTimer(tick, s.reportEveryMs);
  for (const { envoy, afterMs } of s.requests) {
    await clock.advanceTo(clock.now + afterMs);
    envoys[envoy % envoys.length]!.model.request();
  }
  // A drain first, the reports going on: each draining stream is told to stop spending, and settles.
  const ends = s.envoys.map((e) => e.end);
  let drainsLeft = ends.filter((end) => end === 'drain').length;
  envoys.forEach((envoy, i) => {
    if (ends[i] === 'drain') void envoy.stream.drain().then(() => drainsLeft--);
  });
  // A grant settles on a report a hold after it ended: a drain takes about a hold and a report.
  for (let step = 0; step < 20 + (2 * s.holdMs) / s.reportEveryMs && drainsLeft > 0; step++) await clock.advanceTo(clock.now + s.reportEveryMs);
  const drainsDone = drainsLeft === 0;
  // The end: a last report (and its delivery), then the stream's end; or a cut; a drained stream holds nothing.
  reporting.on = false;
  for (const [i, envoy] of envoys.entries()) if (ends[i] === 'close') envoy.model.report();
  await clock.advanceTo(clock.now + 100);
  await Promise.all(envoys.map((envoy, i) => envoy.stream.end(ends[i] === 'close')));
  await clock.advanceTo(clock.now + 2 * s.holdMs);
  const spec = matcher.current().get('p')!.spec;
  const peek = await store.peek(counterKeys('sim:', 'p', spec, ['user_id', 'u']), spec as never);
  store.close();
  return { admitted: envoys.reduce((sum, e) => sum + e.model.admitted, 0), consumed: s.limit - peek.remaining, anyCut: ends.includes('cut'), drainsDone };
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
      { numRuns: Number(process.env.RLQS_STREAM_RUNS ?? 60), seed: Number(process.env.RLQS_STREAM_SEED ?? 38) },
    );
  });
});
