/**
 * A model of issue 28 point 8 in virtual time (`npx tsx bench/refill-ahead-model.mts`; BENCHMARKS.md, "Fourth
 * wave: link faults"): four production RegionCounterStores (two regions, a MemoryRegionPool each) spend one
 * global fixed window of 1,000 (a MemoryCounterStore 25 ms away each way) at 500 decisions/s round-robin.
 * Prints the p95 of the decisions sent at 35%-60% used, how many took >= 25 ms, and how many decisions waited
 * for a refill (all, and at 35%-60%). A busy machine is modelled by env: JITTER (global link, extra ms each
 * way, uniform), RJ (the same for regional calls), STALL_MS / STALL_EVERY (servers descheduled), SEED.
 * Deterministic for a seed; no wall clock. TRACE=1 prints each refill and each wait at 35%-60%.
 */
import { MemoryCounterStore } from '../src/counters/memory-store.js';
import { MemoryRegionPool } from '../test/regions/support/memory-region-pool.js';
import { RegionPool } from '../src/regions/region-pool.js';
import { RegionCounterStore } from '../src/regions/region-store.js';
import type { LeaseClock } from '../src/lease/types.js';
import { setLogLevel } from '../src/util/log.js';
setLogLevel('error');

const T0 = 1_800_000_000_000 - (1_800_000_000_000 % 3_600_000) + 1000;
let seed = Number(process.env.SEED ?? 1);
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const JITTER = Number(process.env.JITTER ?? 0);
const LIMIT = 1000, RATE = 500, N = 1300, LINK = 25;

class World {
  now = T0; seq = 0;
  timers: { at: number; seq: number; fn: () => void }[] = [];
  clock: LeaseClock = {
    now: () => this.now,
    setTimer: (fn, ms) => { const t = { at: this.now + Math.max(0, ms), seq: this.seq++, fn }; this.timers.push(t); return t; },
    clearTimer: (h) => { this.timers = this.timers.filter((t) => t !== h); },
  };
  after(ms: number) { return new Promise<void>((r) => this.clock.setTimer(r, ms)); }
  async run(until: () => boolean) {
    while (!until()) {
      this.timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.timers.shift(); if (!next) break;
      this.now = Math.max(this.now, next.at); next.fn();
      for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
    }
  }
}
const world = new World();
const RJ = Number(process.env.RJ ?? 0);
const hop = (base: number) => base + (base > 1 ? (JITTER ? rand() * JITTER : 0) : (RJ ? rand() * RJ : 0));
let midWaits = 0;
// Busy machine: each server is descheduled now and then (STALL_MS long, on average every STALL_EVERY ms).
const STALL_MS = Number(process.env.STALL_MS ?? 0), STALL_EVERY = Number(process.env.STALL_EVERY ?? 300);
const stalls: [number, number][][] = [0, 1, 2, 3].map(() => { const out: [number, number][] = []; if (STALL_MS) for (let t = T0; t < T0 + 4000; t += STALL_EVERY * (0.5 + rand())) { const len = STALL_MS * (0.5 + rand()); out.push([t, t + len]); } return out; });
const unstalled = async (server: number) => { for (const [a, b] of stalls[server]) if (world.now >= a && world.now < b) await world.after(b - world.now); };
function delayed<T extends object>(target: T, oneWay: number, server = 0): T {
  return new Proxy(target, { get(store, name) {
    const v = Reflect.get(store, name);
    if (name === 'close') return async () => undefined;
    if (typeof v !== 'function') return v;
    return async (...args: unknown[]) => { await unstalled(server); await world.after(hop(oneWay)); const r = await v.apply(store, args); await world.after(hop(oneWay)); await unstalled(server); return r; };
  } });
}
const global = new MemoryCounterStore({ now: () => world.now, sweepIntervalMs: 0 });
const regions = [0, 1].map(() => ({ pool: new RegionPool(new MemoryRegionPool(() => world.now)), counters: new MemoryCounterStore({ now: () => world.now, sweepIntervalMs: 0 }) }));
let waits = 0;
let admittedNow = 0;
const stores = [0, 1, 0, 1].map((r, si) => new RegionCounterStore<any>({
  regional: delayed(regions[r].counters, 0.3, si), pool: delayed(regions[r].pool, 0.3, si), global: delayed(global, LINK, si),
  globalTimeoutMs: 1000, regionalTimeoutMs: 100, clock: world.clock, sweepIntervalMs: 250,
  events: () => ({ waited: (s: number) => { waits++; if (admittedNow >= 350 && admittedNow < 606) { midWaits++; if (process.env.TRACE) console.log(`WAIT t=${world.now - T0} used=${admittedNow} server=${si} region=${r} waited=${(s*1000).toFixed(0)}ms`); } }, refilled: (g: number) => { if (process.env.TRACE) console.log(`t=${world.now - T0} used=${admittedNow} region=${r} server=${si} granted=${g} globalUsed=${(global as any).peekUsed?.() ?? ''}`); } }),
}));
const spec: any = { type: 'fixed_window', limit: LIMIT, windowMs: 3_600_000, global: { policyId: 'g', lease: { shape: 'window', maxUnits: Infinity, maxHoldMs: 1000 } } };
const lat: number[] = []; const allowed: boolean[] = []; let done = 0;
for (let i = 0; i < N; i++) {
  world.clock.setTimer(() => {
    const t = world.now;
    void stores[i % 4].consume(['k'], spec, 1).then((res) => { lat[i] = world.now - t; allowed[i] = res.allowed; if (res.allowed) admittedNow++; done++; }, () => { lat[i] = world.now - t; allowed[i] = false; done++; });
  }, (i * 1000) / RATE);
}
await world.run(() => done === N);
const mid = lat.slice(350, 606).sort((a, b) => a - b);
const p95 = mid[Math.ceil(0.95 * mid.length) - 1];
console.log(`admitted ${allowed.filter(Boolean).length}; 35-60%: p95 ${p95.toFixed(1)} ms, >=25ms ${mid.filter((x) => x >= 25).length} waited(>=5ms) ${mid.filter((x) => x >= 5).length}/${mid.length}; all waits ${waits}, waits at 35-60%: ${midWaits}`);
const firstRefused = allowed.findIndex((a) => !a);
console.log('first refused index', firstRefused, 'slow indices:', lat.map((l, i) => [i, l] as const).filter(([i, l]) => l >= 25 && i >= 300 && i < 700).map(([i]) => i).join(','));
process.exit(0);
