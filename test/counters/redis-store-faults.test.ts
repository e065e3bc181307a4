import { expect } from 'chai';
import { Redis } from 'ioredis';
import { CounterStoreUnavailableError } from '../../src/errors.js';
import type { CounterSpec, RateSpec } from '../../src/counters/counter-spec.js';
import { counterKeys } from '../../src/counters/keys.js';
import {
  connectRedisCounterStore,
  RedisCounterStore,
  type CounterStoreErrorEvent,
} from '../../src/counters/redis-store.js';
import { setLogLevel } from '../../src/util/log.js';
import { randomPrefix, startPrivateRedisWithAdmin, stopPrivateRedisWithAdmin, type RedisHandle } from '../support/redis.js';

/**
 * Fault behaviour against a private redis-server that the test stops, restarts, pauses and flushes:
 * the failure half of CONTRACT.md "Counter store failure" (the decision layer maps the error to
 * fail_open / fail_closed) and DESIGN.md rule 5.
 */
describe('RedisCounterStore under faults (private redis-server)', function () {
  this.timeout(60_000);
  const spec: RateSpec = { type: 'fixed_window', limit: 1_000_000, windowMs: 3_600_000 };
  /** An explicit time, so no call can straddle a window boundary. */
  const T = Math.floor(Date.now() / 3_600_000) * 3_600_000 + 1_000;
  let redis: RedisHandle;
  let admin: Redis;
  let store: RedisCounterStore;
  let events: CounterStoreErrorEvent[];

  before(async function () {
    setLogLevel('silent');
    ({ redis, admin } = await startPrivateRedisWithAdmin());
  });

  after(async function () {
    await stopPrivateRedisWithAdmin({ redis, admin });
    setLogLevel('info');
  });

  beforeEach(async function () {
    store = connectRedisCounterStore(redis.url, { commandTimeoutMs: 100 });
    events = [];
    store.onError((e) => events.push(e));
    await store.waitUntilReady(5_000);
  });

  afterEach(async function () {
    await store.close();
  });

  async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value?: T; error?: unknown }> {
    const start = performance.now();
    try {
      const value = await fn();
      return { ms: performance.now() - start, value };
    } catch (error) {
      return { ms: performance.now() - start, error };
    }
  }

  async function eventually<T>(fn: () => Promise<T>, withinMs: number): Promise<T> {
    const deadline = Date.now() + withinMs;
    let last: unknown;
    while (Date.now() < deadline) {
      try {
        return await fn();
      } catch (err) {
        last = err;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    throw new Error(`no success within ${withinMs} ms; last error: ${(last as Error)?.message}`);
  }

  it('Redis stopped mid-run: calls fail with CounterStoreUnavailableError within 50 ms; after a restart they succeed again by themselves', async function () {
    const keys = counterKeys(randomPrefix(), 'faults', spec, ['stop']);
    // Mid-run: several callers keep consuming while the server goes away.
    let running = true;
    const outcomes: { ms: number; error?: unknown }[] = [];
    const callers = Array.from({ length: 4 }, async () => {
      while (running) {
        outcomes.push(await timed(() => store.consume(keys, spec, 1)));
        await new Promise((r) => setImmediate(r));
      }
    });
    await new Promise((r) => setTimeout(r, 100));
    expect(outcomes.length).to.be.greaterThan(0);
    expect(outcomes.every((o) => o.error === undefined)).to.equal(true);

    const beforeStop = outcomes.length;
    await redis.stop();
    const stoppedAt = outcomes.length;
    await new Promise((r) => setTimeout(r, 300));
    running = false;
    await Promise.all(callers);

    // Every call that failed around or after the stop failed the right way, and fast.
    const failures = outcomes.slice(beforeStop).filter((o) => o.error !== undefined);
    expect(failures.length).to.be.greaterThan(0);
    for (const f of failures) expect(f.error).to.be.instanceOf(CounterStoreUnavailableError);
    const afterStop = outcomes.slice(stoppedAt);
    expect(afterStop.length).to.be.greaterThan(0);
    expect(afterStop.every((o) => o.error instanceof CounterStoreUnavailableError)).to.equal(true);
    // A loop, not Math.max(...): failing calls are fast enough to leave millions of outcomes.
    const slowest = afterStop.reduce((max, o) => (o.ms > max ? o.ms : max), 0);
    expect(slowest, `slowest failing call ${slowest.toFixed(1)} ms`).to.be.below(50);

    // One more, measured on its own.
    const single = await timed(() => store.consume(keys, spec, 1));
    expect(single.error).to.be.instanceOf(CounterStoreUnavailableError);
    expect(single.ms).to.be.below(50);
    expect(store.isHealthy()).to.equal(false);
    expect(store.errorCount).to.equal(events.length);
    expect(events.map((e) => e.kind)).to.include('not_connected');
    expect(events.every((e) => e.operation === 'fixed_window')).to.equal(true);

    // Restart (same port, empty data, no scripts): decisions recover with no help.
    await redis.restart();
    const result = await eventually(() => store.consume(keys, spec, 1), 5_000);
    expect(result.allowed).to.equal(true);
    expect(result.remaining).to.equal(spec.limit - 1); // the restarted server lost the old count
    expect(store.isHealthy()).to.equal(true);
  });

  it('hung Redis: calls time out at the command timeout, then the open breaker fails them in microseconds; nothing is replayed', async function () {
    const keys = counterKeys(randomPrefix(), 'faults', spec, ['hang']);
    expect((await store.consume(keys, spec, 1, T)).remaining).to.equal(spec.limit - 1);

    // CLIENT PAUSE ALL: the server accepts commands but answers none, like a hung process.
    await admin.call('CLIENT', 'PAUSE', '1500', 'ALL');
    const calls: { ms: number; error?: unknown }[] = [];
    for (let i = 0; i < 10; i++) calls.push(await timed(() => store.consume(keys, spec, 1, T)));
    expect(calls.every((c) => c.error instanceof CounterStoreUnavailableError)).to.equal(true);
    const timeouts = events.filter((e) => e.kind === 'timeout').length;
    expect(timeouts).to.equal(5); // the default breaker opens after 5 consecutive failures
    for (const c of calls.slice(0, 5)) expect(c.ms).to.be.within(90, 400);
    for (const c of calls.slice(5)) expect(c.ms).to.be.below(25);
    expect(events.slice(5).every((e) => e.kind === 'breaker_open')).to.equal(true);
    expect(store.breaker.state).to.equal('open');

    // Once the pause ends, the breaker's trial succeeds and decisions flow again.
    const ok = await eventually(() => store.consume(keys, spec, 1, T), 5_000);
    expect(ok.allowed).to.equal(true);
    expect(store.breaker.state).to.equal('closed');
    // The 5 timed-out commands did reach Redis and ran once each when the pause ended (a timeout
    // cannot know), but none was sent a second time: 1 + 5 + the final success.
    expect(Number(await admin.hget(keys[0], 'u'))).to.equal(1 + timeouts + 1);
    expect(ok.remaining).to.equal(spec.limit - (1 + timeouts + 1));
  });

  it('after SCRIPT FLUSH the next call succeeds with no error and counts exactly once', async function () {
    const keys = counterKeys(randomPrefix(), 'faults', spec, ['flush']);
    const first = await store.consume(keys, spec, 1, T);
    const second = await store.consume(keys, spec, 1, T);
    expect(second.remaining).to.equal(first.remaining - 1);

    await admin.script('FLUSH');
    expect(await admin.script('EXISTS', '0'.repeat(40))).to.deep.equal([0]);
    const third = await store.consume(keys, spec, 1, T);
    expect(third.allowed).to.equal(true);
    expect(third.remaining).to.equal(second.remaining - 1);
    expect(Number(await admin.hget(keys[0], 'u'))).to.equal(3);

    // Again with a burst in flight when the scripts vanish (auto-pipelined together).
    await admin.script('FLUSH');
    const burst = await Promise.all(Array.from({ length: 20 }, () => store.consume(keys, spec, 1, T)));
    expect(burst.every((r) => r.allowed)).to.equal(true);
    expect(Math.min(...burst.map((r) => r.remaining))).to.equal(third.remaining - 20);
    expect(Number(await admin.hget(keys[0], 'u'))).to.equal(23);
    expect(events).to.deep.equal([]);
  });

  it('after SCRIPT FLUSH a batch mixing every algorithm runs each operation exactly once', async function () {
    const prefix = randomPrefix();
    const specs: CounterSpec[] = [
      { type: 'fixed_window', limit: 100, windowMs: 3_600_000 },
      { type: 'sliding_window_log', limit: 100, windowMs: 3_600_000 },
      { type: 'sliding_window_counter', limit: 100, windowMs: 3_600_000, subWindows: 4 },
      { type: 'token_bucket', capacity: 100, rateUnits: 1, ratePeriodMs: 3_600_000 },
      { type: 'leaky_bucket', capacity: 100, rateUnits: 1, ratePeriodMs: 3_600_000 },
      { type: 'quota', limit: 100, periodMs: 3_600_000 },
      { type: 'concurrency', maxConcurrency: 100, leaseTtlMs: 3_600_000 },
    ];
    const useAll = (round: number) =>
      Promise.all(
        specs.map((s) => {
          const keys = counterKeys(prefix, 'flush-batch', s, []);
          return s.type === 'concurrency' ? store.acquire(keys, s, `lease-${round}`, T) : store.consume(keys, s as RateSpec, 1, T);
        }),
      );
    expect((await useAll(0)).map((r) => r.remaining)).to.deep.equal(new Array(specs.length).fill(99));
    await admin.script('FLUSH');
    // The batch's EVALSHA answers NOSCRIPT (nothing ran), so the script is sent again: one run each.
    expect((await useAll(1)).map((r) => r.remaining)).to.deep.equal(new Array(specs.length).fill(98));
    expect((await useAll(2)).map((r) => r.remaining)).to.deep.equal(new Array(specs.length).fill(97));
    expect(events).to.deep.equal([]);
  });

  it('a script error fails that decision but never opens the breaker for everyone else', async function () {
    const prefix = randomPrefix();
    const broken = counterKeys(prefix, 'broken', spec, []);
    const healthy = counterKeys(prefix, 'healthy', spec, []);
    await admin.set(broken[0], 'not a hash'); // every script call on it now fails with WRONGTYPE
    for (let i = 0; i < 20; i++) {
      const { error } = await timed(() => store.consume(broken, spec, 1, T));
      expect(error).to.be.instanceOf(CounterStoreUnavailableError);
    }
    expect(store.breaker.state).to.equal('closed');
    expect(events.map((e) => e.kind)).to.deep.equal(new Array(20).fill('redis_error'));
    const ok = await store.consume(healthy, spec, 1, T);
    expect(ok.allowed).to.equal(true);
  });

  it('the first calls wait for the initial connection (within the timeout) instead of failing', async function () {
    const fresh = connectRedisCounterStore(`${redis.host}:${redis.port}`, { commandTimeoutMs: 1_000 });
    try {
      const keys = counterKeys(randomPrefix(), 'faults', spec, ['fresh']);
      // A burst arriving before the connection is up: all wait for it, none fails.
      const results = await Promise.all(Array.from({ length: 50 }, () => fresh.consume(keys, spec, 1, T)));
      expect(Math.min(...results.map((r) => r.remaining))).to.equal(spec.limit - 50);
      expect(fresh.errorCount).to.equal(0);
    } finally {
      await fresh.close();
    }
  });

  it('a store that never connects fails fast, and close() does not hang', async function () {
    // Nothing listens on port 1.
    const dead = connectRedisCounterStore('127.0.0.1:1', { commandTimeoutMs: 100 });
    const seen: CounterStoreErrorEvent[] = [];
    dead.onError((e) => seen.push(e));
    const keys = counterKeys(randomPrefix(), 'faults', spec, ['dead']);
    const results = [];
    for (let i = 0; i < 8; i++) results.push(await timed(() => dead.consume(keys, spec, 1)));
    expect(results.every((r) => r.error instanceof CounterStoreUnavailableError)).to.equal(true);
    expect(Math.max(...results.map((r) => r.ms))).to.be.below(150);
    expect(seen.map((e) => e.kind).slice(-3)).to.deep.equal(['breaker_open', 'breaker_open', 'breaker_open']);
    expect(dead.isHealthy()).to.equal(false);
    const closing = await timed(() => dead.close());
    expect(closing.ms).to.be.below(1_500);
  });
});
