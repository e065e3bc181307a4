/**
 * Refills ahead of need (issue 28, point 8), in virtual time: two regions of two servers, each server a
 * real RegionCounterStore (refill lock, chunk rule, waiting decisions), the servers of a region sharing one
 * MemoryLeasePool (the port of lua/lease_pool.lua), the global counter a MemoryCounterStore 25 ms away
 * each way. One global fixed window of 1,000 spent by 500 decisions/s, round-robin over the servers.
 *
 * What must hold: no decision answered while the window goes from 35% to 60% used waited for a refill,
 * also on a busy machine, modelled as the global link's round trip stretched at random and as servers
 * descheduled now and then (every call of a stalled server waits for the stall to end, in both
 * directions). Counted, in virtual time (no wall clock, no real timers); the seeds are fixed.
 *
 * The same runs say where a slow decision at that stage comes from on such a machine: from the stalled
 * server it was sent to, not from a refill (bench scenario 15 measures the real processes).
 */
import { expect } from 'chai';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import type { RateSpec } from '../../src/counters/counter-spec.js';
import { MemoryLeasePool } from '../../src/lease/memory-region-pool.js';
import type { LendingStore } from '../../src/lease/process-leases.js';
import { RegionPool } from '../../src/lease/region-pool.js';
import { RegionCounterStore } from '../../src/lease/region-store.js';
import type { LeaseClock } from '../../src/lease/types.js';
import { setLogLevel } from '../../src/util/log.js';

const HOUR = 3_600_000;
/** An hour's start plus a second: the run never sees its window end. */
const T0 = 1_800_000_000_000 - (1_800_000_000_000 % HOUR) + 1000;
const LIMIT = 1000;
const RATE = 500;
const DECISIONS = 1300;
const LINK_MS = 25;
const REGION_STORE_MS = 0.3;

interface Machine {
  /** Extra one-way delay on the global link: uniform in [0, globalJitterMs). */
  globalJitterMs: number;
  /** Each server is descheduled for stallMs × [0.5, 1.5) about every stallEveryMs × [0.5, 1.5). */
  stallMs: number;
  stallEveryMs: number;
  seed: number;
}

/** A seeded generator (the same runs every time). */
function random(seed: number): () => number {
  let state = seed;
  return () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648;
}

async function spendWindow(machine: Machine) {
  const rand = random(machine.seed);
  let now = T0;
  let seq = 0;
  let timers: { at: number; seq: number; fn: () => void }[] = [];
  const clock: LeaseClock = {
    now: () => now,
    setTimer: (fn, ms) => {
      const timer = { at: now + Math.max(0, ms), seq: seq++, fn };
      timers.push(timer);
      return timer;
    },
    clearTimer: (handle) => {
      timers = timers.filter((t) => t !== handle);
    },
  };
  const after = (ms: number) => new Promise<void>((resolve) => clock.setTimer(resolve, ms));
  const stalls = [0, 1, 2, 3].map(() => {
    const out: [number, number][] = [];
    if (machine.stallMs > 0) {
      for (let t = T0; t < T0 + 5000; t += machine.stallEveryMs * (0.5 + rand())) out.push([t, t + machine.stallMs * (0.5 + rand())]);
    }
    return out;
  });
  const unstalled = async (server: number) => {
    for (const [from, to] of stalls[server]) if (now >= from && now < to) await after(to - now);
  };
  /** `target` as `server` reaches it: `oneWayMs` each way, and nothing moves while the server is stalled. */
  const over = <T extends object>(target: T, oneWayMs: () => number, server: number): T =>
    new Proxy(target, {
      get(store, name) {
        const value: unknown = Reflect.get(store, name);
        if (name === 'close') return async () => undefined;
        if (typeof value !== 'function') return value;
        return async (...args: unknown[]) => {
          await unstalled(server);
          await after(oneWayMs());
          const answer: unknown = await (value as (...a: unknown[]) => Promise<unknown>).apply(store, args);
          await after(oneWayMs());
          await unstalled(server);
          return answer;
        };
      },
    });

  const global = new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0 });
  const regions = [0, 1].map(() => ({ pool: new RegionPool(new MemoryLeasePool(() => now)), counters: new MemoryCounterStore({ now: () => now, sweepIntervalMs: 0 }) }));
  let admitted = 0;
  /** Decisions that waited for a refill, answered while the window was 35% to 60% used. */
  let waitsInTheMiddle = 0;
  let waits = 0;
  const stores = [0, 1, 0, 1].map(
    (region, server) =>
      new RegionCounterStore<LendingStore>({
        regional: over(regions[region].counters, () => REGION_STORE_MS, server),
        pool: over(regions[region].pool, () => REGION_STORE_MS, server),
        global: over(global, () => LINK_MS + rand() * machine.globalJitterMs, server),
        globalTimeoutMs: 1000,
        regionalTimeoutMs: 100,
        clock,
        sweepIntervalMs: 250,
        events: () => ({
          waited: () => {
            waits++;
            if (admitted >= 0.35 * LIMIT && admitted < 0.6 * LIMIT) waitsInTheMiddle++;
          },
        }),
      }),
  );
  const spec: RateSpec = { type: 'fixed_window', limit: LIMIT, windowMs: HOUR, global: { policyId: 'g', maxHoldMs: 1000 } } as RateSpec;
  let answered = 0;
  for (let i = 0; i < DECISIONS; i++) {
    clock.setTimer(() => {
      void stores[i % stores.length].consume(['k'], spec, 1).then(
        (result) => {
          if (result.allowed) admitted++;
          answered++;
        },
        () => answered++,
      );
    }, (i * 1000) / RATE);
  }
  while (answered < DECISIONS) {
    timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
    const next = timers.shift();
    if (!next) throw new Error('the simulation stalled');
    now = Math.max(now, next.at);
    next.fn();
    // Every promise callback the timer set off runs before the next instant.
    await new Promise((resolve) => setImmediate(resolve));
  }
  for (const store of stores) await store.close();
  return { admitted, waits, waitsInTheMiddle };
}

describe('refills ahead of need: two regions spending one global window (virtual time)', function () {
  this.timeout(120_000);
  before(() => setLogLevel('error'));
  after(() => setLogLevel('info'));

  const machines: [string, Omit<Machine, 'seed'>][] = [
    ['a quiet machine', { globalJitterMs: 0, stallMs: 0, stallEveryMs: 0 }],
    ['a global round trip stretched by up to 200 ms', { globalJitterMs: 100, stallMs: 0, stallEveryMs: 0 }],
    ['servers descheduled for 30-90 ms every 150-450 ms', { globalJitterMs: 0, stallMs: 60, stallEveryMs: 300 }],
    ['servers descheduled for 50-150 ms every 250-750 ms, the link stretched too', { globalJitterMs: 50, stallMs: 100, stallEveryMs: 500 }],
  ];
  for (const [name, machine] of machines) {
    it(`${name}: no decision answered at 35%-60% used waited for a refill; the window is spent exactly`, async function () {
      for (const seed of [1, 2]) {
        const run = await spendWindow({ ...machine, seed });
        expect(run.admitted, `seed ${seed}: admitted`).to.equal(LIMIT);
        expect(run.waitsInTheMiddle, `seed ${seed}: waits at 35%-60% used (${run.waits} in the whole run)`).to.equal(0);
      }
    });
  }
});
