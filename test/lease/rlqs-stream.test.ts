/**
 * Two rules of an RLQS stream, step by step on a test clock (the lease simulation found both):
 * - a grant that was replaced settles on a report received a hold after its end, not on the next two:
 *   Envoy reports at once when it applies a new strategy, so two reports may both have left it before
 *   the replacement arrived, while it still spent the old grant;
 * - a report that crossed an abandon (requests Envoy counted before the abandon reached it) does not make
 *   the bucket again: Envoy no longer has it, and the units granted would only lapse.
 */
import { expect } from 'chai';
import { counterKeys } from '../../src/counters/keys.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import type { Assignment } from '../../src/lease/rlqs-assignment.js';
import { RlqsStream, type BucketUsage } from '../../src/lease/rlqs-stream.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { parseRequestContext } from '../../src/model/request-context.js';
import { makePolicy } from '../support/policies.js';
import { TestClock } from './support/test-clock.js';

const T0 = Date.UTC(2031, 0, 1);
const HOLD_MS = 1000;
const LIMIT = 1000;

function setup(idleMs = 60_000, holdMs = HOLD_MS, startAt = T0) {
  const clock = new TestClock(startAt);
  const policy = makePolicy({ policy_id: 'p', scope: { user_id: '*' }, algorithm: { type: 'fixed_window', limit: LIMIT, window: '1h' }, lease: { max_hold: `${holdMs}ms` } });
  const matcher = new LiveMatcher([policy]);
  const store = new MemoryCounterStore({ now: () => clock.now, sweepIntervalMs: 0 });
  const sent: Assignment[] = [];
  let takes = 0;
  const counting = { take: async (...args: Parameters<MemoryCounterStore['take']>) => (takes++, store.take(...args)), giveBack: store.giveBack.bind(store), peek: store.peek.bind(store) };
  const stream = new RlqsStream(
    { policies: matcher, store: counting, keyPrefix: 'unit:', clock: clock.clockFor(), idleMs, wallNow: () => clock.now, events: {} },
    (_bucket, assignment) => sent.push(assignment),
  );
  const spec = matcher.current().get('p')!.spec;
  const consumed = async () => LIMIT - (await store.peek(counterKeys('unit:', 'p', spec, ['user_id', 'u']), spec as never)).remaining;
  const report = async (allowed: number, denied = 0, elapsedMs = 100) => {
    const usage: BucketUsage = { key: 'u', bucketId: { user_id: 'u' }, ctx: parseRequestContext({ user_id: 'u' }), allowed, denied, elapsedMs };
    stream.report([usage]);
    await clock.advanceTo(clock.now);
  };
  const spend = (n: number) => store.consume(counterKeys('unit:', 'p', spec, ['user_id', 'u']), spec as never, n);
  const consumedOf = async (policyId: string) => {
    const of = matcher.current().get(policyId)!.spec;
    return LIMIT - (await store.peek(counterKeys('unit:', policyId, of, ['user_id', 'u']), of as never)).remaining;
  };
  return { clock, stream, sent, consumed, consumedOf, report, spend, matcher, policy, takes: () => takes };
}

const tokens = (a: Assignment | undefined) => (a?.strategy === 'token_bucket' ? a.maxTokens : 0);

describe('RLQS stream: settling and abandons, step by step', () => {
  it('keeps a replaced grant consumed through reports sent before Envoy had the replacement, and settles it a hold after its end', async () => {
    const { clock, stream, sent, consumed, report } = setup();
    await report(0, 1); // the first report subscribes: a first grant (what it asked for)
    const first = tokens(sent.at(-1));
    // Spent, and much more asked for: a grant sized by the rate.
    await clock.advanceTo(clock.now + 100);
    await report(first, 100);
    const second = tokens(sent.at(-1));
    expect(second, 'a grant sized by the rate').to.be.above(3);
    // Half of it spent: the next grant replaces it, while Envoy still holds the other half.
    await clock.advanceTo(clock.now + 100);
    const half = Math.ceil(second / 2);
    await report(half);
    const third = tokens(sent.at(-1));
    expect(sent, 'a third grant').to.have.length(3);
    // Two reports at once (the one Envoy sends on applying the new strategy, and an interval one), both
    // sent before the third grant reached it: neither settles the second.
    await clock.advanceTo(clock.now + 10);
    await report(0);
    await clock.advanceTo(clock.now + 10);
    await report(0);
    expect(await consumed(), 'every grant still out').to.equal(first + second + third);
    // Envoy spent the rest of the second grant before the third arrived; a hold later that report settles it.
    await clock.advanceTo(clock.now + HOLD_MS);
    await report(second - half);
    await stream.end(true);
    expect(await consumed(), 'what Envoy spent: the first two grants').to.equal(first + second);
  });

  it('does not make a bucket again from a report that crossed its abandon; a report a hold later does', async () => {
    const { clock, stream, sent, consumed, report, takes } = setup(500);
    await report(0, 1);
    expect(tokens(sent.at(-1))).to.be.above(0);
    // Reports go on, empty, until the grant has ended and settled and the idle time passed: the abandon.
    for (let i = 0; i < 30 && sent.at(-1)?.strategy !== 'abandon'; i++) {
      await clock.advanceTo(clock.now + 100);
      await report(0);
    }
    expect(sent.at(-1)?.strategy).to.equal('abandon');
    expect(stream.bucketCount).to.equal(0);
    const before = takes();
    // Counted by Envoy before the abandon reached it.
    await report(0, 2);
    expect(stream.bucketCount, 'not made again').to.equal(0);
    expect(takes(), 'nothing taken for it').to.equal(before);
    await clock.advanceTo(clock.now + HOLD_MS);
    await report(0, 1);
    expect(stream.bucketCount).to.equal(1);
    expect(tokens(sent.at(-1))).to.be.above(0);
    await stream.end(true);
    expect(await consumed()).to.equal(0);
  });
});

