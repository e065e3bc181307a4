/**
 * Never over, proven by simulation (CONTRACT "Capacity lease: the mechanism"). Several regions × several
 * processes run the real lease code (LeaseHolder, ProcessUnitPool, storeParent) against one exact
 * in-memory counter (the emulator, the reference of the Lua scripts) with an injected clock. Two
 * levels: process holders whose parent is their region's holder, whose parent is the exact counter
 * (and one level: process holders straight on the counter). fast-check picks the interleaving:
 * decisions, refunds, deliveries of messages (each link delivers in order, links race each other, and
 * time passes while a message is on its way: message delays), clock steps (window ends, idle
 * max_hold returns), letting go (drain, policy change), process crashes (SIGKILL: units lost) and
 * outages of the parent.
 *
 * What must hold in every run, for every supported algorithm (usage = admitted units minus refunds the
 * holders accepted, as an exact counter counts a refund: never below zero in a window, period or sub-window):
 * - fixed_window, quota: usage in any window (quota period) ≤ limit;
 * - sliding_window_counter: at every admission, the sliding estimate of the admitted usage (what one
 *   exact counter would compute there, this admission included) ≤ limit;
 * - token_bucket, leaky_bucket: over any interval of length T, usage ≤ burst + rate × (T + H), with
 *   H = max_hold for one level of holders and 2 × max_hold for two.
 * A second property runs saturating demand without faults and prints the utilisation: admitted /
 * what one exact counter admits for the same requests.
 *
 * Deterministic: no wall clock, no real timers, a fixed seed (21). Knobs: LEASE_SIM_RUNS (400), LEASE_SIM_SEED
 * (explore other interleavings; fast-check prints the seed and path of a failing run).
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { CounterStoreUnavailableError } from '../../src/errors.js';
import type { CounterResult } from '../../src/counters/counter-store.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { LeaseHolder } from '../../src/lease/lease-holder.js';
import { ProcessUnitPool } from '../../src/lease/process-pool.js';
import { storeParent, type LeasedSpec } from '../../src/lease/store-parent.js';
import type { Grant, LeaseClock, LeaseParent } from '../../src/lease/types.js';

const T0 = 1_800_000_000_000;
const KEYS = ['sim:counter'];

// ---------------------------------------------------------------------------------------------------
// The simulated world: one clock, timers, and links that carry calls with delays and outages
// ---------------------------------------------------------------------------------------------------

class World {
  now = T0;
  private timers: { at: number; seq: number; fn: () => void; owner: Process | undefined }[] = [];
  private seq = 0;

  clockFor(owner: Process | undefined): LeaseClock {
    return {
      now: () => this.now,
      setTimer: (fn, ms) => {
        const timer = { at: this.now + Math.max(0, ms), seq: this.seq++, fn, owner };
        this.timers.push(timer);
        return timer;
      },
      clearTimer: (handle) => {
        this.timers = this.timers.filter((t) => t !== handle);
      },
    };
  }

  /** Moves the clock to `to`, firing due timers in time order (a dead process's timers never fire). */
  async advanceTo(to: number): Promise<void> {
    for (;;) {
      this.timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.timers[0];
      if (next === undefined || next.at > to) break;
      this.timers.shift();
      this.now = Math.max(this.now, next.at);
      if (next.owner === undefined || next.owner.alive) next.fn();
      await settle();
    }
    this.now = Math.max(this.now, to);
  }
}

/** Lets every pending promise callback run (the simulated world only moves between actions). */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * A connection from a holder to its parent: calls queue up and are carried one way, then the other,
 * only when the simulation delivers them (in order per link). While `down`, a delivered request fails
 * as an unreachable store does. A link whose caller died drops the answers (the call still ran).
 */
class Link {
  private readonly queue: (() => void)[] = [];
  down = false;
  callerAlive = true;

  constructor(private readonly target: () => LeaseParent) {}

  get pending(): number {
    return this.queue.length;
  }

