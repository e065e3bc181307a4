/**
 * LeaseHolder's rules one by one (docs/distribution.md "How it works"), against the exact emulator
 * as its parent, with an injected clock and parent calls that answer only when the test lets them.
 * The simulation (simulation.property.test.ts) proves never-over over random interleavings; these pin
 * down the behaviour: refill ahead, one refill in flight, waiting only when empty, the chunk rule,
 * refusals, failure, letting go.
 */
import { expect } from 'chai';
import { CounterStoreUnavailableError, LeaseWaitTimeoutError } from '../../src/errors.js';
import type { CounterResult } from '../../src/counters/counter-store.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { chunkSize } from '../../src/lease/chunk.js';
import { LeaseHolder, unansweredTakes, type UnansweredTakes } from '../../src/lease/lease-holder.js';
import { ProcessUnitPool } from '../../src/lease/process-pool.js';
import { storeParent, type LeasedSpec } from '../../src/lease/store-parent.js';
import type { Grant, LapseReason, LeaseClock, LeaseParent, NamedTakeLimits } from '../../src/lease/types.js';
import { leaseShapeOf } from '../../src/policy/lease-terms.js';

const T0 = 1_800_000_000_000;

function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

interface Fixture {
  holder: LeaseHolder;
  exact: MemoryCounterStore;
  clock: { now: number };
  /** Parent calls made, in order: `take n`, `give n`, `peek`. */
  calls: string[];
  /** Parent calls waiting for `answer()`. */
  held: (() => void)[];
  /** Lets the oldest held parent call answer; `answerAll` lets every one (and the ones they cause). */
  answer(): Promise<void>;
  answerAll(): Promise<void>;
  down: { value: boolean };
  /** The next take runs at the parent, and its answer is lost on the way back. */
  loseNextAnswer: { value: boolean };
  /** The same for the next give. */
  loseNextGive: { value: boolean };
  /** Where the holder keeps what failed on its way (close: settles, then counts what cannot be). */
  takes: UnansweredTakes;
  /** Units the parent's takes took (lost answers included), and the names they carried. */
  taken: { units: number; lost: number; named: (NamedTakeLimits | undefined)[] };
  events: { refills: number; returned: number; lapsed: number; waits: number; lapsedBy: Partial<Record<LapseReason, number>> };
  timers: { at: number; fn: () => void }[];
  advance(ms: number): Promise<void>;
  consume(cost: number): Promise<CounterResult>;
}