describe('RLQS stream: an assessment that throws', () => {
  it('is caught (no unhandled rejection), and the bucket is assessed again at its next report', async () => {
    const { clock, stream, sent, report } = setup();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    const policies = (stream as unknown as { deps: { policies: { current(): unknown } } }).deps.policies;
    const current = policies.current.bind(policies);
    try {
      policies.current = () => {
        throw new Error('the matcher broke');
      };
      await report(0, 1);
      await new Promise((resolve) => setImmediate(resolve));
      expect(sent, 'nothing assigned by the failed assessment').to.have.length(0);
      policies.current = current;
      await clock.advanceTo(clock.now + 100);
      await report(0, 1);
      expect(tokens(sent.at(-1)), 'assessed again: a grant').to.be.above(0);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      policies.current = current;
      await stream.end(true);
    }
    expect(unhandled).to.deep.equal([]);
  });
});

describe('RLQS stream: DENY_ALL for a spent counter', () => {
  it('lives until the counter can admit again (the window\'s end), never longer, even with a longer hold', async () => {
    // 3 s before the hour's window ends, with a 20 s hold: the counter's retry_after is the bound.
    const { clock, stream, sent, report, spend } = setup(60_000, 20_000, T0 + 3_600_000 - 3000);
    await spend(LIMIT);
    await report(0, 1);
    const deny = sent.at(-1);
    expect(deny?.strategy).to.equal('deny_all');
    const ttlMs = deny?.strategy === 'deny_all' ? deny.ttlMs : NaN;
    expect(ttlMs, 'until the window ends').to.be.above(0).and.at.most(3000);
    // The window ended: the next report brings a grant of the new window.
    await clock.advanceTo(clock.now + ttlMs);
    await report(0, 1);
    expect(tokens(sent.at(-1)), 'assessed again at the window\'s end').to.be.above(0);
    await stream.end(true);
  });
});

describe('RLQS stream: settling across a window rollover', () => {
  it('a grant of the ended window does not take credit for requests spent of the new one: the new window keeps all it handed out', async () => {
    const windowEnd = T0 + 3_600_000;
    const { clock, stream, sent, consumed, report } = setup(60_000, 2000, windowEnd - 1500);
    await report(0, 1);
    const first = tokens(sent.at(-1));
    await clock.advanceTo(clock.now + 100);
    await report(first, 100); // the old window's second grant, unspent: it lives until just before the window ends
    const old = tokens(sent.at(-1));
    expect(old, 'a grant of the old window').to.be.above(1);
    // The window ended; Envoy's assignment expired (it refused meanwhile): the next report brings a grant of the new window.
    await clock.advanceTo(windowEnd + 10);
    await report(0, 20);
    const fresh = tokens(sent.at(-1));
    expect(fresh, 'a grant of the new window').to.be.above(0);
    expect(await consumed(), 'the new window: its grant').to.equal(fresh);
    // Envoy spends all of it and says so; the old window's grant is still unsettled beside it.
    await clock.advanceTo(clock.now + 20);
    await report(fresh);
    await stream.end(true);
    expect(await consumed(), 'the new window keeps what Envoy admitted of it').to.equal(fresh);
  });
});

describe('RLQS stream: settling across a policy swap', () => {
  it("a grant of the replaced policy does not take credit for requests spent of the new policy's counter", async () => {
    const { clock, stream, sent, consumedOf, report, matcher, policy } = setup(60_000, 2000);
    await report(0, 1);
    const first = tokens(sent.at(-1));
    await clock.advanceTo(clock.now + 100);
    await report(first, 100);
    expect(tokens(sent.at(-1)), 'a grant of the old policy, unspent').to.be.above(1);
    // The policy is replaced by another (another counter): the bucket's next assignment, near the old one's end, is from it.
    matcher.replace([{ ...policy, policy_id: 'q' }]);
    await clock.advanceTo(clock.now + 1800);
    await report(0, 20);
    const fresh = tokens(sent.at(-1));
    expect(fresh, 'a grant of the new policy').to.be.above(0);
    await clock.advanceTo(clock.now + 20);
    await report(fresh);
    await stream.end(true);
    expect(await consumedOf('q'), "the new policy's counter keeps what Envoy admitted of it").to.equal(fresh);
  });
});
