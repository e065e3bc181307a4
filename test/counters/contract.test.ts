/**
 * The counters' behaviour (docs/algorithms.md, docs/reference.md "Slots, leases and pools"), run against both stores with
 * explicit times: one suite, two backends, identical expected results.
 */
import { expect } from 'chai';
import type { CounterSpec, ConcurrencySpec, RateSpec } from '../../src/counters/counter-spec.js';
import type { CounterStore } from '../../src/counters/counter-store.js';
import { capacityOf } from '../../src/counters/counter-spec.js';
import { COUNTER_SCENARIOS, at, forEachStore, runScenario } from '../support/counter-stores.js';

/** One spec per rate algorithm with a given capacity (limit, or burst for the buckets). */
function rateSpecs(capacity: number): RateSpec[] {
  return [
    { type: 'fixed_window', limit: capacity, windowMs: 60_000 },
    { type: 'sliding_window_log', limit: capacity, windowMs: 60_000 },
    { type: 'sliding_window_counter', limit: capacity, windowMs: 60_000, subWindows: 1 },
    { type: 'sliding_window_counter', limit: capacity, windowMs: 60_000, subWindows: 6 },
    { type: 'token_bucket', capacity, rateUnits: capacity, ratePeriodMs: 60_000 },
    { type: 'leaky_bucket', capacity, rateUnits: capacity, ratePeriodMs: 60_000 },
    { type: 'quota', limit: capacity, periodMs: 3_600_000 },
  ];
}

function label(spec: CounterSpec): string {
  return spec.type === 'sliding_window_counter' ? `${spec.type}/${spec.subWindows}` : spec.type;
}

