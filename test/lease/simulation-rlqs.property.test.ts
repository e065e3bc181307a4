/**
 * The lease simulation's RLQS holders (test/regions/simulation.property.test.ts simulates the process and
 * region holders; this file adds Envoys' streams beside them, on the same counter): the production
 * RlqsHub and RlqsStream on each of one or two servers, model Envoys (test/lease/support/rlqs-model-envoy.ts)
 * on their streams, and the servers' process leases (ProcessLeases) deciding from the same exact counter
 * (MemoryCounterStore, the emulator the Lua is proven identical to). fast-check picks the interleaving:
 * requests to Envoys and decisions on servers, clock steps, deliveries of the streams' calls to the store
 * (a server's link to it may be down: a call then fails without running), and each Envoy's end: a last
 * report and a clean close, a cut (no last report; the Envoy goes on spending its assignment until it
 * expires), its server draining, or its reports stopping (the server abandons the bucket).
 *
 * Messages between an Envoy and its server arrive in order, each way within half the reporting interval
 * (the round trip the settling rule assumes, docs/envoy.md "Settling"). The window (1 h) does not end
 * within a run. What must hold in every run:
 * - never over: everything admitted, by Envoys and by process holders together, ≤ the limit;
 * - the streams' units are accounted for exactly: taken − given back = what their reports said was spent
 *   + what was counted lapsed; and what Envoys admitted that no report told (a cut Envoy's, a silent one's)
 *   is within what lapsed (`holder_lost` for a stream that died, once its hold ended);
 * - the process holders' likewise: taken − given back = admitted + lapsed;
 * - without a cut, a silence or an outage, nothing lapses: every unit unspent went back.
 *
 * Deterministic: a test clock, no real timers, a fixed seed (38). Knobs: RLQS_SIM_RUNS (300), RLQS_SIM_SEED.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import type { CounterResult } from '../../src/counters/counter-store.js';
import { counterKeys } from '../../src/counters/keys.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { CounterStoreUnavailableError } from '../../src/errors.js';
import { ProcessLeases, type LendingStore } from '../../src/lease/process-leases.js';
import { RlqsHub } from '../../src/lease/rlqs-hub.js';
import type { BucketUsage, RlqsStream } from '../../src/lease/rlqs-stream.js';
import type { LapseReason } from '../../src/lease/types.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import type { CompiledPolicy } from '../../src/matching/matcher.js';
import { makePolicy } from '../support/policies.js';
import { ModelEnvoy } from './support/rlqs-model-envoy.js';
import { TestClock } from './support/test-clock.js';

/** An hour's start: the 1 h window does not end within a run. */
const T0 = Date.UTC(2031, 0, 1);
const PREFIX = 'sim-rlqs:';

type EnvoyEnd = 'close' | 'cut' | 'drain' | 'silence';

interface Scenario {
  limit: number;
  holdMs: number;
  maxUnits: number;
  reportEveryMs: number;
  idleMs: number;
  servers: number;
  envoys: { server: number; toEnvoyMs: number; toServerMs: number }[];
  actions: Action[];
}

type Action =
  /** `n` requests to one Envoy, `gapMs` apart (the store's calls delivered meanwhile). */
  | { k: 'request'; e: number; n: number; gapMs: number }
  | { k: 'decide'; s: number; cost: number }
  | { k: 'advance'; ms: number }
  | { k: 'deliver'; s: number }
  | { k: 'storeDown'; s: number; down: boolean }
  | { k: 'end'; e: number; how: EnvoyEnd };

/** A server's calls to the counter store, delivered when the simulation says; while `down` they fail without running. */
class StoreLink {
  private readonly queue: (() => void)[] = [];
  down = false;

  call<T>(op: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push(() => {
        if (this.down) reject(new CounterStoreUnavailableError('simulated outage'));
        else op().then(resolve, reject);
      });
    });
  }

  deliverAll(): boolean {
    const calls = this.queue.splice(0);
    for (const call of calls) call();
    return calls.length > 0;
  }
}

