import { expect } from 'chai';
import fc from 'fast-check';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CounterSpec } from '../../src/counters/counter-spec.js';
import { counterKeys } from '../../src/counters/keys.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { CounterSnapshots } from '../../src/counters/snapshot/counter-snapshots.js';
import { readSnapshot, writeSnapshot } from '../../src/counters/snapshot/snapshot-file.js';
import { COUNTER_SNAPSHOT_FILE, CounterSnapshotUnusableError } from '../../src/counters/snapshot/snapshot-format.js';
import { setLogLevel } from '../../src/util/log.js';
import { T0 } from '../support/counter-stores.js';

/**
 * The counter snapshot file: a restored key space answers every later operation exactly as the one it
 * was written from (property over every algorithm, capacity-lease ledgers and concurrency slots), expired
 * keys stay behind, the writer yields between slices, and an unusable file restores nothing.
 */

const PREFIX = 'rl:';
const HOUR = 3_600_000;
const SPECS: Record<string, CounterSpec> = {
  fixed: { type: 'fixed_window', limit: 10, windowMs: 1_000 },
  log: { type: 'sliding_window_log', limit: 10, windowMs: 1_000 },
  counter: { type: 'sliding_window_counter', limit: 10, windowMs: 1_000, subWindows: 4 },
  token: { type: 'token_bucket', capacity: 10, rateUnits: 7.3, ratePeriodMs: 1_000 },
  leaky: { type: 'leaky_bucket', capacity: 10, rateUnits: 2.5, ratePeriodMs: 1_000 },
  quota: { type: 'quota', limit: 10, periodMs: 1_000 },
  slots: { type: 'concurrency', maxConcurrency: 3, leaseTtlMs: 1_500 },
};
const NAMES = Object.keys(SPECS);

type Op =
  | { kind: 'consume' | 'refund'; spec: string; key: number; units: number }
  | { kind: 'take'; spec: string; key: number; units: number; id: number }
  | { kind: 'acquire' | 'release'; key: number; id: number }
  | { kind: 'wait'; ms: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constantFrom('consume' as const, 'refund' as const), spec: fc.constantFrom(...NAMES.slice(0, 6)), key: fc.nat(2), units: fc.integer({ min: 1, max: 6 }) }),
  fc.record({ kind: fc.constant('take' as const), spec: fc.constantFrom('fixed', 'counter', 'token', 'quota'), key: fc.nat(2), units: fc.integer({ min: 1, max: 6 }), id: fc.nat(3) }),
  fc.record({ kind: fc.constantFrom('acquire' as const, 'release' as const), key: fc.nat(2), id: fc.nat(4) }),
  fc.record({ kind: fc.constant('wait' as const), ms: fc.integer({ min: 0, max: 700 }) }),
);

/** Runs `op` on `store` at `clock.now`; the answer, to compare between stores. */
function run(store: MemoryCounterStore, clock: { now: number }, op: Op): unknown {
  if (op.kind === 'wait') return (clock.now += op.ms);
  const spec = SPECS['spec' in op ? op.spec : 'slots'];
  const keys = counterKeys(PREFIX, spec.type, spec, [`k${op.key}`]);
  const now = clock.now;
  const sync = store.sync;
  switch (op.kind) {
    case 'consume':
      return sync.consume(keys, spec as never, op.units, now);
    case 'refund':
      return sync.refund(keys, spec as never, op.units, now);
    case 'take':
      return sync.take(keys, spec as never, op.units, now, { takeId: `t${op.id}`, holdMs: 500 });
    case 'acquire':
      return sync.acquire(keys, spec as never, `l${op.id}`, now);
    case 'release':
      return sync.release(keys, spec as never, `l${op.id}`, now);
  }
}