forEachStore((_name, getStore) => {
  for (const [algorithm, scenarios] of Object.entries(COUNTER_SCENARIOS)) {
    describe(algorithm, () => {
      for (const scenario of scenarios) {
        it(scenario.name, async () => {
          const { store, keys } = getStore();
          await runScenario(store, keys, scenario);
        });
      }
    });
  }

  describe('every rate algorithm', () => {
    for (const capacity of [1, 7, 100]) {
      it(`admits exactly its capacity (${capacity}) on a fresh key at one instant, then denies`, async () => {
        const { store, keys } = getStore();
        for (const spec of rateSpecs(capacity)) {
          const k = keys(`exact-${capacity}`, spec);
          for (let i = 1; i <= capacity; i++) {
            const r = await store.consume(k, spec, 1, at(1000));
            expect(r, `${label(spec)} #${i}`).to.include({ allowed: true, remaining: capacity - i, retryAfterMs: 0 });
          }
          for (let i = 0; i < 3; i++) {
            const r = await store.consume(k, spec, 1, at(1000));
            expect(r.allowed, `${label(spec)} beyond capacity`).to.equal(false);
            expect(r.remaining, label(spec)).to.equal(0);
            expect(r.retryAfterMs, `${label(spec)} retry_after`).to.be.greaterThan(0);
          }
        }
      });
    }

    it('with cost 3 and capacity 10 admits three requests, then denies with 1 remaining', async () => {
      const { store, keys } = getStore();
      for (const spec of rateSpecs(10)) {
        const k = keys('cost3', spec);
        const results = [];
        for (let i = 0; i < 5; i++) results.push(await store.consume(k, spec, 3, at(0)));
        expect(results.map((r) => r.allowed), label(spec)).to.deep.equal([true, true, true, false, false]);
        expect(results.map((r) => r.remaining), label(spec)).to.deep.equal([7, 4, 1, 1, 1]);
        // The last unit is still there for a cost-1 request.
        expect(await store.consume(k, spec, 1, at(0)), label(spec)).to.include({ allowed: true, remaining: 0 });
      }
    });

    it('denied requests (even huge ones) consume nothing', async () => {
      const { store, keys } = getStore();
      for (const spec of rateSpecs(5)) {
        const k = keys('denied', spec);
        for (let i = 0; i < 10; i++) {
          const r = await store.consume(k, spec, 6 + i * 1000, at(0));
          expect(r, label(spec)).to.include({ allowed: false, remaining: 5 });
        }
        expect(await store.consume(k, spec, 5, at(0)), label(spec)).to.include({ allowed: true, remaining: 0 });
      }
    });

    it('after retry_after the same request is admitted (cost ≤ capacity)', async () => {
      const { store, keys } = getStore();
      for (const spec of rateSpecs(4)) {
        const k = keys('retry', spec);
        let now = at(0);
        expect((await store.consume(k, spec, 3, now)).allowed, label(spec)).to.equal(true);
        now += 123;
        const denied = await store.consume(k, spec, 2, now);
        expect(denied.allowed, label(spec)).to.equal(false);
        const earlier = await store.consume(k, spec, 2, now + denied.retryAfterMs - 1);
        expect(earlier.allowed, `${label(spec)} 1 ms before retry_after`).to.equal(false);
        let t = now + denied.retryAfterMs;
        let r = await store.consume(k, spec, 2, t);
        // sliding_window_counter: when the current sub-windows alone are full, retry_after is the next
        // sub-window boundary, a lower bound; from there each retry_after is exact or another bound.
        for (let hops = 0; !r.allowed && spec.type === 'sliding_window_counter' && hops < 10; hops++) {
          t += r.retryAfterMs;
          r = await store.consume(k, spec, 2, t);
        }
        expect(r.allowed, `${label(spec)} at retry_after (${denied.retryAfterMs} ms)`).to.equal(true);
      }
    });

    it('remaining, retry_after and reset_after are whole numbers ≥ 0, also after the limit shrinks', async () => {
      const { store, keys } = getStore();
      const check = (r: { remaining: number; retryAfterMs: number; resetAfterMs: number; allowed: boolean }, what: string) => {
        for (const v of [r.remaining, r.retryAfterMs, r.resetAfterMs]) {
          expect(Number.isInteger(v) && v >= 0, `${what}: ${JSON.stringify(r)}`).to.equal(true);
        }
        if (r.allowed) expect(r.resetAfterMs, what).to.be.greaterThan(0);
      };
      const big = rateSpecs(5);
      const small = rateSpecs(1);
      for (const [i, spec] of big.entries()) {
        const k = keys('neg', spec);
        for (let n = 0; n < 8; n++) check(await store.consume(k, spec, 1 + (n % 3), at(n * 7)), label(spec));
        // A live change to a smaller limit: the counter holds more than the new limit.
        const shrunk = await store.consume(k, small[i], 1, at(60));
        check(shrunk, `${label(spec)} after shrinking`);
        expect(shrunk, `${label(spec)} after shrinking`).to.include({ allowed: false, remaining: 0 });
      }
    });
  });

  describe('capacity lease take', () => {
    it('a take that leaves nothing answers when one more unit may be taken: the retry_after of a consume then', async () => {
      const { store, keys } = getStore();
      for (const spec of rateSpecs(7).filter((s) => s.type !== 'sliding_window_log')) {
        const k = keys('take-last', spec);
        // Units left after the take: it may admit more, so no retry_after.
        expect(await store.take!(k, spec, 3, at(0)), label(spec)).to.include({ units: 3, remaining: 4, retryAfterMs: 0 });
        // The last 4: how long the counter admits no more is what a consume of one unit is told now.
        const last = await store.take!(k, spec, 4, at(0));
        const refused = await store.consume(k, spec, 1, at(0));
        expect(refused.allowed, label(spec)).to.equal(false);
        expect(last, label(spec)).to.include({ units: 4, remaining: 0, retryAfterMs: refused.retryAfterMs });
        expect(last.retryAfterMs, label(spec)).to.be.above(0);
        // Nothing left to take: the retry_after of a refused consume of what was asked, as before.
        const none = await store.take!(k, spec, 2, at(0));
        expect(none, label(spec)).to.include({ units: 0, retryAfterMs: (await store.consume(k, spec, 2, at(0))).retryAfterMs });
      }
    });
  });

  describe('named takes (a take that reaches the counter after its taker gave up on it)', () => {
    const leasable = (capacity: number) => rateSpecs(capacity).filter((spec) => spec.type !== 'sliding_window_log');
    /** When the units of a take at at(0) have lapsed: the window (sub-window, period) has ended, or a bucket's hold of 100 ms passed. */
    const lapseAt = (spec: RateSpec): number => {
      switch (spec.type) {
        case 'sliding_window_counter':
          return spec.windowMs / spec.subWindows;
        case 'quota':
          return spec.periodMs;
        case 'fixed_window':
          return spec.windowMs;
        default:
          return 100;
      }
    };

    it('every lease answer carries the store clock', async () => {
      const { store, keys } = getStore();
      for (const spec of leasable(10)) {
        const k = keys(`clock-${label(spec)}`, spec);
        expect((await store.take!(k, spec, 1, at(5))).storeNow, label(spec)).to.equal(at(5));
        expect((await store.giveBack!(k, spec, { units: 1, windowTag: 0, nowMs: at(6) })).storeNow, label(spec)).to.equal(at(6));
        expect((await store.reclaim!(k, spec, { takeId: 'x' }, at(7))).storeNow, label(spec)).to.equal(at(7));
      }
    });

    it('a take past its deadline takes nothing and says so; at its deadline it still runs', async () => {
      const { store, keys } = getStore();
      for (const spec of leasable(10)) {
        const k = keys(`deadline-${label(spec)}`, spec);
        const late = await store.take!(k, spec, 4, at(10), { deadline: at(9) });
        expect(late, label(spec)).to.include({ units: 0, outcome: 'late', allowed: false, remaining: 10 });
        const inTime = await store.take!(k, spec, 4, at(10), { deadline: at(10) });
        expect(inTime, label(spec)).to.include({ units: 4, outcome: 'done', remaining: 6 });
        // "The counter had nothing" is another answer: done, 0 units.
        await store.take!(k, spec, 6, at(10));
        expect(await store.take!(k, spec, 1, at(10), { deadline: at(20) }), label(spec)).to.include({ units: 0, outcome: 'done' });
      }
    });

    it('the same take id again answers the recorded grant and takes nothing more', async () => {
      const { store, keys } = getStore();
      for (const spec of leasable(10)) {
        const k = keys(`repeat-${label(spec)}`, spec);
        const first = await store.take!(k, spec, 3, at(0), { takeId: 'a', holdMs: 100 });
        expect(first, label(spec)).to.include({ units: 3, outcome: 'done', remaining: 7 });
        const again = await store.take!(k, spec, 5, at(1), { takeId: 'a', holdMs: 100 });
        expect(again, label(spec)).to.include({ units: 3, windowTag: first.windowTag, outcome: 'repeat', allowed: true });
        expect((await store.peek(k, spec, at(1))).remaining, label(spec)).to.equal(7);
      }
    });

    it('a reclaim gives the named take back exactly once, and the take asked again takes nothing', async () => {
      const { store, keys } = getStore();
      for (const spec of leasable(10)) {
        const k = keys(`reclaim-${label(spec)}`, spec);
        // All at one instant: a bucket refills nothing meanwhile, so all 3 fit back.
        await store.take!(k, spec, 3, at(0), { takeId: 'a', deadline: at(50), holdMs: 100 });
        const back = await store.reclaim!(k, spec, { takeId: 'a', deadline: at(50) }, at(0));
        expect(back, label(spec)).to.include({ units: 3, lapsed: 0, outcome: 'done' });
        expect((await store.peek(k, spec, at(0))).remaining, label(spec)).to.equal(10);
        const twice = await store.reclaim!(k, spec, { takeId: 'a' }, at(0));
        expect(twice, label(spec)).to.include({ units: 3, lapsed: 0, outcome: 'repeat' });
        expect((await store.peek(k, spec, at(0))).remaining, `${label(spec)} given back once`).to.equal(10);
        expect(await store.take!(k, spec, 3, at(0), { takeId: 'a', holdMs: 100 }), label(spec)).to.include({ units: 0, outcome: 'reclaimed' });
        expect((await store.peek(k, spec, at(0))).remaining, label(spec)).to.equal(10);
      }
    });

    it('a take reclaimed again answers repeat only to its reclaimer, and nothing (reclaimed) to another', async () => {
      const { store, keys } = getStore();
      for (const spec of leasable(10)) {
        const k = keys(`reclaimer-${label(spec)}`, spec);
        await store.take!(k, spec, 3, at(0), { takeId: 'a', holdMs: 100 });
        expect(await store.reclaim!(k, spec, { takeId: 'a', by: 'one' }, at(0)), label(spec)).to.include({ units: 3, lapsed: 0, outcome: 'done' });
        expect(await store.reclaim!(k, spec, { takeId: 'a', by: 'one' }, at(0)), label(spec)).to.include({ units: 3, lapsed: 0, outcome: 'repeat' });
        expect(await store.reclaim!(k, spec, { takeId: 'a', by: 'two' }, at(0)), label(spec)).to.include({ units: 0, lapsed: 0, outcome: 'reclaimed' });
        expect(await store.reclaim!(k, spec, { takeId: 'a' }, at(0)), label(spec)).to.include({ units: 0, lapsed: 0, outcome: 'reclaimed' });
        // A tombstone left by one: another's reclaim finds it settled, and the take, when it comes, takes nothing.
        expect(await store.reclaim!(k, spec, { takeId: 'b', by: 'one' }, at(0)), label(spec)).to.include({ outcome: 'ahead' });
        expect(await store.reclaim!(k, spec, { takeId: 'b', by: 'two' }, at(0)), label(spec)).to.include({ units: 0, lapsed: 0, outcome: 'reclaimed' });
        expect(await store.reclaim!(k, spec, { takeId: 'b', by: 'one' }, at(0)), label(spec)).to.include({ units: 0, lapsed: 0, outcome: 'repeat' });
        expect(await store.take!(k, spec, 3, at(0), { takeId: 'b', holdMs: 100 }), label(spec)).to.include({ units: 0, outcome: 'reclaimed' });
        expect((await store.peek(k, spec, at(0))).remaining, `${label(spec)} given back once`).to.equal(10);
      }
    });

    it('a reclaim that comes before its take leaves a tombstone: the take, when it comes, takes nothing', async () => {
      const { store, keys } = getStore();
      for (const spec of leasable(10)) {
        const k = keys(`ahead-${label(spec)}`, spec);
        expect(await store.reclaim!(k, spec, { takeId: 'b', deadline: at(50) }, at(0)), label(spec)).to.include({ units: 0, lapsed: 0, outcome: 'ahead' });
        const late = await store.take!(k, spec, 4, at(10), { takeId: 'b', deadline: at(50), holdMs: 100 });
        expect(late, label(spec)).to.include({ units: 0, outcome: 'reclaimed', allowed: false, remaining: 10 });
        expect((await store.peek(k, spec, at(10))).remaining, label(spec)).to.equal(10);
      }
    });

    it('a reclaim of units whose window ended (a bucket: whose hold passed) answers them lapsed', async () => {
      const { store, keys } = getStore();
      for (const spec of leasable(10)) {
        const k = keys(`lapsed-${label(spec)}`, spec);
        // A window's take a second before it ends (a quota period starts with its first use at at(0)): a
        // take is remembered a minute, not a window.
        await store.consume(k, spec, 1, at(0));
        await store.take!(k, spec, 3, at(spec.type.endsWith('bucket') ? 0 : lapseAt(spec) - 1_000), { takeId: 'c', holdMs: 100 });
        const back = await store.reclaim!(k, spec, { takeId: 'c' }, at(lapseAt(spec)));
        expect(back, label(spec)).to.include({ units: 0, lapsed: 3, outcome: 'done' });
      }
    });

    it('a take is remembered at least a minute, and until its deadline', async () => {
      const { store, keys } = getStore();
      for (const spec of leasable(10)) {
        const k = keys(`memory-${label(spec)}`, spec);
        await store.take!(k, spec, 1, at(0), { takeId: 'm', holdMs: 100 });
        expect((await store.take!(k, spec, 1, at(59_999), { takeId: 'm', holdMs: 100 })).outcome, label(spec)).to.equal('repeat');
        await store.take!(k, spec, 1, at(0), { takeId: 'd', holdMs: 100, deadline: at(4_000_000) });
        expect((await store.reclaim!(k, spec, { takeId: 'd' }, at(3_999_999))).outcome, label(spec)).to.equal('done');
      }
    });

    it('the take ledger is bounded: past 256 ids the least recently written is forgotten', async () => {
      const { store, keys } = getStore();
      const spec: RateSpec = { type: 'fixed_window', limit: 1_000, windowMs: 60_000 };
      const k = keys('bounded', spec);
      for (let i = 0; i < 257; i++) await store.take!(k, spec, 1, at(0), { takeId: `t${i}` });
      expect(await store.take!(k, spec, 1, at(1), { takeId: 't256' })).to.include({ units: 1, outcome: 'repeat' });
      expect(await store.take!(k, spec, 1, at(1), { takeId: 't0' })).to.include({ units: 1, outcome: 'done', remaining: 1_000 - 258 });
    });
  });

  describe('named gives (a give that reaches the counter after its holder gave up on it)', () => {
    const leasable = (capacity: number) => rateSpecs(capacity).filter((spec) => spec.type !== 'sliding_window_log');
    /** When units taken at at(0) with a hold of 100 ms have lapsed (as for named takes above). */
    const lapseAt = (spec: RateSpec): number =>
      spec.type === 'fixed_window' || spec.type === 'sliding_window_counter' ? spec.windowMs / (spec.type === 'sliding_window_counter' ? spec.subWindows : 1) : spec.type === 'quota' ? spec.periodMs : 100;

    /**
     * Of 10 units, 4 taken at at(0) (held 100 ms) and 2 spent: 4 remain, and room for the 4 to go back
     * (a bucket refills a little meanwhile, and takes back only what fits). Answers their tag.
     */
    async function taken(store: CounterStore, k: string[], spec: RateSpec): Promise<number> {
      const tag = (await store.take!(k, spec, 4, at(0), { holdMs: 100 })).windowTag;
      await store.consume(k, spec, 2, at(0));
      return tag;
    }

    it('a give past its deadline gives nothing back and says so; at its deadline it still runs', async () => {
      const { store, keys } = getStore();
      for (const spec of leasable(10)) {
        const k = keys(`give-deadline-${label(spec)}`, spec);
        const tag = await taken(store, k, spec);
        const late = await store.giveBack!(k, spec, { units: 4, windowTag: tag, nowMs: at(10), named: { takeId: 'g', deadline: at(9) } });
        expect(late, label(spec)).to.include({ units: 0, lapsed: 0, outcome: 'late' });
        expect((await store.peek(k, spec, at(10))).remaining, label(spec)).to.equal(4);
        // Late, it was not recorded: the same id in time runs.
        const inTime = await store.giveBack!(k, spec, { units: 4, windowTag: tag, nowMs: at(10), named: { takeId: 'g', deadline: at(10) } });
        expect(inTime, label(spec)).to.include({ units: 4, lapsed: 0, outcome: 'done' });
        expect((await store.peek(k, spec, at(10))).remaining, label(spec)).to.equal(8);
      }
    });

    it('the same give id again answers the recorded result and gives nothing more', async () => {
      const { store, keys } = getStore();
      for (const spec of leasable(10)) {
        const k = keys(`give-repeat-${label(spec)}`, spec);
        const tag = await taken(store, k, spec);
        expect(await store.giveBack!(k, spec, { units: 4, windowTag: tag, nowMs: at(1), named: { takeId: 'g', deadline: at(50) } }), label(spec)).to.include({ units: 4, lapsed: 0, outcome: 'done' });
        await store.consume(k, spec, 2, at(2));
        const again = await store.giveBack!(k, spec, { units: 4, windowTag: tag, nowMs: at(3), named: { takeId: 'g', deadline: at(50) } });
        expect(again, label(spec)).to.include({ units: 4, lapsed: 0, outcome: 'repeat' });
        expect((await store.peek(k, spec, at(3))).remaining, `${label(spec)} given back once`).to.equal(6);
      }
    });

    it('a reclaim of a give answers what the give did, lapsed units included, and gives nothing more', async () => {
      const { store, keys } = getStore();
      for (const spec of leasable(10)) {
        const k = keys(`give-settled-${label(spec)}`, spec);
        const tag = await taken(store, k, spec);
        await store.giveBack!(k, spec, { units: 4, windowTag: tag, nowMs: at(1), named: { takeId: 'g', deadline: at(50) } });
        for (const when of [2, 3]) {
          const settled = await store.reclaim!(k, spec, { takeId: 'g', deadline: at(50) }, at(when));
          expect(settled, label(spec)).to.include({ units: 4, lapsed: 0, outcome: 'repeat' });
        }
        expect((await store.peek(k, spec, at(3))).remaining, `${label(spec)} given back once`).to.equal(8);
        // Units whose window ended (a bucket's hold passed) lapse, and the give's record says so.
        const later = keys(`give-settled-lapsed-${label(spec)}`, spec);
        const lapsedTag = await taken(store, later, spec);
        expect(await store.giveBack!(later, spec, { units: 4, windowTag: lapsedTag, nowMs: at(lapseAt(spec)), named: { takeId: 'l' } }), label(spec)).to.include({ units: 0, lapsed: 4, outcome: 'done' });
        expect(await store.reclaim!(later, spec, { takeId: 'l' }, at(lapseAt(spec))), label(spec)).to.include({ units: 0, lapsed: 4, outcome: 'repeat' });
      }
    });

    it('a reclaim before the give leaves a tombstone: the give does nothing, and its units go back under a new id', async () => {
      const { store, keys } = getStore();
      for (const spec of leasable(10)) {
        const k = keys(`give-ahead-${label(spec)}`, spec);
        const tag = await taken(store, k, spec);
        expect(await store.reclaim!(k, spec, { takeId: 'g', deadline: at(50) }, at(1)), label(spec)).to.include({ units: 0, lapsed: 0, outcome: 'ahead' });
        const held = await store.giveBack!(k, spec, { units: 4, windowTag: tag, nowMs: at(10), named: { takeId: 'g', deadline: at(50) } });
        expect(held, label(spec)).to.include({ units: 0, lapsed: 0, outcome: 'reclaimed' });
        expect((await store.peek(k, spec, at(10))).remaining, label(spec)).to.equal(4);
        expect(await store.giveBack!(k, spec, { units: 4, windowTag: tag, nowMs: at(11), named: { takeId: 'g2', deadline: at(60) } }), label(spec)).to.include({ units: 4, outcome: 'done' });
        expect((await store.peek(k, spec, at(11))).remaining, label(spec)).to.equal(8);
      }
    });

    it("an id is a take's or a give's: the other never runs under it, and a take's reclaim gives back once", async () => {
      const { store, keys } = getStore();
      for (const spec of leasable(10)) {
        const k = keys(`give-ids-${label(spec)}`, spec);
        await store.consume(k, spec, 2, at(0));
        const take = await store.take!(k, spec, 4, at(0), { takeId: 't', holdMs: 100 });
        // A give under the take's id gives nothing; the take's reclaim still gives its 4 back, once.
        expect(await store.giveBack!(k, spec, { units: 4, windowTag: take.windowTag, nowMs: at(1), named: { takeId: 't' } }), label(spec)).to.include({ units: 0, lapsed: 0, outcome: 'reclaimed' });
        expect(await store.reclaim!(k, spec, { takeId: 't' }, at(2)), label(spec)).to.include({ units: 4, lapsed: 0, outcome: 'done' });
        expect(await store.reclaim!(k, spec, { takeId: 't' }, at(2)), label(spec)).to.include({ units: 4, outcome: 'repeat' });
        expect((await store.peek(k, spec, at(2))).remaining, label(spec)).to.equal(8);
        // A take under a give's id takes nothing, and a reclaim of the give is never taken for a grant.
        const tag = await taken(store, k, spec);
        await store.giveBack!(k, spec, { units: 4, windowTag: tag, nowMs: at(3), named: { takeId: 'v' } });
        expect(await store.take!(k, spec, 4, at(4), { takeId: 'v', holdMs: 100 }), label(spec)).to.include({ units: 0, outcome: 'reclaimed' });
        expect(await store.reclaim!(k, spec, { takeId: 'v' }, at(5)), label(spec)).to.include({ units: 4, outcome: 'repeat' });
        expect((await store.peek(k, spec, at(5))).remaining, `${label(spec)} nothing taken or given twice`).to.equal(6);
      }
    });
  });

  describe('capacity lease return (give) on the buckets', () => {
    // Refilled one unit an hour: nothing refills within a test.
    const buckets: RateSpec[] = [
      { type: 'token_bucket', capacity: 10, rateUnits: 1, ratePeriodMs: 3_600_000 },
      { type: 'leaky_bucket', capacity: 10, rateUnits: 1, ratePeriodMs: 3_600_000 },
    ];

    it('answers the units that went back: never more than the room left, as the bucket stays within its capacity', async () => {
      const { store, keys } = getStore();
      for (const spec of buckets) {
        const k = keys('give', spec);
        const taken = await store.take!(k, spec, 3, at(0), { holdMs: 100 });
        // Back by the take's instant plus the hold of 100 ms, and spendable that long.
        expect(taken, label(spec)).to.include({ units: 3, windowTag: at(100), windowLeftMs: 100 });
        // 5 units offered back, 3 fit (the other 2 were never taken: they lapse, counted by the holder).
        const back = await store.giveBack!(k, spec, { units: 5, windowTag: taken.windowTag, nowMs: at(0) });
        expect(back, label(spec)).to.include({ units: 3, remaining: 10 });
        expect((await store.giveBack!(k, spec, { units: 1, windowTag: taken.windowTag, nowMs: at(0) })).units, `${label(spec)} full`).to.equal(0);
      }
    });

    it('takes nothing back from the instant the units had to be back by: they lapsed (back later, they would join the tokens it refilled meanwhile)', async () => {
      const { store, keys } = getStore();
      for (const spec of buckets) {
        const k = keys('give-late', spec);
        const taken = await store.take!(k, spec, 3, at(0), { holdMs: 100 });
        const late = await store.giveBack!(k, spec, { units: 3, windowTag: taken.windowTag, nowMs: at(100) });
        expect(late, label(spec)).to.include({ units: 0, remaining: 7 });
        // Nothing went back: the 7 left are all the bucket admits.
        expect((await store.take!(k, spec, 10, at(100))).units, label(spec)).to.equal(7);
      }
    });
  });

  describe('concurrency (leases)', () => {
    const spec: ConcurrencySpec = { type: 'concurrency', maxConcurrency: 3, leaseTtlMs: 5_000 };

    it('never admits more than max_concurrency distinct leases; remaining counts the free slots', async () => {
      const { store, keys } = getStore();
      const k = keys('leases', spec);
      for (let i = 0; i < 3; i++) {
        expect(await store.acquire(k, spec, `l${i}`, at(i))).to.include({ allowed: true, remaining: 2 - i, retryAfterMs: 0, newSlot: true });
      }
      for (let i = 3; i < 10; i++) {
        const r = await store.acquire(k, spec, `l${i}`, at(10));
        expect(r).to.deep.equal({ allowed: false, remaining: 0, retryAfterMs: 4_990, resetAfterMs: 4_992, newSlot: false });
      }
      // Held leases can still be refreshed when the limiter is full: that takes no new slot.
      expect(await store.acquire(k, spec, 'l0', at(20))).to.include({ allowed: true, remaining: 0, newSlot: false });
    });

    it('many releases of the same and of unknown leases never push the count below zero', async () => {
      const { store, keys } = getStore();
      const k = keys('neg-leases', spec);
      await store.acquire(k, spec, 'a', at(0));
      for (let i = 0; i < 5; i++) {
        const r = await store.release(k, spec, i === 0 ? 'a' : `ghost${i}`, at(1));
        expect(r).to.include({ allowed: i === 0, remaining: capacityOf(spec) });
      }
      for (let i = 0; i < 3; i++) {
        expect((await store.acquire(k, spec, `n${i}`, at(2))).allowed).to.equal(true);
      }
      expect((await store.acquire(k, spec, 'n3', at(2))).allowed).to.equal(false);
    });
  });
  describe('a quota key written by a counter of another period', () => {
    it('expires at the end of the window its last consume or take counted, as the script\'s PEXPIRE', async () => {
      const { store, keys } = getStore();
      const long: RateSpec = { type: 'quota', limit: 1, periodMs: 2 };
      const short: RateSpec = { type: 'quota', limit: 100, periodMs: 1 };
      const k = keys('quota-two-periods', long);
      expect(await store.consume(k, long, 1, at(1))).to.include({ allowed: true, remaining: 0 });
      // The same period start, the other period: the key now ends with the shorter one.
      expect(await store.take!(k, short, 1, at(1))).to.include({ allowed: true, units: 1 });
      expect(await store.consume(k, long, 6, at(2))).to.deep.include({ allowed: false, remaining: 1, retryAfterMs: 2 });
    });
  });
});