/** One Envoy: its model, its stream on its server, the messages on their way both ways (in order, delayed). */
interface SimEnvoy {
  model: ModelEnvoy;
  server: number;
  stream: RlqsStream;
  close: (reported: boolean) => Promise<void>;
  /** The stream is open and the Envoy reports on it. */
  linked: { alive: boolean };
  /** What the server sent still reaches the Envoy (not after a cut). */
  reachable: { alive: boolean };
  /** The Envoy is still there to take requests (a closed one is gone; a cut one spends what it holds). */
  serving: boolean;
  end?: EnvoyEnd;
  inbox: number;
  outbox: number;
}

/** What the checks count. */
interface Tally {
  envoyAdmitted: number;
  decisionsAdmitted: number;
  /** Units of allowed requests in the reports that reached an open stream. */
  credited: number;
  rlqs: { taken: number; returned: number; lapsed: number; lapsedBy: Partial<Record<LapseReason, number>> };
  process: { taken: number; returned: number; lapsed: number };
  outages: number;
}

async function run(s: Scenario): Promise<{ tally: Tally; consumed: number; envoys: SimEnvoy[] }> {
  const world = new TestClock(T0);
  const policy = makePolicy({
    policy_id: 'p',
    scope: { user_id: '*' },
    algorithm: { type: 'fixed_window', limit: s.limit, window: '1h' },
    lease: { max_hold: `${s.holdMs}ms`, max_units: s.maxUnits },
    failure_mode: 'fail_closed',
  });
  const matcher = new LiveMatcher([policy]);
  const compiled = matcher.current().get('p')! as CompiledPolicy;
  const keys = counterKeys(PREFIX, 'p', compiled.spec, ['user_id', 'u']);
  const exact = new MemoryCounterStore({ now: () => world.now, sweepIntervalMs: 0 });
  const tally: Tally = { envoyAdmitted: 0, decisionsAdmitted: 0, credited: 0, rlqs: { taken: 0, returned: 0, lapsed: 0, lapsedBy: {} }, process: { taken: 0, returned: 0, lapsed: 0 }, outages: 0 };
  const links = Array.from({ length: s.servers }, () => new StoreLink());

  /** The exact counter as a server's streams reach it: over its link, takes and gives counted. */
  const rlqsStore = (link: StoreLink) => ({
    take: (...args: Parameters<MemoryCounterStore['take']>) =>
      link.call(async () => {
        const answer = await exact.take(...args);
        tally.rlqs.taken += answer.units;
        return answer;
      }),
    giveBack: (...args: Parameters<MemoryCounterStore['giveBack']>) =>
      link.call(async () => {
        const answer = await exact.giveBack(...args);
        tally.rlqs.returned += answer.units;
        return answer;
      }),
    peek: exact.peek.bind(exact),
  });
  /** The same counter as the process holders reach it, directly (their faults are the main simulation's). */
  const processStore: LendingStore = Object.assign(Object.create(exact) as MemoryCounterStore, {
    take: async (...args: Parameters<MemoryCounterStore['take']>) => {
      const answer = await exact.take(...args);
      tally.process.taken += answer.units;
      return answer;
    },
    giveBack: async (...args: Parameters<MemoryCounterStore['giveBack']>) => {
      const answer = await exact.giveBack(...args);
      tally.process.returned += answer.units;
      return answer;
    },
  });

  const servers = links.map((link) => ({
    hub: new RlqsHub({
      policies: matcher,
      store: rlqsStore(link),
      keyPrefix: PREFIX,
      clock: world.clockFor(),
      idleMs: s.idleMs,
      wallNow: () => world.now,
      events: {
        lapsed: (_policyId, units, reason) => {
          tally.rlqs.lapsed += units;
          tally.rlqs.lapsedBy[reason] = (tally.rlqs.lapsedBy[reason] ?? 0) + units;
        },
      },
    }),
    leases: new ProcessLeases({ store: processStore, maxWaitMs: 100, takeTimeoutMs: 3_600_000, clock: world.clockFor(), events: () => ({ lapsed: (units) => (tally.process.lapsed += units) }) }),
  }));

  const envoys: SimEnvoy[] = s.envoys.map((e) => {
    const linked = { alive: true };
    const reachable = { alive: true };
    const timers = world.clockFor(linked);
    const inbound = world.clockFor(reachable);
    const envoy = {} as SimEnvoy;
    envoy.model = new ModelEnvoy(world, (usage: BucketUsage) => {
      if (!linked.alive) return;
      envoy.outbox = Math.max(envoy.outbox, world.now + e.toServerMs);
      timers.setTimer(() => {
        tally.credited += usage.allowed;
        envoy.stream.report([usage]);
      }, envoy.outbox - world.now);
    });
    const { stream, close } = servers[e.server % s.servers]!.hub.open(
      (_bucket, assignment) => {
        if (!linked.alive) return;
        envoy.inbox = Math.max(envoy.inbox, world.now + e.toEnvoyMs);
        inbound.setTimer(() => envoy.model.apply(assignment), envoy.inbox - world.now);
      },
      // The server ended the stream (drained): the Envoy keeps what it holds, reports no more here.
      () => {
        linked.alive = false;
        void close(false);
      },
    );
    Object.assign(envoy, { server: e.server % s.servers, stream, close, linked, reachable, serving: true, inbox: 0, outbox: 0 });
    const tick = () => {
      envoy.model.report();
      timers.setTimer(tick, s.reportEveryMs);
    };
    timers.setTimer(tick, s.reportEveryMs);
    return envoy;
  });

  const decide = (server: number, cost: number) => {
    const ops = servers[server % s.servers]!.leases.operationsFor(keys, compiled)!;
    const record = (result: CounterResult) => {
      if (result.allowed) tally.decisionsAdmitted += cost;
    };
    const answer = ops.consume(keys, compiled.spec, cost);
    if (answer instanceof Promise) void answer.then(record, () => undefined);
    else record(answer);
  };

  const endEnvoy = async (envoy: SimEnvoy, how: EnvoyEnd) => {
    if (envoy.end !== undefined) return;
    envoy.end = how;
    if (how === 'close') {
      // The last report, then the half close behind it on the same way.
      envoy.model.report();
      envoy.serving = false;
      const at = Math.max(envoy.outbox, world.now);
      world.clockFor(envoy.linked).setTimer(() => {
        envoy.linked.alive = false;
        void envoy.close(true);
      }, at - world.now);
    } else if (how === 'cut') {
      envoy.linked.alive = false;
      envoy.reachable.alive = false;
      void envoy.close(false);
    } else if (how === 'drain') {
      void servers[envoy.server]!.hub.drain();
    } else {
      // Its reports stop (a hung data plane): the stream stays open, the server hears nothing more.
      envoy.linked.alive = false;
    }
  };

  for (const action of s.actions) {
    switch (action.k) {
      case 'request': {
        const envoy = envoys[action.e % envoys.length]!;
        for (let i = 0; i < action.n && envoy.serving; i++) {
          if (envoy.model.request()) tally.envoyAdmitted++;
          for (const link of links) link.deliverAll();
          await world.advanceTo(world.now + action.gapMs);
        }
        break;
      }
      case 'decide':
        decide(action.s, action.cost);
        break;
      case 'advance':
        for (const link of links) link.deliverAll();
        await world.advanceTo(world.now + action.ms);
        break;
      case 'deliver':
        links[action.s % links.length]!.deliverAll();
        break;
      case 'storeDown':
        links[action.s % links.length]!.down = action.down;
        if (action.down) tally.outages++;
        break;
      case 'end':
        await endEnvoy(envoys[action.e % envoys.length]!, action.how);
        break;
    }
    await world.advanceTo(world.now);
  }

  // The end: the stores answer again, every Envoy still there closes, the process holders let go, and
  // time runs past every hold and idle time with every call delivered.
  for (const link of links) link.down = false;
  for (const envoy of envoys) await endEnvoy(envoy, 'close');
  const letGo = Promise.all(servers.map((server) => server.leases.letGoAll()));
  for (let step = 0; step < 200; step++) {
    for (const link of links) link.deliverAll();
    await world.advanceTo(world.now + 50);
  }
  // A silent Envoy's stream is still open (its bucket abandoned): it ends now, cut.
  for (const envoy of envoys) if (envoy.end === 'silence') await envoy.close(false);
  for (let step = 0; step < 10 + (2 * s.holdMs) / 50; step++) {
    for (const link of links) link.deliverAll();
    await world.advanceTo(world.now + 50);
  }
  await letGo;
  const peek = await exact.peek(keys, compiled.spec as never);
  exact.close();
  for (const server of servers) expect(server.hub.status(), 'nothing left on any server').to.deep.equal({ streams: 0, buckets: 0, units_held: 0 });
  return { tally, consumed: s.limit - peek.remaining, envoys };
}