  /** Delivers the oldest message on this link. */
  deliverOne(): boolean {
    const next = this.queue.shift();
    if (next === undefined) return false;
    next();
    return true;
  }

  parent(): LeaseParent {
    return {
      take: (n) => this.call((p) => p.take(n)),
      giveBack: (units, tag) => this.call((p) => p.giveBack(units, tag)),
      peek: () => this.call((p) => p.peek()),
    };
  }

  private call<T>(op: (parent: LeaseParent) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push(() => {
        if (this.down) {
          this.queue.push(() => this.callerAlive && reject(new CounterStoreUnavailableError('simulated outage')));
          return;
        }
        op(this.target()).then(
          (value) => this.queue.push(() => this.callerAlive && resolve(value)),
          (error) => this.queue.push(() => this.callerAlive && reject(error)),
        );
      });
    });
  }
}

interface Process {
  alive: boolean;
  holder: LeaseHolder;
  link: Link;
}

/** What happened to the demand: the units admitted and refunded, with their times. */
interface Ledger {
  /** `seq`: the order things happened in, within one instant. */
  admitted: { t: number; seq: number; cost: number }[];
  refunded: { t: number; seq: number; units: number }[];
  /** Units taken from the exact counter per window tag (quota: its periods). */
  periods: Set<number>;
  failed: number;
  refused: number;
}

interface SimConfig {
  spec: LeasedSpec;
  regions: number;
  processes: number;
  levels: 1 | 2;
  maxUnits: number;
  maxHoldMs: number;
}

class Simulation {
  readonly world = new World();
  readonly exact: MemoryCounterStore;
  readonly ledger: Ledger = { admitted: [], refunded: [], periods: new Set(), failed: 0, refused: 0 };
  private seq = 0;
  /** Per region: the link to the exact counter (region → global) and the region's holder. */
  readonly regions: { link: Link; holder: LeaseHolder | undefined }[] = [];
  readonly processes: Process[] = [];

  constructor(readonly config: SimConfig) {
    this.exact = new MemoryCounterStore({ now: () => this.world.now, sweepIntervalMs: 0 });
    const exactParent = storeParent(this.exact, KEYS, config.spec, this.world.clockFor(undefined));
    // Every take the exact counter answers is seen here, for the quota's periods.
    const observed: LeaseParent = {
      take: async (n) => this.observe(await exactParent.take(n)),
      giveBack: (units, tag) => exactParent.giveBack(units, tag),
      peek: () => exactParent.peek(),
    };
    for (let r = 0; r < config.regions; r++) {
      const region = { link: new Link(() => observed), holder: undefined as LeaseHolder | undefined };
      if (config.levels === 2) {
        region.holder = new LeaseHolder({
          parent: region.link.parent(),
          pool: new ProcessUnitPool(),
          clock: this.world.clockFor(undefined),
          maxUnits: Infinity,
          maxHoldMs: config.maxHoldMs,
        });
      }
      this.regions.push(region);
    }
    for (let p = 0; p < config.regions * config.processes; p++) this.processes.push(this.newProcess(p));
  }

  private observe(grant: Grant): Grant {
    if (grant.granted > 0 && grant.windowTag !== null) this.ledger.periods.add(Number(grant.windowTag));
    return grant;
  }

  private newProcess(index: number): Process {
    const region = this.regions[index % this.config.regions];
    const link = region.holder ? new Link(() => region.holder!.asParent()) : new Link(() => region.link.parent());
    // One level: each process's own link to the counter; it shares the region's outage switch.
    const process: Process = { alive: true, link, holder: undefined as unknown as LeaseHolder };
    process.holder = new LeaseHolder({
      parent: link.parent(),
      pool: new ProcessUnitPool(),
      clock: this.world.clockFor(process),
      maxUnits: this.config.maxUnits,
      maxHoldMs: this.config.maxHoldMs,
    });
    return process;
  }