describe('counter snapshots (the file and its restore)', () => {
  let dir: string;
  let file: string;
  before(() => setLogLevel('silent'));
  after(() => setLogLevel('info'));
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-counter-snapshot-'));
    file = join(dir, COUNTER_SNAPSHOT_FILE);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const storeAt = (clock: { now: number }) => new MemoryCounterStore({ now: () => clock.now, sweepIntervalMs: 0 });
  const restoreInto = async (store: MemoryCounterStore) => {
    const snapshots = new CounterSnapshots({ space: store.keyspace, dataDir: dir, keyPrefix: PREFIX, intervalMs: 1_000 });
    await snapshots.restore();
    return snapshots;
  };

  it('a restored key space answers every later operation exactly as the original (every algorithm, take ledgers, slots)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 40 }), fc.array(opArb, { maxLength: 40 }), async (before, afterwards) => {
        const clockA = { now: T0 };
        const original = storeAt(clockA);
        for (const op of before) run(original, clockA, op);
        await writeSnapshot(original.keyspace, file, PREFIX, 2);
        const clockB = { now: clockA.now };
        const restored = storeAt(clockB);
        await restoreInto(restored);
        for (const op of afterwards) expect(run(restored, clockB, op), JSON.stringify(op)).to.deep.equal(run(original, clockA, op));
        // The same live keys (the restore left the expired ones behind; the sweep drops them here).
        original.sweep(clockA.now);
        restored.sweep(clockB.now);
        expect(restored.size).to.equal(original.size);
      }),
      { numRuns: Number(process.env.SNAPSHOT_RUNS ?? 60) },
    );
  });

  it('keys of any characters and counts of any number come back as they were', async () => {
    const clock = { now: T0 };
    const store = storeAt(clock);
    const spec: CounterSpec = { type: 'fixed_window', limit: 100, windowMs: HOUR };
    const identities = ['plain', 'quote " and \\ backslash', 'line\nbreak\ttab\u0001', 'ünïcødé 🚦', '\u2028sep\u2029'];
    for (const [i, identity] of identities.entries()) store.sync.consume(counterKeys(PREFIX, 'p', spec, [identity]), spec, i + 0.25, clock.now);
    await writeSnapshot(store.keyspace, file, PREFIX, 1);
    const restored = storeAt(clock);
    await restoreInto(restored);
    for (const [i, identity] of identities.entries()) {
      expect(restored.sync.peek(counterKeys(PREFIX, 'p', spec, [identity]), spec, clock.now).remaining, identity).to.equal(100 - (i + 0.25));
    }
  });

  it('keys that expired by the restore stay behind; the others come back', async () => {
    const clock = { now: T0 };
    const store = storeAt(clock);
    const hourly: CounterSpec = { type: 'fixed_window', limit: 5, windowMs: HOUR };
    const daily: CounterSpec = { type: 'quota', limit: 5, periodMs: 24 * HOUR };
    store.sync.consume(counterKeys(PREFIX, 'h', hourly, ['a']), hourly, 2, clock.now);
    store.sync.consume(counterKeys(PREFIX, 'd', daily, ['a']), daily, 3, clock.now);
    await writeSnapshot(store.keyspace, file, PREFIX, 2);
    const read = await readSnapshot(file, PREFIX, T0 + 2 * HOUR);
    expect(read?.expired).to.equal(1);
    expect(read?.entries.map(([key]) => key)).to.deep.equal([counterKeys(PREFIX, 'd', daily, ['a'])[0]]);

    const later = { now: T0 + 2 * HOUR };
    const restored = storeAt(later);
    const snapshots = await restoreInto(restored);
    expect(snapshots.status()).to.deep.equal({ age_ms: 2 * HOUR, keys: 1 });
    expect(restored.sync.peek(counterKeys(PREFIX, 'd', daily, ['a']), daily, later.now).remaining).to.equal(2);
    expect(restored.sync.peek(counterKeys(PREFIX, 'h', hourly, ['a']), hourly, later.now).remaining).to.equal(5);
  });

  it('writes in slices: the event loop turns many times while 50,000 keys are written, and decisions made meanwhile are kept or follow', async () => {
    const clock = { now: T0 };
    const store = storeAt(clock);
    const spec: CounterSpec = { type: 'fixed_window', limit: 100, windowMs: HOUR };
    const keysOf = (i: number) => counterKeys(PREFIX, 'p', spec, [`user-${i}`]);
    for (let i = 0; i < 50_000; i++) store.sync.consume(keysOf(i), spec, 1, clock.now);
    let turns = 0;
    let writing = true;
    const turn = () => {
      turns++;
      // A decision between slices, on a key already written or still to come.
      store.sync.consume(keysOf(turns % 50_000), spec, 1, clock.now);
      if (writing) setImmediate(turn);
    };
    setImmediate(turn);
    const written = await writeSnapshot(store.keyspace, file, PREFIX, 0.05);
    writing = false;
    expect(written.keys).to.equal(50_000);
    expect(turns).to.be.above(10);
    const read = await readSnapshot(file, PREFIX, clock.now);
    expect(read?.entries).to.have.length(50_000);
  });

  describe('an unusable snapshot restores nothing, and says why', () => {
    let valid: string;
    beforeEach(async () => {
      const clock = { now: T0 };
      const store = storeAt(clock);
      for (const name of ['fixed', 'token', 'quota']) {
        const spec = SPECS[name];
        store.sync.consume(counterKeys(PREFIX, name, spec, ['a']), spec as never, 5, clock.now);
      }
      await writeSnapshot(store.keyspace, file, PREFIX, 2);
      valid = readFileSync(file, 'utf8');
    });

    const lines = () => valid.trimEnd().split('\n');
    const cases: [string, () => string, RegExp][] = [
      ['empty', () => '', /empty/],
      ['garbage', () => 'garbage\n', /not JSON/],
      ['truncated', () => `${lines().slice(0, -1).join('\n')}\n`, /without its trailer/],
      ['cut mid-line', () => valid.slice(0, valid.length - 30), /not JSON|trailer/],
      ['altered count', () => valid.replace(/,5\]/, ',4]'), /digest/],
      ['a line after the trailer', () => `${valid}[0,"rl:x",1,1000,1]\n`, /follows its trailer/],
      ['trailer counting wrong', () => valid.replace(/"keys":3/, '"keys":4'), /counts 4 keys/],
      ['not a counter', () => [lines()[0], '[7,"rl:x"]', ...lines().slice(1)].join('\n'), /line 2 is not a counter/],
      ['another format version', () => valid.replace('"version":1', '"version":2'), /format version 2/],
      ['not a snapshot header', () => valid.replace('rl-counter-snapshot', 'something-else'), /not a counter snapshot header/],
    ];
    for (const [name, content, why] of cases) {
      it(name, async () => {
        writeFileSync(file, content());
        let error: unknown;
        await readSnapshot(file, PREFIX, T0).catch((e: unknown) => (error = e));
        expect(error).to.be.instanceOf(CounterSnapshotUnusableError);
        expect((error as Error).message).to.match(why);
        const store = storeAt({ now: T0 });
        const snapshots = await restoreInto(store);
        expect(store.size).to.equal(0);
        expect(snapshots.status()).to.deep.equal({ age_ms: null, keys: 0 });
      });
    }

    it('another key prefix', async () => {
      let error: unknown;
      await readSnapshot(file, 'other:', T0).catch((e: unknown) => (error = e));
      expect((error as Error).message).to.equal('it holds the counters of key prefix "rl:", this server\'s is "other:"');
    });

    it('none at all is a first start: nothing restored, no error', async () => {
      rmSync(file);
      expect(await readSnapshot(file, PREFIX, T0)).to.equal(undefined);
    });
  });
});