const ENDS: EnvoyEnd[] = ['close', 'cut', 'drain', 'silence'];

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  { weight: 12, arbitrary: fc.record({ k: fc.constant('request' as const), e: fc.nat(3), n: fc.integer({ min: 1, max: 40 }), gapMs: fc.integer({ min: 0, max: 10 }) }) },
  { weight: 4, arbitrary: fc.record({ k: fc.constant('decide' as const), s: fc.nat(1), cost: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 5, arbitrary: fc.record({ k: fc.constant('advance' as const), ms: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 40 }) }, { weight: 1, arbitrary: fc.integer({ min: 100, max: 1500 }) }) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('deliver' as const), s: fc.nat(1) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('storeDown' as const), s: fc.nat(1), down: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('end' as const), e: fc.nat(3), how: fc.constantFrom(...ENDS) }) },
);

const scenarioArb: fc.Arbitrary<Scenario> = fc
  .record({
    limit: fc.integer({ min: 5, max: 300 }),
    holdMs: fc.integer({ min: 200, max: 2000 }),
    maxUnits: fc.integer({ min: 1, max: 50 }),
    reportEveryMs: fc.integer({ min: 20, max: 150 }),
    idleMs: fc.integer({ min: 500, max: 3000 }),
    servers: fc.integer({ min: 1, max: 2 }),
    count: fc.integer({ min: 1, max: 4 }),
  })
  .chain(({ count, ...rest }) => {
    const delay = fc.integer({ min: 0, max: Math.floor(rest.reportEveryMs / 2) - 1 });
    return fc.record({
      ...Object.fromEntries(Object.entries(rest).map(([key, value]) => [key, fc.constant(value)])),
      envoys: fc.array(fc.record({ server: fc.nat(1), toEnvoyMs: delay, toServerMs: delay }), { minLength: count, maxLength: count }),
      actions: fc.array(actionArb, { minLength: 20, maxLength: 200 }),
    }) as fc.Arbitrary<Scenario>;
  });