  /** A process's holder, replaced by a fresh one after it let go (as the owner of holders does). */
  private holderOf(p: number): LeaseHolder {
    if (this.processes[p].holder.isClosed) this.processes[p] = this.newProcess(p);
    return this.processes[p].holder;
  }

  decide(p: number, cost: number): void {
    const index = p % this.processes.length;
    const holder = this.holderOf(index);
    const process = this.processes[index];
    const record = (result: CounterResult): void => {
      if (!process.alive) return;
      if (result.allowed) this.ledger.admitted.push({ t: this.world.now, seq: this.seq++, cost });
      else this.ledger.refused++;
    };
    const answer = holder.consume(cost);
    if (answer instanceof Promise) {
      answer.then(record, (error) => {
        if (!(error instanceof CounterStoreUnavailableError)) throw error;
        this.ledger.failed++; // the failure mode answers: outside the guarantee
      });
    } else {
      record(answer);
    }
  }

  refund(p: number, units: number): void {
    const index = p % this.processes.length;
    // Only units this world admitted earlier are refunded, as a client does.
    const admitted = this.ledger.admitted.reduce((sum, a) => sum + a.cost, 0) - this.ledger.refunded.reduce((sum, r) => sum + r.units, 0);
    const amount = Math.min(units, admitted);
    if (amount <= 0) return;
    const at = this.world.now;
    // Counted as it is accepted (before any later admission can spend the units).
    this.ledger.refunded.push({ t: at, seq: this.seq++, units: 0 });
    const entry = this.ledger.refunded[this.ledger.refunded.length - 1];
    void this.holderOf(index).refund(amount).then((answer) => {
      entry.units = answer.accepted;
    });
  }

  letGo(p: number): void {
    void this.holderOf(p % this.processes.length).letGo();
  }

  crash(p: number): void {
    const index = p % this.processes.length;
    const dead = this.processes[index];
    dead.alive = false;
    dead.link.callerAlive = false;
    const fresh = this.newProcess(index);
    this.processes[index] = fresh;
  }

  outage(r: number, down: boolean): void {
    const region = this.regions[r % this.regions.length];
    region.link.down = down;
    // One level: the processes of the region reach the counter through their own links.
    if (this.config.levels === 1) {
      this.processes.forEach((process, i) => {
        if (i % this.config.regions === r % this.regions.length) process.link.down = down;
      });
    }
  }

  /** Delivers one message on the `pick`-th link that has one. */
  deliver(pick: number): void {
    const links = [...this.regions.map((r) => r.link), ...this.processes.map((p) => p.link)].filter((l) => l.pending > 0);
    if (links.length > 0) links[pick % links.length].deliverOne();
  }

  /** Everything in flight arrives, with no outage, and every holder lets go. */
  async finish(): Promise<void> {
    for (const region of this.regions) region.link.down = false;
    for (const process of this.processes) process.link.down = false;
    for (let round = 0; round < 10_000; round++) {
      const before = this.pendingMessages();
      this.deliver(0);
      await settle();
      if (before === 0 && this.pendingMessages() === 0) break;
    }
  }

  private pendingMessages(): number {
    return [...this.regions.map((r) => r.link), ...this.processes.map((p) => p.link)].reduce((sum, l) => sum + l.pending, 0);
  }
}

// ---------------------------------------------------------------------------------------------------
// The guarantees
// ---------------------------------------------------------------------------------------------------

const EPSILON = 1e-9;

