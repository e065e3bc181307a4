/**
 * Emulator-only behaviour: memory stays bounded. Every key carries an expiry; the sweeper deletes
 * expired keys in bounded batches, and expiry is never observable (expired state behaves as absent).
 */
import { expect } from 'chai';
import fc from 'fast-check';
import type { CounterSpec, ConcurrencySpec, RateSpec } from '../../src/counters/counter-spec.js';
import { ACQUIRE_FIELDS, ALGORITHM_LEASE_FIELDS, DECISION_FIELDS } from '../../src/counters/counter-replies.js';
import { counterKeys } from '../../src/counters/keys.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { T0 } from '../support/counter-stores.js';
import { everySpec } from '../support/counter-specs.js';

const SHORT_SPECS: CounterSpec[] = everySpec(10, 100);

/** Longest time after the last operation that any SHORT_SPECS key may live. */
const SHORT_MAX_LIFE_MS = 250;

async function touch(store: MemoryCounterStore, spec: CounterSpec, key: string[], now: number): Promise<void> {
  if (spec.type === 'concurrency') await store.acquire(key, spec, 'lease', now);
  else await store.consume(key, spec, 3, now);
}

describe('MemoryCounterStore (emulator only)', function () {
  this.timeout(30_000);

  it('answers with the declared reply fields, in their order, as the scripts reply (counter-replies.ts)', async () => {
    const store = new MemoryCounterStore({ now: () => T0, sweepIntervalMs: 0 });
    const decision = Object.keys(DECISION_FIELDS);
    // A lease operation: the algorithm's fields, then what the take ledger's port adds (lease.lua's lease_reply).
    const lease = [...Object.keys(ALGORITHM_LEASE_FIELDS), 'storeNow', 'outcome', 'lapsed'];
    for (const spec of SHORT_SPECS) {
      const keys = counterKeys('shape:', 'p', spec, ['u']);
      if (spec.type === 'concurrency') {
        expect(Object.keys(await store.acquire(keys, spec, 's1', T0)), spec.type).to.deep.equal(Object.keys(ACQUIRE_FIELDS));
        expect(Object.keys(await store.release(keys, spec, 's1', T0)), spec.type).to.deep.equal(decision);
        continue;
      }
      for (const answer of [await store.consume(keys, spec, 1, T0), await store.peek(keys, spec, T0), await store.consume(keys, spec, 1_000, T0), await store.refund(keys, spec, 1, T0)]) {
        expect(Object.keys(answer), spec.type).to.deep.equal(decision);
      }
      if (spec.type === 'sliding_window_log') continue; // it takes no capacity lease
      const taken = await store.take(keys, spec, 2, T0);
      expect(Object.keys(taken), spec.type).to.deep.equal(lease);
      expect(Object.keys(await store.giveBack(keys, spec, { units: 2, windowTag: taken.windowTag, nowMs: T0 })), spec.type).to.deep.equal(lease);
    }
  });

  it('is bounded: 1e5 keys with short windows are all swept once their time has passed', async () => {
    let now = T0;
    const store = new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0 });
    const spec: RateSpec = { type: 'fixed_window', limit: 5, windowMs: 100 };
    for (let i = 0; i < 100_000; i++) {
      await store.consume(counterKeys('m:', 'p', spec, [`user-${i}`]), spec, 1);
    }
    expect(store.size).to.equal(100_000);
    // Before expiry a sweep deletes nothing.
    let deleted = 0;
    for (let i = 0; i < 10; i++) deleted += store.sweep();
    expect(deleted).to.equal(0);
    expect(store.size).to.equal(100_000);
    now += 100;
    for (let i = 0; i < 10 && store.size > 0; i++) store.sweep();
    expect(store.size).to.equal(0);
    await store.close();
  });

  it('sweeps at most sweepBatch keys per call and resumes where it stopped', async () => {
    let now = T0;
    const store = new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0, sweepBatch: 1_000 });
    const short: RateSpec = { type: 'quota', limit: 5, periodMs: 50 };
    const long: RateSpec = { type: 'quota', limit: 5, periodMs: 3_600_000 };
    // Interleave 5,000 short-lived and 5,000 long-lived keys.
    for (let i = 0; i < 5_000; i++) {
      await store.consume(counterKeys('m:', 'short', short, [String(i)]), short, 1);
      await store.consume(counterKeys('m:', 'long', long, [String(i)]), long, 1);
    }
    expect(store.size).to.equal(10_000);
    now += 50;
    const perCall: number[] = [];
    for (let i = 0; i < 10; i++) perCall.push(store.sweep());
    // Each call looks at 1,000 keys, half of them expired.
    expect(perCall).to.deep.equal(Array(10).fill(500));
    expect(store.size).to.equal(5_000);
    // The cursor wraps round: another pass finds nothing more to delete.
    let more = 0;
    for (let i = 0; i < 6; i++) more += store.sweep();
    expect(more).to.equal(0);
    expect(store.size).to.equal(5_000);
    // And a sweep with an explicit time deletes the rest once their period is over.
    for (let i = 0; i < 20 && store.size > 0; i++) expect(store.sweep(now + 3_600_000)).to.be.at.most(1_000);
    expect(store.size).to.equal(0);
    await store.close();
  });

  it('stops a sweep at its deadline, so a mass expiry never stalls the event loop for long', async () => {
    let now = T0;
    const store = new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0 });
    const spec: RateSpec = { type: 'fixed_window', limit: 5, windowMs: 100 };
    for (let i = 0; i < 5_000; i++) await store.consume(counterKeys('m:', 'p', spec, [String(i)]), spec, 1);
    now += 1_000;
    // A deadline already passed: the clock is read every 512 keys, so the sweep stops after 511.
    expect(store.sweep(now, performance.now() - 1)).to.equal(511);
    expect(store.sweep(now)).to.equal(5_000 - 511);
    expect(store.size).to.equal(0);
    await store.close();
  });

  it('every algorithm gives its keys an expiry: all seven are swept after their time', async () => {
    let now = T0;
    const store = new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0 });
    for (const spec of SHORT_SPECS) {
      for (let i = 0; i < 100; i++) await touch(store, spec, counterKeys('m:', 'p', spec, [String(i)]), now);
    }
    expect(store.size).to.be.at.least(SHORT_SPECS.length * 100);
    now += SHORT_MAX_LIFE_MS;
    store.sweep();
    expect(store.size).to.equal(0);
    await store.close();
  });

  it('releasing the last lease deletes the key at once', async () => {
    const store = new MemoryCounterStore({ sweepIntervalMs: 0 });
    const spec: ConcurrencySpec = { type: 'concurrency', maxConcurrency: 2, leaseTtlMs: 60_000 };
    const key = counterKeys('m:', 'p', spec, ['u']);
    await store.acquire(key, spec, 'a', T0);
    await store.acquire(key, spec, 'b', T0);
    expect(store.size).to.equal(1);
    await store.release(key, spec, 'a', T0);
    expect(store.size).to.equal(1);
    await store.release(key, spec, 'b', T0);
    expect(store.size).to.equal(0);
    await store.close();
  });

  it('sweeping is unobservable: a swept key answers like a never-used one', async () => {
    let now = T0 + 12_345;
    const swept = new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0 });
    for (const spec of SHORT_SPECS) {
      const key = counterKeys('m:', 'p', spec, ['u']);
      await touch(swept, spec, key, now);
    }
    now += SHORT_MAX_LIFE_MS;
    const answers = async (store: MemoryCounterStore) => {
      const all: unknown[] = [];
      for (const spec of SHORT_SPECS) {
        const key = counterKeys('m:', 'p', spec, ['u']);
        all.push(spec.type === 'concurrency' ? await store.acquire(key, spec, 'x') : await store.consume(key, spec, 2));
      }
      return all;
    };
    const unswept = await answers(swept);
    // Same requests on a store that never saw the keys, and on the first after a sweep.
    const fresh = new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0 });
    expect(unswept).to.deep.equal(await answers(fresh));
    await swept.close();
    await fresh.close();
  });

  it('the background sweeper runs on its own interval', async function () {
    this.timeout(60_000);
    let now = T0;
    const store = new MemoryCounterStore({ now: () => now, sweepIntervalMs: 10, sweepBatch: 500 });
    const spec: RateSpec = { type: 'token_bucket', capacity: 5, rateUnits: 5, ratePeriodMs: 100 };
    for (let i = 0; i < 2_000; i++) await store.consume(counterKeys('m:', 'p', spec, [String(i)]), spec, 1);
    expect(store.size).to.equal(2_000);
    now += 1_000;
    // Nothing here calls sweep(): only the store's own timer can empty it. The deadline is a hang
    // guard, no claim about how soon.
    const hangGuard = Date.now() + 30_000;
    while (store.size > 0) {
      if (Date.now() > hangGuard) throw new Error(`hang guard: the background sweeper still left ${store.size} keys after 30 s`);
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(store.size).to.equal(0);
    await store.close();
  });

  it('answers synchronously (store.sync) exactly what the asynchronous operations answer', async () => {
    let now = T0 + 7;
    const viaSync = new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0 });
    const viaAsync = new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0 });
    const fromSync: unknown[] = [];
    const fromAsync: unknown[] = [];
    for (let step = 0; step < 40; step++) {
      for (const spec of SHORT_SPECS) {
        const key = counterKeys('m:', 'p', spec, [String(step % 3)]);
        if (spec.type === 'concurrency') {
          const lease = `lease-${step % 12}`;
          const release = step % 5 === 0;
          fromSync.push(release ? viaSync.sync.release(key, spec, lease) : viaSync.sync.acquire(key, spec, lease));
          fromAsync.push(release ? await viaAsync.release(key, spec, lease) : await viaAsync.acquire(key, spec, lease));
        } else {
          fromSync.push(viaSync.sync.consume(key, spec, 1 + (step % 4)));
          fromAsync.push(await viaAsync.consume(key, spec, 1 + (step % 4)));
        }
      }
      now += 3 + (step % 7) * 5;
    }
    expect(fromSync).to.deep.equal(fromAsync);
    expect(viaSync.sync.clock()).to.equal(now);
    await viaSync.close();
    await viaAsync.close();
  });

  it('fixed_window: a new window length keeps the count while the window start is the same (as the script)', async () => {
    const store = new MemoryCounterStore({ sweepIntervalMs: 0 });
    const ten: RateSpec = { type: 'fixed_window', limit: 10, windowMs: 10_000 };
    const twenty: RateSpec = { type: 'fixed_window', limit: 10, windowMs: 20_000 };
    const key = counterKeys('m:', 'p', ten, ['u']);
    // T0 is a multiple of 20 s: both windows start there.
    expect(await store.consume(key, ten, 3, T0 + 1_000)).to.deep.equal({ allowed: true, remaining: 7, retryAfterMs: 0, resetAfterMs: 9_000 });
    expect(await store.consume(key, twenty, 1, T0 + 2_000)).to.deep.equal({ allowed: true, remaining: 6, retryAfterMs: 0, resetAfterMs: 18_000 });
    // The key now lives to the end of the 20 s window...
    expect(store.sweep(T0 + 19_999)).to.equal(0);
    // ...and back on 10 s windows at T0 + 12 s a new window has started: a fresh count.
    expect(await store.consume(key, ten, 1, T0 + 12_000)).to.deep.equal({ allowed: true, remaining: 9, retryAfterMs: 0, resetAfterMs: 8_000 });
    expect(store.sweep(T0 + 20_000)).to.equal(1);
    await store.close();
  });

  it('answers a reused key array (which carries its fixed_window slot) exactly as fresh arrays, through expiry, sweeps, refunds and close', () => {
    // DecisionService hands the store the same array for a counter; the store keeps the slot on it.
    // A second store handed the same arrays must neither read nor disturb the first one's slots.
    const spec: RateSpec = { type: 'fixed_window', limit: 5, windowMs: 100 };
    const step = fc.oneof(
      fc.record({ op: fc.constantFrom('consume', 'peek', 'refund'), key: fc.nat(2), cost: fc.integer({ min: 1, max: 4 }), store: fc.nat(1) }),
      fc.record({ op: fc.constant('advance'), ms: fc.integer({ min: 1, max: 120 }) }),
      fc.record({ op: fc.constant('sweep'), ahead: fc.integer({ min: 0, max: 300 }), store: fc.nat(1) }),
      fc.record({ op: fc.constant('close'), store: fc.nat(1) }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 80 }), (steps) => {
        let now = T0;
        const make = () => new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0 });
        const reused = [make(), make()];
        const fresh = [make(), make()];
        const arrays = [0, 1, 2].map((k) => counterKeys('m:', 'p', spec, [`user-${k}`]));
        for (const s of steps) {
          if (s.op === 'advance') now += s.ms;
          else if (s.op === 'sweep') expect(reused[s.store].sweep(now + s.ahead)).to.equal(fresh[s.store].sweep(now + s.ahead));
          else if (s.op === 'close') {
            void reused[s.store].close();
            void fresh[s.store].close();
          } else {
            const run = (store: MemoryCounterStore, keys: string[]) =>
              s.op === 'consume' ? store.sync.consume(keys, spec, s.cost) : s.op === 'peek' ? store.sync.peek(keys, spec) : store.sync.refund(keys, spec, s.cost);
            expect(run(reused[s.store], arrays[s.key])).to.deep.equal(run(fresh[s.store], [...arrays[s.key]]));
          }
          expect(reused.map((st) => st.size)).to.deep.equal(fresh.map((st) => st.size));
        }
        for (const store of [...reused, ...fresh]) void store.close();
      }),
      { numRuns: 500 },
    );
  });
});