describe('capacity leases with RLQS holders: never over (deterministic simulation, fast-check)', function () {
  this.timeout(300_000);

  it('Envoys taking grants, spending, reporting, closing, cut, drained or gone silent, beside process holders: never over, every unit accounted for', async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, async (s) => {
        const { tally, consumed, envoys } = await run(s);
        expect(tally.envoyAdmitted + tally.decisionsAdmitted, 'admitted by Envoys and process holders together').to.be.at.most(s.limit);
        expect(consumed, 'the counter: what both kinds of holder kept').to.equal(tally.rlqs.taken - tally.rlqs.returned + tally.process.taken - tally.process.returned);
        expect(tally.rlqs.taken - tally.rlqs.returned, 'streams: reported spent + lapsed').to.equal(tally.credited + tally.rlqs.lapsed);
        expect(tally.envoyAdmitted - tally.credited, 'admitted and never reported: within what lapsed').to.be.at.most(tally.rlqs.lapsed);
        expect(tally.process.taken - tally.process.returned, 'process holders: admitted + lapsed').to.equal(tally.decisionsAdmitted + tally.process.lapsed);
        const died = envoys.some((e) => e.end === 'cut' || e.end === 'silence');
        if (!died && tally.outages === 0) expect(tally.rlqs.lapsed, 'nothing lapses when every stream settles').to.equal(0);
        if (!envoys.some((e) => e.end === 'cut')) expect(tally.rlqs.lapsedBy.holder_lost ?? 0, 'holder_lost only for a cut stream').to.equal(0);
      }),
      { numRuns: Number(process.env.RLQS_SIM_RUNS ?? 300), seed: Number(process.env.RLQS_SIM_SEED ?? 38) },
    );
  });
});
