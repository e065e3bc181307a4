import { expect } from 'chai';
import type { Command } from 'ioredis';
import { CounterStoreUnavailableError } from '../../src/errors.js';
import type { CounterSpec, RateSpec } from '../../src/counters/counter-spec.js';
import { counterKeys } from '../../src/counters/keys.js';
import {
  connectRedisCounterStore,
  RedisCounterStore,
  type CounterStoreErrorEvent,
  type CounterStoreErrorKind,
} from '../../src/redis/redis-store.js';
import { privateRedisWithAdmin, randomPrefix } from '../support/redis.js';
import { everySpec } from '../support/counter-specs.js';

/**
 * Fault behaviour against a private redis-server that the test stops, restarts, pauses and flushes:
 * what a policy's `failure_mode` (docs/algorithms.md) stands on (the decision layer maps the error to
 * fail_open / fail_closed): a timeout per command, no offline queue, a circuit breaker.
 *
 * No assertion here times anything (the machine is shared and noisy): a call that fails at once is
 * proven by why it failed (not connected, or refused by the open breaker without a script call sent,
 * never a timeout), a call that waits for its deadline by its timeout error and a lower bound only.
 * Polls for recovery keep a deadline that only turns a hang into a clear failure.
 */
describe('RedisCounterStore under faults (private redis-server)', function () {
  this.timeout(60_000);
  const spec: RateSpec = { type: 'fixed_window', limit: 1_000_000, windowMs: 3_600_000 };
  /** An explicit time, so no call can straddle a window boundary. */
  const T = Math.floor(Date.now() / 3_600_000) * 3_600_000 + 1_000;
  const priv = privateRedisWithAdmin();
  let store: RedisCounterStore;
  let events: CounterStoreErrorEvent[];
  /** The kind of each failed operation, by the error it was rejected with. */
  let kinds: WeakMap<object, CounterStoreErrorKind>;

  /** `store`, connected with this deadline per command, its errors recorded in `events` and `kinds`. */
  async function connectStore(commandTimeoutMs: number): Promise<void> {
    store = connectRedisCounterStore(priv.redis.url, { commandTimeoutMs });
    events = [];
    kinds = new WeakMap();
    store.onError((e) => {
      events.push(e);
      kinds.set(e.error, e.kind);
    });
    await store.waitUntilReady(5_000);
  }

  /**
   * A store whose deadline is far above a loaded machine's round trip, for tests that count rather than
   * time out: after SCRIPT FLUSH the batch script is sent whole again, which can take over 100 ms there.
   */
  async function usePatientStore(): Promise<void> {
    await store.close();
    await connectStore(5_000);
  }

  beforeEach(async function () {
    await connectStore(100);
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

  /** The kind of the store's error an operation failed with (undefined for any other outcome). */
  function kindOf(error: unknown): CounterStoreErrorKind | undefined {
    return typeof error === 'object' && error !== null ? kinds.get(error) : undefined;
  }

  /** Retries `fn` until it succeeds; the deadline is a hang guard, no claim about speed. */
  async function eventually<T>(fn: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + HANG_GUARD_MS;
    let last: unknown;
    while (Date.now() < deadline) {
      try {
        return await fn();
      } catch (err) {
        last = err;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    throw new Error(`hang guard: no success after ${HANG_GUARD_MS} ms; last error: ${(last as Error)?.message}`);
  }

  it('Redis stopped mid-run: calls fail at once with CounterStoreUnavailableError (not connected or breaker open, never a timeout); after a restart they succeed again by themselves', async function () {
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
    await priv.redis.stop();
    const stoppedAt = outcomes.length;
    await new Promise((r) => setTimeout(r, 300));
    running = false;
    await Promise.all(callers);

    // Every call that failed around or after the stop failed the right way.
    const failures = outcomes.slice(beforeStop).filter((o) => o.error !== undefined);
    expect(failures.length).to.be.greaterThan(0);
    for (const f of failures) expect(f.error).to.be.instanceOf(CounterStoreUnavailableError);
    const afterStop = outcomes.slice(stoppedAt);
    expect(afterStop.length).to.be.greaterThan(0);
    expect(afterStop.every((o) => o.error instanceof CounterStoreUnavailableError)).to.equal(true);
    // And at once: each failed because nothing was connected (the script could not be sent) or was
    // refused by the open breaker without asking Redis; none waited out its 100 ms deadline. A count
    // per kind, not a list: failing calls are quick enough to leave millions of outcomes.
    const afterStopKinds = new Map<string, number>();
    for (const o of afterStop) {
      const kind = String(kindOf(o.error));
      afterStopKinds.set(kind, (afterStopKinds.get(kind) ?? 0) + 1);
    }
    expect([...afterStopKinds.keys()].filter((kind) => kind !== 'not_connected' && kind !== 'breaker_open'), JSON.stringify([...afterStopKinds])).to.deep.equal([]);
    expect(afterStopKinds.get('breaker_open'), 'calls refused by the open breaker').to.be.greaterThan(0);

    // One more, on its own: refused without a wait (the breaker is open, or its trial finds no connection).
    const single = await timed(() => store.consume(keys, spec, 1));
    expect(single.error).to.be.instanceOf(CounterStoreUnavailableError);
    expect(kindOf(single.error)).to.be.oneOf(['breaker_open', 'not_connected']);
    expect(store.isHealthy()).to.equal(false);
    expect(store.errorCount).to.equal(events.length);
    expect(events.map((e) => e.kind)).to.include('not_connected');
    expect(events.every((e) => e.operation === 'fixed_window')).to.equal(true);

    // Restart (same port, empty data, no scripts): decisions recover with no help.
    await priv.redis.restart();
    const result = await eventually(() => store.consume(keys, spec, 1));
    expect(result.allowed).to.equal(true);
    expect(result.remaining).to.equal(spec.limit - 1); // the restarted server lost the old count
    expect(store.isHealthy()).to.equal(true);
  });

  it('hung Redis: calls time out at the command timeout, then the open breaker refuses them without a script call; nothing is replayed', async function () {
    const keys = counterKeys(randomPrefix(), 'faults', spec, ['hang']);
    expect((await store.consume(keys, spec, 1, T)).remaining).to.equal(spec.limit - 1);
    const scriptCalls = recordScriptCalls(store);

    // CLIENT PAUSE ALL: the server accepts commands but answers none, like a hung process.
    await priv.admin.call('CLIENT', 'PAUSE', '1500', 'ALL');
    const calls: { ms: number; error?: unknown }[] = [];
    for (let i = 0; i < 10; i++) calls.push(await timed(() => store.consume(keys, spec, 1, T)));
    const sentWhilePaused = scriptCalls.length;
    expect(calls.every((c) => c.error instanceof CounterStoreUnavailableError)).to.equal(true);
    const timeouts = events.filter((e) => e.kind === 'timeout').length;
    expect(timeouts).to.equal(5); // the default breaker opens after 5 consecutive failures
    for (const c of calls.slice(0, 5)) {
      // Failed by the store's own deadline (its TimeoutError), and not before it (the 100 ms
      // timer, less a little clock slack).
      expect(kindOf(c.error)).to.equal('timeout');
      expect((c.error as CounterStoreUnavailableError).cause).to.have.property('name', 'TimeoutError');
      expect((c.error as Error).message).to.match(/timed out after 100 ms/);
      expect(c.ms).to.be.at.least(90);
    }
    // The open breaker refused the others at once: only the 5 that timed out were ever sent.
    for (const c of calls.slice(5)) expect(kindOf(c.error)).to.equal('breaker_open');
    expect(sentWhilePaused, 'script calls sent while Redis hung').to.equal(5);
    expect(events.slice(5).every((e) => e.kind === 'breaker_open')).to.equal(true);
    expect(store.breaker.state).to.equal('open');

    // Once the pause ends, the breaker's trial succeeds and decisions flow again.
    const ok = await eventually(() => store.consume(keys, spec, 1, T));
    expect(ok.allowed).to.equal(true);
    expect(store.breaker.state).to.equal('closed');
    // The 5 timed-out commands did reach Redis and ran once each when the pause ended (a timeout
    // cannot know), but none was sent a second time: 1 + 5 + the final success.
    expect(Number(await priv.admin.hget(keys[0], 'u'))).to.equal(1 + timeouts + 1);
    expect(ok.remaining).to.equal(spec.limit - (1 + timeouts + 1));
  });

  it('after SCRIPT FLUSH the next call succeeds with no error and counts exactly once', async function () {
    await usePatientStore();
    const keys = counterKeys(randomPrefix(), 'faults', spec, ['flush']);
    const first = await store.consume(keys, spec, 1, T);
    const second = await store.consume(keys, spec, 1, T);
    expect(second.remaining).to.equal(first.remaining - 1);

    await priv.admin.script('FLUSH');
    expect(await priv.admin.script('EXISTS', '0'.repeat(40))).to.deep.equal([0]);
    const third = await store.consume(keys, spec, 1, T);
    expect(third.allowed).to.equal(true);
    expect(third.remaining).to.equal(second.remaining - 1);
    expect(Number(await priv.admin.hget(keys[0], 'u'))).to.equal(3);

    // Again with a burst in flight when the scripts vanish (auto-pipelined together).
    await priv.admin.script('FLUSH');
    const burst = await Promise.all(Array.from({ length: 20 }, () => store.consume(keys, spec, 1, T)));
    expect(burst.every((r) => r.allowed)).to.equal(true);
    expect(Math.min(...burst.map((r) => r.remaining))).to.equal(third.remaining - 20);
    expect(Number(await priv.admin.hget(keys[0], 'u'))).to.equal(23);
    expect(events).to.deep.equal([]);
  });

  it('after SCRIPT FLUSH a batch mixing every algorithm runs each operation exactly once', async function () {
    await usePatientStore();
    const prefix = randomPrefix();
    const specs: CounterSpec[] = everySpec(100, 3_600_000, { rateUnits: 1 });
    const useAll = (round: number) =>
      Promise.all(
        specs.map((s) => {
          const keys = counterKeys(prefix, 'flush-batch', s, []);
          return s.type === 'concurrency' ? store.acquire(keys, s, `lease-${round}`, T) : store.consume(keys, s as RateSpec, 1, T);
        }),
      );
    expect((await useAll(0)).map((r) => r.remaining)).to.deep.equal(new Array(specs.length).fill(99));
    await priv.admin.script('FLUSH');
    // The batch's EVALSHA answers NOSCRIPT (nothing ran), so the script is sent again: one run each.
    expect((await useAll(1)).map((r) => r.remaining)).to.deep.equal(new Array(specs.length).fill(98));
    expect((await useAll(2)).map((r) => r.remaining)).to.deep.equal(new Array(specs.length).fill(97));
    expect(events).to.deep.equal([]);
  });

  it('a script error fails that decision but never opens the breaker for everyone else', async function () {
    const prefix = randomPrefix();
    const broken = counterKeys(prefix, 'broken', spec, []);
    const healthy = counterKeys(prefix, 'healthy', spec, []);
    await priv.admin.set(broken[0], 'not a hash'); // every script call on it now fails with WRONGTYPE
    for (let i = 0; i < 20; i++) {
      const error = await store.consume(broken, spec, 1, T).then(() => undefined, (err: unknown) => err);
      expect(error).to.be.instanceOf(CounterStoreUnavailableError);
    }
    expect(store.breaker.state).to.equal('closed');
    expect(events.map((e) => e.kind)).to.deep.equal(new Array(20).fill('redis_error'));
    const ok = await store.consume(healthy, spec, 1, T);
    expect(ok.allowed).to.equal(true);
  });

  it('the first calls wait for the initial connection (within the timeout) instead of failing', async function () {
    const fresh = connectRedisCounterStore(`${priv.redis.host}:${priv.redis.port}`, { commandTimeoutMs: 1_000 });
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
    // Nothing listens on port 1. A 30 s deadline, out of the way: only a refused connection (or the
    // breaker it opens) can end these calls before mocha's timeout; and a breaker that stays open.
    const dead = connectRedisCounterStore('127.0.0.1:1', { commandTimeoutMs: 30_000, breaker: { coolDownMs: 60_000 } });
    const seen: CounterStoreErrorEvent[] = [];
    dead.onError((e) => seen.push(e));
    const keys = counterKeys(randomPrefix(), 'faults', spec, ['dead']);
    const results: unknown[] = [];
    for (let i = 0; i < 8; i++) results.push(await dead.consume(keys, spec, 1).then(() => undefined, (err: unknown) => err));
    expect(results.every((error) => error instanceof CounterStoreUnavailableError)).to.equal(true);
    // Why they failed: not connected (nothing sent) until the breaker opened, then refused by it.
    expect(seen.map((e) => e.kind)).to.deep.equal([...new Array(5).fill('not_connected'), 'breaker_open', 'breaker_open', 'breaker_open']);
    expect(seen.every((e, i) => e.error === results[i]), 'one error event per call, in order').to.equal(true);
    expect(dead.isHealthy()).to.equal(false);
    // close() returns (mocha's timeout would catch a hang), and the store is closed for good.
    await dead.close();
    const afterClose = await dead.consume(keys, spec, 1).then(() => undefined, (err: unknown) => err);
    expect(afterClose).to.be.instanceOf(CounterStoreUnavailableError).with.property('message', 'counter store is closed');
    expect(seen.at(-1)?.kind).to.equal('not_connected');
  });
});

/** Generous: recovery takes a few seconds at most; this only turns a hang into a clear failure. */
const HANG_GUARD_MS = 30_000;

/**
 * The script calls (EVALSHA / EVAL) the store hands its ioredis client from now on, by name: each is a
 * round trip asked of Redis. An operation the breaker refuses adds none.
 */
function recordScriptCalls(store: RedisCounterStore): string[] {
  const sent: string[] = [];
  const client = store.client as unknown as { sendCommand(command: Command): unknown };
  const send = client.sendCommand.bind(client);
  client.sendCommand = (command: Command) => {
    if (command.name === 'evalsha' || command.name === 'eval') sent.push(command.name);
    return send(command);
  };
  return sent;
}