/** `reclaim`: the parent keeps a take ledger (a counter store's), so the holder names its takes. */
function fixture(spec: LeasedSpec, maxUnits = 100, maxHoldMs = 1000, maxWaitMs = 10_000, options: { reclaim?: boolean; takeTimeoutMs?: number } = {}): Fixture {
  const clock = { now: T0 };
  const exact = new MemoryCounterStore({ now: () => clock.now, sweepIntervalMs: 0 });
  const timers: { at: number; fn: () => void }[] = [];
  const leaseClock: LeaseClock = {
    now: () => clock.now,
    setTimer: (fn, ms) => {
      const timer = { at: clock.now + ms, fn };
      timers.push(timer);
      return timer;
    },
    clearTimer: (handle) => {
      const i = timers.indexOf(handle as (typeof timers)[number]);
      if (i >= 0) timers.splice(i, 1);
    },
  };
  const real = storeParent(exact, ['k'], spec, leaseClock, maxHoldMs);
  const calls: string[] = [];
  const held: (() => void)[] = [];
  const down = { value: false };
  const loseNextAnswer = { value: false };
  const loseNextGive = { value: false };
  const takes = unansweredTakes(leaseClock);
  const taken: Fixture['taken'] = { units: 0, lost: 0, named: [] };
  const gate = <T>(what: string, run: () => Promise<T>): Promise<T> => {
    calls.push(what);
    return new Promise<T>((resolve, reject) =>
      held.push(() => (down.value ? reject(new CounterStoreUnavailableError('down')) : run().then(resolve, reject))),
    );
  };
  const take = async (n: number, named?: NamedTakeLimits): Promise<Grant> => {
    const grant = await real.take(n, named);
    taken.units += grant.granted;
    if (!loseNextAnswer.value) return grant;
    loseNextAnswer.value = false;
    taken.lost += grant.granted;
    throw new CounterStoreUnavailableError('the answer was lost on the link');
  };
  const parent: LeaseParent = {
    take: (n, named) => {
      taken.named.push(named);
      return gate(`take ${n}`, () => take(n, named));
    },
    giveBack: (units, tag, named) =>
      gate(`give ${units}`, async () => {
        const answer = await real.giveBack(units, tag, named);
        if (!loseNextGive.value) return answer;
        loseNextGive.value = false;
        throw new CounterStoreUnavailableError('the answer was lost on the link');
      }),
    peek: () => gate('peek', () => real.peek()),
    ...(options.reclaim && { reclaim: (takeId: string, deadline?: number, by?: string) => gate('reclaim', () => real.reclaim!(takeId, deadline, by)) }),
  };
  const events: Fixture['events'] = { refills: 0, returned: 0, lapsed: 0, waits: 0, lapsedBy: {} };
  const holder = new LeaseHolder({
    parent,
    pool: new ProcessUnitPool(),
    clock: leaseClock,
    lease: { shape: leaseShapeOf(spec.type)!, maxUnits, maxHoldMs },
    maxWaitMs,
    takeTimeoutMs: options.takeTimeoutMs,
    takes,
    events: {
      refilled: () => events.refills++,
      returned: (u) => (events.returned += u),
      lapsed: (u, reason) => {
        events.lapsed += u;
        events.lapsedBy[reason] = (events.lapsedBy[reason] ?? 0) + u;
      },
      waited: () => events.waits++,
    },
  });
  const f: Fixture = {
    holder,
    exact,
    clock,
    calls,
    held,
    down,
    loseNextAnswer,
    loseNextGive,
    takes,
    taken,
    events,
    timers,
    async answer() {
      held.shift()?.();
      await settle();
    },
    async answerAll() {
      while (held.length > 0) await f.answer();
    },
    async advance(ms) {
      const to = clock.now + ms;
      for (;;) {
        timers.sort((a, b) => a.at - b.at);
        if (timers.length === 0 || timers[0].at > to) break;
        const next = timers.shift()!;
        clock.now = Math.max(clock.now, next.at);
        next.fn();
        await settle();
      }
      clock.now = to;
    },
    async consume(cost) {
      const answer = holder.consume(cost);
      if (!(answer instanceof Promise)) return answer;
      answer.catch(() => undefined); // handled here; the caller sees the rejection
      await settle();
      await f.answerAll();
      return answer;
    },
  };
  return f;
}

const fixed = (limit: number): LeasedSpec => ({ type: 'fixed_window', limit, windowMs: 1000 });