function checkNeverOver(sim: Simulation): void {
  const { spec } = sim.config;
  const { admitted, refunded } = sim.ledger;
  const usage = [...admitted.map((a) => ({ t: a.t, seq: a.seq, units: a.cost })), ...refunded.map((r) => ({ t: r.t, seq: r.seq, units: -r.units }))].sort(
    (a, b) => a.t - b.t || a.seq - b.seq,
  );
  switch (spec.type) {
    case 'fixed_window': {
      const perWindow = new Map<number, number>();
      for (const u of usage) {
        const w = Math.floor(u.t / spec.windowMs);
        // As the exact counter counts: a refund never takes usage below zero.
        perWindow.set(w, Math.max(0, (perWindow.get(w) ?? 0) + u.units));
      }
      for (const [w, used] of perWindow) expect(used, `usage in window ${w}`).to.be.at.most(spec.limit);
      return;
    }
    case 'quota': {
      // Periods as the exact counter started them; every admission lies in one of them.
      const starts = [...sim.ledger.periods].sort((a, b) => a - b);
      const perPeriod = new Map<number, number>();
      for (const u of usage) {
        const start = starts.filter((s) => s <= u.t && u.t < s + spec.periodMs).pop();
        if (u.units > 0) expect(start, `admission at ${u.t - T0} outside every quota period`).to.not.equal(undefined);
        if (start === undefined) continue;
        perPeriod.set(start, Math.max(0, (perPeriod.get(start) ?? 0) + u.units));
      }
      for (const [s, used] of perPeriod) expect(used, `usage in the period from ${s - T0}`).to.be.at.most(spec.limit);
      return;
    }
    case 'sliding_window_counter': {
      const bucketMs = spec.windowMs / spec.subWindows;
      const perBucket = new Map<number, number>();
      for (const u of usage) {
        const current = Math.floor(u.t / bucketMs);
        if (u.units < 0) {
          // As the exact counter takes a refund: from the newest live bucket back, none below zero.
          let left = -u.units;
          for (let b = current; b >= current - spec.subWindows && left > 0; b--) {
            const back = Math.min(perBucket.get(b) ?? 0, left);
            perBucket.set(b, (perBucket.get(b) ?? 0) - back);
            left -= back;
          }
          continue;
        }
        perBucket.set(current, (perBucket.get(current) ?? 0) + u.units);
        let estimate = 0;
        for (let b = current - spec.subWindows + 1; b <= current; b++) estimate += perBucket.get(b) ?? 0;
        const elapsed = u.t - current * bucketMs;
        estimate += ((perBucket.get(current - spec.subWindows) ?? 0) * (bucketMs - elapsed)) / bucketMs;
        expect(estimate, `sliding estimate at ${u.t - T0}`).to.be.at.most(spec.limit + EPSILON);
      }
      return;
    }
    case 'token_bucket':
    case 'leaky_bucket': {
      const rate = spec.rateUnits / spec.ratePeriodMs;
      const hold = sim.config.maxHoldMs * sim.config.levels;
      const admissions = usage.filter((u) => u.units > 0);
      // Refunds the holders accepted from max_hold(s) before an interval on may have been spent in it.
      const refunds = usage.filter((u) => u.units < 0);
      const refundedBetween = (from: number, to: number): number =>
        refunds.filter((u) => u.t >= from && u.t <= to).reduce((sum, u) => sum - u.units, 0);
      for (let i = 0; i < admissions.length; i++) {
        let sum = 0;
        const from = admissions[i].t;
        const back = refunds.length === 0 ? 0 : refundedBetween(from - hold, Infinity);
        for (let j = i; j < admissions.length; j++) {
          sum += admissions[j].units;
          const to = admissions[j].t;
          // Counting every later refund only loosens the bound; exact per interval when there are any.
          const within = back === 0 ? 0 : refundedBetween(from - hold, to);
          if (sum - within > spec.capacity + rate * (to - from + hold) + EPSILON) {
            expect.fail(`usage ${sum - within} over [${from - T0}, ${to - T0}] exceeds burst + rate × (T + H) = ${spec.capacity + rate * (to - from + hold)}`);
          }
        }
      }
      return;
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Arbitraries
// ---------------------------------------------------------------------------------------------------

const specArb: fc.Arbitrary<LeasedSpec> = fc.oneof(
  fc.record({ type: fc.constant('fixed_window' as const), limit: fc.integer({ min: 1, max: 40 }), windowMs: fc.constantFrom(100, 250, 1000) }),
  fc.record({ type: fc.constant('quota' as const), limit: fc.integer({ min: 1, max: 40 }), periodMs: fc.constantFrom(150, 400, 1000) }),
  fc
    .record({ limit: fc.integer({ min: 1, max: 40 }), subWindows: fc.constantFrom(1, 2, 4, 5), bucketMs: fc.constantFrom(50, 100, 250) })
    .map(({ limit, subWindows, bucketMs }): LeasedSpec => ({ type: 'sliding_window_counter', limit, windowMs: subWindows * bucketMs, subWindows })),
  fc.record({
    type: fc.constant('token_bucket' as const),
    capacity: fc.integer({ min: 1, max: 40 }),
    rateUnits: fc.constantFrom(1, 5, 20, 2.5),
    ratePeriodMs: fc.constantFrom(100, 1000),
  }),
  fc.record({
    type: fc.constant('leaky_bucket' as const),
    capacity: fc.integer({ min: 1, max: 40 }),
    rateUnits: fc.constantFrom(1, 5, 20, 2.5),
    ratePeriodMs: fc.constantFrom(100, 1000),
  }),
);

type Action =
  | { k: 'decide'; p: number; cost: number }
  | { k: 'refund'; p: number; units: number }
  | { k: 'deliver'; pick: number; times: number }
  | { k: 'advance'; ms: number }
  | { k: 'letGo'; p: number }
  | { k: 'crash'; p: number }
  | { k: 'outage'; r: number; down: boolean };

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  { weight: 10, arbitrary: fc.record({ k: fc.constant('decide' as const), p: fc.nat(20), cost: fc.oneof({ weight: 6, arbitrary: fc.constant(1) }, { weight: 2, arbitrary: fc.integer({ min: 2, max: 6 }) }) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('refund' as const), p: fc.nat(20), units: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 10, arbitrary: fc.record({ k: fc.constant('deliver' as const), pick: fc.nat(40), times: fc.integer({ min: 1, max: 6 }) }) },
  { weight: 5, arbitrary: fc.record({ k: fc.constant('advance' as const), ms: fc.oneof(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 41, max: 1500 })) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('letGo' as const), p: fc.nat(20) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('crash' as const), p: fc.nat(20) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('outage' as const), r: fc.nat(3), down: fc.constantFrom(true, false, false) }) },
);

const configArb: fc.Arbitrary<SimConfig> = fc.record({
  spec: specArb,
  regions: fc.integer({ min: 1, max: 3 }),
  processes: fc.integer({ min: 1, max: 3 }),
  levels: fc.constantFrom(1 as const, 2 as const),
  maxUnits: fc.oneof(fc.integer({ min: 1, max: 10 }), fc.constant(100)),
  maxHoldMs: fc.constantFrom(100, 250, 1000),
});

async function run(config: SimConfig, actions: Action[]): Promise<Simulation> {
  const sim = new Simulation(config);
  for (const action of actions) {
    switch (action.k) {
      case 'decide':
        sim.decide(action.p, action.cost);
        break;
      case 'refund':
        sim.refund(action.p, action.units);
        break;
      case 'deliver':
        for (let i = 0; i < action.times; i++) {
          sim.deliver(action.pick + i);
          await settle();
        }
        break;
      case 'advance':
        await sim.world.advanceTo(sim.world.now + action.ms);
        break;
      case 'letGo':
        sim.letGo(action.p);
        break;
      case 'crash':
        sim.crash(action.p);
        break;
      case 'outage':
        sim.outage(action.r, action.down);
        break;
    }
    await settle();
  }
  await sim.finish();
  return sim;
}

/**
 * Saturating demand without faults: every process decides each `tickMs`, every message on a link takes
 * one tick each way. Returns admitted units and what one exact counter admits for the same requests.
 */
async function saturate(config: SimConfig, ticks: number, tickMs: number): Promise<{ admitted: number; exact: number }> {
  const sim = new Simulation(config);
  const reference = new MemoryCounterStore({ now: () => sim.world.now, sweepIntervalMs: 0 });
  let exact = 0;
  for (let tick = 0; tick < ticks; tick++) {
    // What is on the wires now arrives this tick; what is sent now arrives next tick.
    const inFlight = [...sim.regions.map((r) => r.link), ...sim.processes.map((p) => p.link)].map((l) => [l, l.pending] as const);
    for (const [link, count] of inFlight) for (let i = 0; i < count; i++) link.deliverOne();
    await settle();
    for (let p = 0; p < sim.processes.length; p++) {
      sim.decide(p, 1);
      if ((await reference.consume(['exact'], config.spec, 1)).allowed) exact++;
    }
    await settle();
    // The last tick stays in the last window: answers still on their way land in it.
    if (tick < ticks - 1) await sim.world.advanceTo(sim.world.now + tickMs);
  }
  await sim.finish();
  await reference.close();
  checkNeverOver(sim);
  return { admitted: sim.ledger.admitted.length, exact };
}

describe('capacity leases: never over (deterministic simulation, fast-check)', function () {
  this.timeout(180_000);

  const totals = { runs: 0, admitted: 0, refused: 0, failed: 0 };
  after(() => {
    console.log(`      simulated runs: ${totals.runs}, decisions admitted ${totals.admitted}, refused ${totals.refused}, failure-mode ${totals.failed}`);
  });

  it('every algorithm, one and two levels of holders, any interleaving of decisions, refunds, deliveries, window ends, returns, crashes and outages', async () => {
    await fc.assert(
      fc.asyncProperty(configArb, fc.array(actionArb, { minLength: 1, maxLength: 200, size: 'max' }), async (config, actions) => {
        const sim = await run(config, actions);
        checkNeverOver(sim);
        totals.runs++;
        totals.admitted += sim.ledger.admitted.length;
        totals.refused += sim.ledger.refused;
        totals.failed += sim.ledger.failed;
      }),
      {
        // A fixed seed and a fixed number of runs, never a time limit: every `npm test` checks the same
        // interleavings whatever the machine's load (a random seed made a failure look like a flake).
        numRuns: Number(process.env.LEASE_SIM_RUNS ?? 400),
        seed: Number(process.env.LEASE_SIM_SEED ?? 21),
      },
    );
  });

  it('utilisation under saturating demand: admitted / what one exact counter admits (printed)', async () => {
    const specs: LeasedSpec[] = [
      { type: 'fixed_window', limit: 200, windowMs: 1000 },
      { type: 'quota', limit: 200, periodMs: 1000 },
      { type: 'sliding_window_counter', limit: 200, windowMs: 1000, subWindows: 4 },
      { type: 'token_bucket', capacity: 50, rateUnits: 200, ratePeriodMs: 1000 },
      { type: 'leaky_bucket', capacity: 50, rateUnits: 200, ratePeriodMs: 1000 },
    ];
    const lines: string[] = [];
    for (const spec of specs) {
      for (const levels of [1, 2] as const) {
        const { admitted, exact } = await saturate({ spec, regions: 2, processes: 3, levels, maxUnits: 100, maxHoldMs: 1000 }, 1000, 5);
        const utilisation = admitted / exact;
        lines.push(`${spec.type.padEnd(24)} levels ${levels}: admitted ${admitted} of exact ${exact}: utilisation ${utilisation.toFixed(3)}`);
        // Never over in total either, and most of the limit used.
        expect(admitted, `${spec.type}, ${levels} level(s)`).to.be.at.most(exact + (spec.type.endsWith('bucket') ? 200 * levels : 0));
        expect(utilisation, `${spec.type}, ${levels} level(s)`).to.be.at.least(0.8);
      }
    }
    console.log(`      utilisation, 2 regions × 3 processes, 5 s of saturating demand, 5 ms per hop:\n        ${lines.join('\n        ')}`);
  });
});