describe('LeaseHolder', () => {
  it('the first decision waits for a take of its cost; later ones are answered at once from the units held', async () => {
    const f = fixture(fixed(1000));
    const first = f.holder.consume(1);
    expect(first).to.be.instanceOf(Promise);
    expect(f.calls).to.deep.equal(['take 1']);
    await f.answerAll();
    expect(await first).to.include({ allowed: true });
    // Spent as fast as it came: the chunk grows with what was spent over the last max_hold.
    for (let i = 0; i < 40; i++) await f.consume(1);
    const synchronous = [];
    for (let i = 0; i < 5; i++) synchronous.push(f.holder.consume(1));
    expect(synchronous.some((a) => !(a instanceof Promise))).to.equal(true);
    expect(f.events.waits).to.be.at.least(1);
  });

  it('refills ahead when half of the units are spent, with one refill in flight, and decisions do not wait for it', async () => {
    const f = fixture(fixed(10_000), 20);
    for (let i = 0; i < 60; i++) await f.consume(1); // warm up: the chunk reaches max_units
    await f.answerAll();
    // Spend without answering any take: the first take goes out at half spent, and only one until it answers.
    const answers: (CounterResult | Promise<CounterResult>)[] = [];
    let spentAtFirstTake = -1;
    f.calls.length = 0;
    while (answers.length < 100) {
      const answer = f.holder.consume(1);
      if (answer instanceof Promise) break; // the pool is empty: this one waits
      answers.push(answer);
      if (spentAtFirstTake < 0 && f.calls.length > 0) spentAtFirstTake = answers.length;
    }
    const held = answers.length;
    expect(held).to.be.at.least(20);
    expect(f.calls).to.deep.equal(['take 20']);
    expect(spentAtFirstTake).to.be.at.least(Math.floor(held / 2) - 1).and.at.most(Math.ceil(held / 2) + 1);
    await f.answerAll();
  });

  it('chunk rule: what was spent over max_hold, at least the waiting cost, at most max_units, at most half of what the parent can admit', () => {
    expect(chunkSize({ recent: 50, waiting: 0, maxUnits: 100, parentRemaining: Infinity })).to.equal(50);
    expect(chunkSize({ recent: 500, waiting: 0, maxUnits: 100, parentRemaining: Infinity })).to.equal(100);
    expect(chunkSize({ recent: 500, waiting: 3, maxUnits: 100, parentRemaining: 40 })).to.equal(20);
    // Near the limit the chunk shrinks to the cost itself (and no refill ahead at all).
    expect(chunkSize({ recent: 500, waiting: 3, maxUnits: 100, parentRemaining: 1 })).to.equal(3);
    expect(chunkSize({ recent: 500, waiting: 0, maxUnits: 100, parentRemaining: 1 })).to.equal(0);
    // A cost above max_units is still asked for whole.
    expect(chunkSize({ recent: 0, waiting: 250, maxUnits: 100, parentRemaining: Infinity })).to.equal(250);
  });

  it('never admits more than the parent: near the limit answers converge to the exact ones, refusals carry the parent retry_after', async () => {
    const f = fixture(fixed(7));
    const answers: CounterResult[] = [];
    for (let i = 0; i < 12; i++) answers.push(await f.consume(1));
    expect(answers.filter((a) => a.allowed)).to.have.length(7);
    const refused = answers.find((a) => !a.allowed)!;
    expect(refused.retryAfterMs).to.be.greaterThan(0).and.at.most(1000);
    // The exact counter holds exactly what was admitted.
    expect((await f.exact.peek(['k'], fixed(7))).remaining).to.equal(0);
  });

  it('parent unreachable: answers from the units held, then CounterStoreUnavailableError', async () => {
    const f = fixture(fixed(1000), 10);
    for (let i = 0; i < 30; i++) await f.consume(1);
    await f.answerAll();
    f.down.value = true;
    let served = 0;
    let failed: unknown;
    for (let i = 0; i < 40 && failed === undefined; i++) {
      try {
        if ((await f.consume(1)).allowed) served++;
      } catch (error) {
        failed = error;
      }
    }
    expect(served).to.be.greaterThan(0);
    expect(failed).to.be.instanceOf(CounterStoreUnavailableError);
  });

  it('peek is the parent peek plus the units held; a refund joins the units held', async () => {
    const f = fixture(fixed(100), 10);
    for (let i = 0; i < 10; i++) await f.consume(1);
    await f.answerAll();
    const peekPending = f.holder.peek();
    await f.answerAll();
    const peek = await peekPending;
    const exact = await f.exact.peek(['k'], fixed(100));
    const held = peek.remaining - exact.remaining;
    expect(held).to.be.greaterThan(0);
    const refunded = await f.holder.refund(2);
    expect(refunded.accepted).to.equal(2);
    const again = f.holder.peek();
    await f.answerAll();
    expect((await again).remaining).to.equal(peek.remaining + 2);
  });

  it('a refund after the units held lapsed counts them lapsed, with the refund that found none to join', async () => {
    const f = fixture(fixed(100), 10);
    for (let i = 0; i < 10; i++) await f.consume(1);
    await f.answerAll();
    const held = f.taken.units - 10;
    expect(held).to.be.above(0);
    f.clock.now = T0 + 1000; // a later window
    expect((await f.holder.refund(1)).accepted).to.equal(0);
    expect(f.events.lapsedBy).to.deep.equal({ window_ended: held + 1 });
  });

  it('a refund never adds more units than were spent from the ones held (usage never below zero): no admission beyond the limit', async () => {
    const f = fixture(fixed(10), 10);
    let admitted = 0;
    const decide = async (): Promise<void> => {
      const answer = f.holder.consume(1);
      await f.answerAll();
      if ((await answer).allowed) admitted++;
    };
    for (let i = 0; i < 3; i++) await decide();
    // A client refunds far more than it was admitted: at most the 3 units spent can go back.
    const { accepted } = await f.holder.refund(100);
    expect(accepted).to.be.at.most(3);
    for (let i = 0; i < 30; i++) await decide();
    // What one exact counter admits: the limit, plus what the refund gave back.
    expect(admitted - accepted).to.equal(10);
  });

  it('lets go after max_hold without use: unspent units go back to the window they were taken in', async () => {
    const f = fixture(fixed(100), 10, 300);
    for (let i = 0; i < 5; i++) await f.consume(1);
    await f.answerAll();
    const usedBefore = 100 - (await f.exact.peek(['k'], fixed(100))).remaining;
    expect(usedBefore).to.be.greaterThan(5);
    let forgotten = false;
    f.holder.onIdle = () => (forgotten = true);
    await f.advance(300);
    await f.answerAll();
    // Its owner forgets it: the next decision makes a new holder.
    expect(forgotten).to.equal(true);
    expect((await f.exact.peek(['k'], fixed(100))).remaining).to.equal(95);
    expect(f.events.returned).to.equal(usedBefore - 5);
    expect(f.events.lapsed).to.equal(0);
  });

  it('units whose window has ended lapse (counted) instead of going back to a later window', async () => {
    const f = fixture({ type: 'fixed_window', limit: 100, windowMs: 1000 }, 10, 60_000);
    for (let i = 0; i < 5; i++) await f.consume(1);
    await f.answerAll();
    const held = 100 - (await f.exact.peek(['k'], fixed(100))).remaining - 5;
    expect(held).to.be.greaterThan(0);
    f.clock.now = T0 + 1000; // the next window
    const letGo = f.holder.letGo();
    await settle();
    await f.answerAll();
    await letGo;
    expect(f.events.returned).to.equal(0);
    expect(f.events.lapsed).to.equal(held);
    expect((await f.exact.peek(['k'], fixed(100))).remaining).to.equal(100);
  });

  it('a take answered after letting go goes straight back', async () => {
    const f = fixture(fixed(100), 10);
    const pending = f.holder.consume(3);
    const letGo = f.holder.letGo();
    await settle();
    await f.answerAll();
    await letGo;
    expect((await pending).allowed).to.equal(true);
    expect((await f.exact.peek(['k'], fixed(100))).remaining).to.equal(97);
  });

  it('a bucket’s units held past max_hold lapse, even when it lets go: back in the bucket, they would join the tokens it refilled meanwhile', async () => {
    // One token, refilled at 5 a second; max_hold 100 ms.
    const bucket: LeasedSpec = { type: 'token_bucket', capacity: 1, rateUnits: 5, ratePeriodMs: 1000 };
    const f = fixture(bucket, 1, 100);
    // A decision of 2 takes the one token there is and is refused; the token stays held.
    const first = f.consume(2);
    await f.answerAll();
    expect((await first).allowed).to.equal(false);
    // The token is past max_hold; the bucket has refilled one, which another holder spends.
    f.clock.now += 200;
    expect((await f.exact.consume(['k'], bucket, 1)).allowed).to.equal(true);
    const letGo = f.holder.letGo();
    await f.answerAll();
    await letGo;
    expect(f.calls.filter((c) => c.startsWith('give'))).to.deep.equal([]);
    expect(f.events.lapsed).to.equal(1);
    // Given back, the held token would let the bucket admit a second unit at this instant: 2 over an
    // interval of length 0, where burst + rate × (T + max_hold) allows 1.5.
    expect((await f.exact.consume(['k'], bucket, 1)).allowed).to.equal(false);
  });

  for (const type of ['token_bucket', 'leaky_bucket'] as const) {
    it(`a ${type}'s units given back within max_hold but arriving later lapse at the bucket: a return delayed on its way would join the tokens it refilled meanwhile`, async () => {
      // Five tokens, refilled at 5 a second; max_hold 100 ms.
      const bucket: LeasedSpec = { type, capacity: 5, rateUnits: 5, ratePeriodMs: 1000 };
      const f = fixture(bucket, 5, 100);
      // A decision of 6 takes the 5 tokens there are and is refused; the 5 stay held.
      const first = f.consume(6);
      await f.answerAll();
      expect((await first).allowed).to.equal(false);
      // Within max_hold the holder lets go: its return leaves at once and is on its way for a second.
      f.clock.now += 50;
      const letGo = f.holder.letGo();
      await settle();
      expect(f.calls.filter((c) => c.startsWith('give'))).to.deep.equal(['give 5']);
      f.clock.now += 950;
      // Meanwhile the bucket refilled its 5 tokens, which another holder spends now.
      expect((await f.exact.consume(['k'], bucket, 5)).allowed).to.equal(true);
      await f.answerAll();
      await letGo;
      expect(f.events.returned).to.equal(0);
      expect(f.events.lapsed).to.equal(5);
      // Given back, the 5 would let the bucket admit 10 at this instant, where burst + rate × (T + max_hold)
      // allows 5.5.
      expect((await f.exact.consume(['k'], bucket, 1)).allowed).to.equal(false);
    });
  }

  it('a bucket gives back, when it lets go, the units it still holds within max_hold', async () => {
    const bucket: LeasedSpec = { type: 'token_bucket', capacity: 100, rateUnits: 1, ratePeriodMs: 60_000 };
    const f = fixture(bucket, 10, 300);
    for (let i = 0; i < 5; i++) await f.consume(1);
    await f.answerAll();
    const taken = 100 - (await f.exact.peek(['k'], bucket)).remaining;
    expect(taken).to.be.greaterThan(5);
    f.clock.now += 299;
    const letGo = f.holder.letGo();
    await settle();
    await f.answerAll();
    await letGo;
    expect(f.events.lapsed).to.equal(0);
    expect(f.events.returned).to.equal(taken - 5);
    expect((await f.exact.peek(['k'], bucket)).remaining).to.equal(95);
  });

  it('units whose window ends while the take is on its way lapse on arrival, and the waiting decision is refused (not sent round again)', async () => {
    const spec: LeasedSpec = { type: 'sliding_window_counter', limit: 100, windowMs: 40, subWindows: 4 };
    const f = fixture(spec, 10);
    const pending = f.holder.consume(1);
    await settle();
    f.held.shift()!(); // Redis runs the take now...
    f.clock.now += 10; // ...and its answer arrives after the 10 ms sub-window has ended
    await settle();
    await settle();
    const answer = await pending;
    expect(answer.allowed).to.equal(false);
    expect(f.events.lapsed).to.equal(1);
    expect(f.calls.filter((c) => c.startsWith('take'))).to.have.length(1);
  });

  describe('bounded wait (RL_LEASE_MAX_WAIT_MS)', () => {
    it('a decision whose refill does not land within max wait is refused (LeaseWaitTimeoutError, retry_after ≤ max_hold), not failed; the refill still lands for the next', async () => {
      const f = fixture(fixed(1000), 10, 1000, 100);
      const pending = f.holder.consume(1);
      const outcome = (pending as Promise<CounterResult>).then(
        () => 'answered',
        (error: unknown) => error,
      );
      await settle();
      expect(f.calls).to.deep.equal(['take 1']);
      await f.advance(99);
      expect(f.held).to.have.length(1); // still waiting: the take has not been answered
      await f.advance(1);
      const error = await outcome;
      expect(error).to.be.instanceOf(LeaseWaitTimeoutError);
      expect((error as LeaseWaitTimeoutError).retryAfterMs).to.be.within(1, 1000);
      // The parent answers late: the units it granted are held, and the next decision is served from them.
      await f.answerAll();
      const next = f.holder.consume(1);
      expect(next).to.not.be.instanceOf(Promise);
      expect((next as CounterResult).allowed).to.equal(true);
      expect(f.events.waits).to.equal(1);
    });

    it('max wait 0: a decision the units cannot pay is refused at once, and starts the refill for the next', async () => {
      const f = fixture(fixed(1000), 10, 1000, 0);
      const first = f.holder.consume(1) as Promise<CounterResult>;
      let error: unknown;
      await first.catch((e: unknown) => (error = e));
      expect(error).to.be.instanceOf(LeaseWaitTimeoutError);
      expect(f.calls).to.deep.equal(['take 1']);
      await f.answerAll();
      expect((f.holder.consume(1) as CounterResult).allowed).to.equal(true);
    });

    it('once a take failed, the parent is known unreachable: a decision the units cannot pay fails at once (no wait), until a take succeeds', async () => {
      const f = fixture(fixed(1000), 10, 1000, 10_000);
      f.down.value = true;
      const errors: unknown[] = [];
      await f.consume(1).catch((e: unknown) => errors.push(e));
      expect(errors[0]).to.be.instanceOf(CounterStoreUnavailableError);
      // Known down: rejected at once; one take per take timeout (the store's default, 100 ms) looks whether it is back.
      const second = f.holder.consume(1) as Promise<CounterResult>;
      await second.catch((e: unknown) => errors.push(e));
      expect(errors[1]).to.be.instanceOf(CounterStoreUnavailableError);
      expect(f.calls.filter((c) => c.startsWith('take'))).to.have.length(1);
      f.clock.now += 100;
      await (f.holder.consume(1) as Promise<CounterResult>).catch((e: unknown) => errors.push(e));
      expect(errors[2]).to.be.instanceOf(CounterStoreUnavailableError);
      expect(f.calls.filter((c) => c.startsWith('take'))).to.have.length(2);
      // Back: that take (answered now) brings units, and decisions are served again.
      f.down.value = false;
      await f.answerAll();
      expect((await f.consume(1)).allowed).to.equal(true);
    });
  });

  describe('named takes (a parent that keeps a take ledger, as a counter store does)', () => {
    const used = async (f: Fixture, limit: number): Promise<number> => limit - (await f.exact.peek(['k'], fixed(limit))).remaining;
    /** Decides one unit; a failure-mode answer (the parent unreachable) admits nothing. */
    const decide = async (f: Fixture): Promise<number> => {
      try {
        return (await f.consume(1)).allowed ? 1 : 0;
      } catch (error) {
        if (!(error instanceof CounterStoreUnavailableError)) throw error;
        return 0;
      }
    };
    /** Spends the units held (no take answered meanwhile) until a refill goes out; answers how many were admitted. */
    const spendUntilRefill = (f: Fixture): number => {
      let admitted = 0;
      while (f.held.length === 0) {
        expect((f.holder.consume(1) as CounterResult).allowed).to.equal(true);
        admitted++;
      }
      return admitted;
    };

    it('takes are named when the parent can reclaim them, with a deadline one take timeout away by the parent clock; unnamed when it cannot', async () => {
      const plain = fixture(fixed(1000));
      await plain.consume(1);
      expect(plain.taken.named).to.deep.equal([undefined]);
      const f = fixture(fixed(1000), 10, 1000, 10_000, { reclaim: true, takeTimeoutMs: 250 });
      await f.consume(1);
      await f.consume(1);
      const [first, second] = f.taken.named;
      // Before any answer the parent clock is unknown: an id alone (the take can still be reclaimed).
      expect(first).to.have.keys(['takeId']);
      // The emulator reads the holder's clock: the deadline is the take's timeout after it was sent.
      expect(second).to.deep.include({ deadline: T0 + 250 });
      expect(second!.takeId).to.be.a('string').and.not.equal(first!.takeId);
    });

    it('a take whose answer was lost is reclaimed once the parent answers again: its units go back, counted returned', async () => {
      const f = fixture(fixed(1000), 10, 60_000, 10_000, { reclaim: true });
      let admitted = 0;
      for (let i = 0; i < 20; i++) admitted += await decide(f);
      f.loseNextAnswer.value = true;
      admitted += spendUntilRefill(f);
      await f.answerAll();
      expect(f.taken.lost).to.be.above(0);
      // The parent is known unreachable: decisions the units cannot pay fail; one take timeout later, the take they send answers.
      f.clock.now += 100;
      for (let i = 0; i < 40; i++) admitted += await decide(f);
      expect(f.calls.filter((c) => c === 'reclaim')).to.have.length(1);
      expect(f.events.returned).to.be.at.least(f.taken.lost);
      const letGo = f.holder.letGo();
      await f.answerAll();
      await letGo;
      // Every unit taken was admitted or given back, exactly.
      expect(await used(f, 1000)).to.equal(admitted);
      expect(f.events.returned).to.equal(f.taken.units - admitted);
      expect(f.events.lapsed).to.equal(0);
    });

    it('a lost take whose window ends before the parent answers again lapses, counted parent_unreachable', async () => {
      const f = fixture(fixed(1000), 10, 60_000, 10_000, { reclaim: true });
      let admitted = 0;
      for (let i = 0; i < 20; i++) admitted += await decide(f);
      f.loseNextAnswer.value = true;
      admitted += spendUntilRefill(f);
      await f.answerAll();
      f.clock.now = T0 + 1000; // the next window
      for (let i = 0; i < 5; i++) admitted += await decide(f);
      expect(f.events.lapsedBy.parent_unreachable).to.equal(f.taken.lost);
      const letGo = f.holder.letGo();
      await f.answerAll();
      await letGo;
      expect(f.events.returned + f.events.lapsed).to.equal(f.taken.units - admitted);
    });

    it('a take whose answer was lost is reclaimed when the holder lets go', async () => {
      const f = fixture(fixed(1000), 10, 60_000, 10_000, { reclaim: true });
      let admitted = 0;
      for (let i = 0; i < 20; i++) admitted += await decide(f);
      f.loseNextAnswer.value = true;
      admitted += spendUntilRefill(f);
      await f.answerAll();
      expect(f.taken.lost).to.be.above(0);
      const letGo = f.holder.letGo();
      await settle();
      await f.answerAll();
      await letGo;
      expect(f.calls.filter((c) => c === 'reclaim')).to.have.length(1);
      expect(await used(f, 1000)).to.equal(admitted);
      expect(f.events.returned).to.equal(f.taken.units - admitted);
      expect(f.events.lapsed).to.equal(0);
    });

    it('a take held up past its deadline takes nothing: not a short parent, so the decision waiting for it is served by the next take', async () => {
      const f = fixture(fixed(1000), 10, 60_000, 10_000, { reclaim: true, takeTimeoutMs: 100 });
      // Samples the parent clock; its take of 1 leaves no unit held.
      expect((await f.consume(1)).allowed).to.equal(true);
      const waiting = f.holder.consume(1) as Promise<CounterResult>;
      let answered = false;
      void waiting.then(() => (answered = true));
      await settle();
      f.clock.now += 101; // held up on the link past its deadline
      await f.answer();
      expect(await used(f, 1000)).to.equal(1);
      expect(answered).to.equal(false);
      await f.answerAll();
      expect(await waiting).to.include({ allowed: true });
      expect(f.calls.filter((c) => c.startsWith('take'))).to.have.length(3);
      expect(f.events.refills).to.equal(2);
    });

    /** Spends a few units of a window of 1000, then lets go: its give-back goes out. */
    const spendThenLetGo = async (f: Fixture): Promise<{ admitted: number; letGo: Promise<void> }> => {
      let admitted = 0;
      for (let i = 0; i < 5; i++) admitted += await decide(f);
      const letGo = f.holder.letGo();
      await settle();
      return { admitted, letGo };
    };
    /** Answers the parent's calls, and those their answers set off (a settle's reclaim, then its give), a few rounds. */
    const answerRounds = async (f: Fixture): Promise<void> => {
      for (let i = 0; i < 5; i++) {
        await settle();
        await f.answerAll();
      }
    };
    /** Closes the holder's failed-call list (as drain does), answering the parent calls that makes. */
    const close = async (f: Fixture): Promise<void> => {
      const closing = f.takes.close();
      await answerRounds(f);
      await closing;
    };
    const gives = (f: Fixture): string[] => f.calls.filter((c) => c.startsWith('give') || c === 'reclaim');
    /** The unspent units went back once, by these calls to the parent (`give` is the give-back), and were counted once. */
    const expectGivenBackOnce = async (f: Fixture, admitted: number, calls: ('give' | 'reclaim')[]) => {
      const back = `give ${f.taken.units - admitted}`;
      expect(gives(f)).to.deep.equal(calls.map((c) => (c === 'give' ? back : c)));
      expect(f.events).to.deep.include({ returned: f.taken.units - admitted, lapsed: 0 });
      expect(await used(f, 1000)).to.equal(admitted);
    };

    /** Spends, then lets go while the parent is unreachable: the give-back fails, its units still to be settled. */
    const letGoWhileDown = async (f: Fixture) => {
      const { admitted, letGo } = await spendThenLetGo(f);
      f.down.value = true;
      await f.answerAll();
      await letGo;
      return admitted;
    };

    it('a give-back whose answer was lost is settled once the parent answers: counted returned as it went, once', async () => {
      const f = fixture(fixed(1000), 10, 60_000, 10_000, { reclaim: true });
      const { admitted, letGo } = await spendThenLetGo(f);
      f.loseNextGive.value = true;
      await f.answerAll();
      await letGo;
      // Not counted yet (it may or may not have run): neither returned nor lapsed.
      expect(f.events.returned + f.events.lapsed).to.equal(0);
      await close(f);
      await expectGivenBackOnce(f, admitted, ['give', 'reclaim']);
    });

    it('a give-back that never reached the parent is given again under a new id once its reclaim answers (the reclaim leaves a tombstone)', async () => {
      const f = fixture(fixed(1000), 10, 60_000, 10_000, { reclaim: true });
      const admitted = await letGoWhileDown(f);
      f.down.value = false;
      await close(f);
      await expectGivenBackOnce(f, admitted, ['give', 'reclaim', 'give']);
    });

    it('a give-back held up past its deadline gives nothing; its units go again, counted once', async () => {
      const f = fixture(fixed(1000), 10, 60_000, 10_000, { reclaim: true, takeTimeoutMs: 100 });
      const { admitted, letGo } = await spendThenLetGo(f);
      f.clock.now += 101;
      await f.answer();
      await answerRounds(f);
      await letGo;
      await expectGivenBackOnce(f, admitted, ['give', 'reclaim', 'give']);
    });

    it('a give-back that cannot be settled when the holders close (the parent still unreachable) is counted lapsed, parent_unreachable', async () => {
      const f = fixture(fixed(1000), 10, 60_000, 10_000, { reclaim: true });
      const admitted = await letGoWhileDown(f);
      await close(f);
      expect(f.events.lapsedBy).to.deep.equal({ parent_unreachable: f.taken.units - admitted });
      expect(f.events.returned).to.equal(0);
    });

    it('a give-back whose window ended before it could be settled is counted lapsed, window_ended, when the parent answers', async () => {
      const f = fixture(fixed(1000), 10, 60_000, 10_000, { reclaim: true });
      const admitted = await letGoWhileDown(f);
      f.down.value = false;
      f.clock.now = T0 + 1000;
      await close(f);
      expect(f.events.lapsedBy).to.deep.equal({ window_ended: f.taken.units - admitted });
      expect(f.events.returned).to.equal(0);
    });

    it('letGo with a refill hung on a parent that never answers returns after one take timeout; the units, answered later, go back once', async () => {
      const f = fixture(fixed(1000), 10, 60_000, 10_000, { takeTimeoutMs: 200 });
      let admitted = 0;
      for (let i = 0; i < 20; i++) admitted += await decide(f);
      admitted += spendUntilRefill(f);
      let gone = false;
      const letGo = f.holder.letGo().then(() => (gone = true));
      await f.advance(199);
      expect(gone).to.equal(false);
      await f.advance(1);
      expect(gone).to.equal(true);
      await letGo;
      // The parent answers after all: the refill's units go back too, and nothing twice.
      await f.answerAll();
      expect(f.calls.filter((c) => c.startsWith('give'))).to.have.length(2);
      expect(await used(f, 1000)).to.equal(admitted);
      expect(f.events.returned).to.equal(f.taken.units - admitted);
      expect(f.events.lapsed).to.equal(0);
    });
  });
});
