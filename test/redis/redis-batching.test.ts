/**
 * RedisCounterStore batching (private redis-server): operations issued in the same event-loop turn go
 * to Redis as one call of the batch script (lua/batch.lua), each with the result it would have had
 * alone, in arrival order; a failure fails exactly the operations it concerns; the breaker counts one
 * observation per script call.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import type { CounterResult } from '../../src/counters/counter-store.js';
import type { CounterSpec, ConcurrencySpec, RateSpec } from '../../src/counters/counter-spec.js';
import { counterKeys } from '../../src/counters/keys.js';
import {
  connectRedisCounterStore,
  RedisCounterStore,
  type CounterStoreErrorEvent,
} from '../../src/redis/redis-store.js';
import { CounterStoreUnavailableError } from '../../src/errors.js';
import { privateRedisWithAdmin, randomPrefix } from '../support/redis.js';
import { everySpec } from '../support/counter-specs.js';

const HOUR = 3_600_000;
/** The counter most tests here use: a fixed window of 100 an hour. */
const spec: RateSpec = { type: 'fixed_window', limit: 100, windowMs: HOUR };
/** An explicit time inside one hour-long window, so no call straddles a window boundary. */
const T = Math.floor(Date.now() / HOUR) * HOUR + 1_000;

const SPECS: CounterSpec[] = everySpec(3, HOUR, { rateUnits: 1 });

/** One cost-1 use of a counter (an acquire of lease `id` for concurrency). */
function use(store: RedisCounterStore, keys: string[], spec: CounterSpec, id: string): Promise<CounterResult> {
  return spec.type === 'concurrency'
    ? store.acquire(keys, spec as ConcurrencySpec, id, T)
    : store.consume(keys, spec as RateSpec, 1, T);
}

async function settled<T>(promise: Promise<T>): Promise<{ value?: T; error?: unknown; ms: number }> {
  const start = performance.now();
  try {
    return { value: await promise, ms: performance.now() - start };
  } catch (error) {
    return { error, ms: performance.now() - start };
  }
}

describe('RedisCounterStore batching (private redis-server)', function () {
  this.timeout(30_000);
  const priv = privateRedisWithAdmin();
  let store: RedisCounterStore;
  let events: CounterStoreErrorEvent[];

  async function connect(options: { commandTimeoutMs?: number; maxBatchSize?: number } = {}): Promise<RedisCounterStore> {
    const connected = connectRedisCounterStore(priv.redis.url, { commandTimeoutMs: 2_000, ...options });
    events = [];
    connected.onError((e) => events.push(e));
    await connected.waitUntilReady(5_000);
    // The first call on a connection sends the script itself (EVAL); later ones its digest.
    await connected.consume(counterKeys(randomPrefix(), 'warm-up', SPECS[0], []), SPECS[0] as RateSpec, 1, T);
    return connected;
  }

  afterEach(async function () {
    await store?.close();
  });

  /** Script calls (EVAL + EVALSHA) Redis served since the last CONFIG RESETSTAT. */
  async function scriptCalls(): Promise<number> {
    const info = await priv.admin.info('commandstats');
    let calls = 0;
    for (const m of info.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) calls += Number(m[2]);
    return calls;
  }

  it('operations issued in the same turn go to Redis as ONE script call, each with its own result', async function () {
    store = await connect();
    const prefix = randomPrefix();
    await priv.admin.config('RESETSTAT');
    // Four uses of two counters of every algorithm, interleaved: 56 operations.
    const pending: { spec: CounterSpec; result: Promise<CounterResult> }[] = [];
    for (let round = 0; round < 4; round++) {
      for (const spec of SPECS) {
        for (const user of ['a', 'b']) {
          pending.push({ spec, result: use(store, counterKeys(prefix, 'batch', spec, [user]), spec, `lease-${round}`) });
        }
      }
    }
    const results = await Promise.all(pending.map((p) => p.result));
    expect(await scriptCalls()).to.equal(1);
    // In arrival order: each counter admits its first three uses (2, 1, 0 remaining), then denies.
    for (const [i, result] of results.entries()) {
      const round = Math.floor(i / (SPECS.length * 2));
      const label = `${pending[i].spec.type} use ${round + 1}`;
      expect(result.allowed, label).to.equal(round < 3);
      expect(result.remaining, label).to.equal(Math.max(0, 2 - round));
    }
    expect(events).to.deep.equal([]);
  });

  it('maxBatchSize caps a script call: a full batch is sent at once, the rest in the next', async function () {
    store = await connect({ maxBatchSize: 10 });
    const keys = counterKeys(randomPrefix(), 'cap', spec, []);
    await priv.admin.config('RESETSTAT');
    const results = await Promise.all(Array.from({ length: 35 }, () => store.consume(keys, spec, 1, T)));
    expect(await scriptCalls()).to.equal(4);
    expect(results.map((r) => r.remaining)).to.deep.equal(Array.from({ length: 35 }, (_, i) => 99 - i));
  });

  it('operations in separate turns go in separate calls (nothing waits for company)', async function () {
    store = await connect();
    const keys = counterKeys(randomPrefix(), 'turns', spec, []);
    await priv.admin.config('RESETSTAT');
    for (let i = 0; i < 3; i++) expect((await store.consume(keys, spec, 1, T)).remaining).to.equal(99 - i);
    expect(await scriptCalls()).to.equal(3);
  });

  it('a steady stream of callers over many calls loses nothing, runs nothing twice and keeps arrival order', async function () {
    store = await connect();
    const spec: RateSpec = { type: 'fixed_window', limit: 10_000, windowMs: HOUR };
    const keys = counterKeys(randomPrefix(), 'stream', spec, []);
    await priv.admin.config('RESETSTAT');
    // 20 callers, each issuing its next operation as soon as the last answered, so operations keep
    // arriving while calls are in flight: every operation takes a number when it is issued, and
    // Redis must run them in exactly that order.
    let issued = 0;
    const mismatches: string[] = [];
    const caller = async () => {
      for (let i = 0; i < 25; i++) {
        const seq = issued++;
        const { remaining } = await store.consume(keys, spec, 1, T);
        if (remaining !== spec.limit - 1 - seq) mismatches.push(`operation ${seq}: remaining ${remaining}`);
      }
    };
    await Promise.all(Array.from({ length: 20 }, caller));
    expect(mismatches).to.deep.equal([]);
    expect(await priv.admin.hget(keys[0], 'u')).to.equal('500'); // each of the 500 ran exactly once
    expect(await scriptCalls()).to.be.below(500); // and they went in batches
    expect(events).to.deep.equal([]);
  });

  it('an operation whose script fails fails alone; the batch counts as one answered round trip', async function () {
    store = await connect();
    const prefix = randomPrefix();
    const broken = counterKeys(prefix, 'broken', spec, []);
    const healthy = counterKeys(prefix, 'healthy', spec, []);
    await priv.admin.set(broken[0], 'not a hash'); // WRONGTYPE for any script on it
    store.breaker.recordFailure(); // one failure counted before: an answered batch resets the count
    const outcomes = await Promise.all([
      settled(store.consume(healthy, spec, 1, T)),
      settled(store.consume(broken, spec, 1, T)),
      settled(store.consume(healthy, spec, 1, T)),
      settled(store.consume(broken, spec, 1, T)),
    ]);
    expect(outcomes.map((o) => o.value?.remaining)).to.deep.equal([99, undefined, 98, undefined]);
    for (const o of [outcomes[1], outcomes[3]]) {
      expect(o.error).to.be.instanceOf(CounterStoreUnavailableError);
      expect((o.error as Error).message).to.match(/redis_error.*WRONGTYPE/);
    }
    expect(events.map((e) => [e.kind, e.operation])).to.deep.equal([
      ['redis_error', 'fixed_window'],
      ['redis_error', 'fixed_window'],
    ]);
    expect(store.breaker.state).to.equal('closed');
    expect(store.breaker.consecutiveFailures).to.equal(0);
  });

  it('a batch that times out fails each operation like a lone call, by its deadline, and is ONE breaker failure', async function () {
    store = await connect({ commandTimeoutMs: 100 });
    const spec: RateSpec = { type: 'fixed_window', limit: 1_000, windowMs: HOUR };
    const keys = counterKeys(randomPrefix(), 'hang', spec, []);
    await priv.admin.config('RESETSTAT');
    await priv.admin.call('CLIENT', 'PAUSE', '1000', 'ALL');
    const pausedAt = performance.now();
    const outcomes = await Promise.all(Array.from({ length: 10 }, () => settled(store.consume(keys, spec, 1, T))));
    for (const o of outcomes) {
      // Failed by the batch's own deadline (its TimeoutError), and not before it (the 100 ms timer,
      // less a little clock slack); no upper bound, mocha's timeout catches a hang.
      expect(o.error).to.be.instanceOf(CounterStoreUnavailableError);
      expect((o.error as Error).message).to.match(/\(timeout\).*timed out after 100 ms/);
      expect((o.error as CounterStoreUnavailableError).cause).to.have.property('name', 'TimeoutError');
      expect(o.ms).to.be.at.least(90);
    }
    expect(events.map((e) => e.kind)).to.deep.equal(new Array(10).fill('timeout'));
    expect(store.errorCount).to.equal(10);
    expect(store.breaker.consecutiveFailures).to.equal(1);
    expect(store.breaker.state).to.equal('closed');
    // Once the pause is over, the timed-out batch has run once (a timeout cannot know) and is not resent.
    await new Promise((r) => setTimeout(r, 1_100 - (performance.now() - pausedAt)));
    const after = await store.consume(keys, spec, 1, T);
    expect(after.remaining).to.equal(1_000 - 11);
    expect(await scriptCalls(), 'the timed-out batch was one script call, then the one after').to.equal(2);
  });

  it('while the breaker is open, operations fail at once and only the half-open trial reaches Redis, alone', async function () {
    store = await connect();
    const keys = counterKeys(randomPrefix(), 'open', spec, []);
    for (let i = 0; i < store.breaker.failureThreshold; i++) store.breaker.recordFailure();
    expect(store.breaker.state).to.equal('open');
    await priv.admin.config('RESETSTAT');
    const refused = await Promise.all(Array.from({ length: 5 }, () => settled(store.consume(keys, spec, 1, T))));
    expect(refused.every((o) => o.error instanceof CounterStoreUnavailableError)).to.equal(true);
    expect(events.map((e) => e.kind)).to.deep.equal(new Array(5).fill('breaker_open'));
    expect(await scriptCalls()).to.equal(0);

    await new Promise((r) => setTimeout(r, store.breaker.coolDownMs + 10));
    const [trial, ...others] = await Promise.all(Array.from({ length: 5 }, () => settled(store.consume(keys, spec, 1, T))));
    expect(trial.value?.remaining).to.equal(99);
    expect(others.every((o) => o.error instanceof CounterStoreUnavailableError)).to.equal(true);
    expect(await scriptCalls()).to.equal(1);
    expect(store.breaker.state).to.equal('closed');
  });

  it('close() still sends the operations accepted before it; later ones fail as not connected', async function () {
    const closing = await connect();
    const keys = counterKeys(randomPrefix(), 'close', spec, []);
    const accepted = [closing.consume(keys, spec, 1, T), closing.consume(keys, spec, 1, T)];
    const closed = closing.close();
    const refused = await settled(closing.consume(keys, spec, 1, T));
    expect((await Promise.all(accepted)).map((r) => r.remaining)).to.deep.equal([99, 98]);
    await closed;
    expect(refused.error).to.be.instanceOf(CounterStoreUnavailableError);
    expect(events.map((e) => e.kind)).to.deep.equal(['not_connected']);
  });

  it('close() waits for calls in flight: a batch answered NOSCRIPT is still resent as EVAL before QUIT', async function () {
    const closing = await connect();
    const keys = counterKeys(randomPrefix(), 'close-noscript', spec, []);
    await priv.admin.script('FLUSH');
    const accepted = [closing.consume(keys, spec, 1, T), closing.consume(keys, spec, 1, T)];
    await closing.close();
    expect((await Promise.all(accepted)).map((r) => r.remaining)).to.deep.equal([99, 98]);
    expect(events).to.deep.equal([]);
  });

  it('a batch whose deadline passed before the flush (a stalled event loop) fails unsent and is no breaker failure', async function () {
    store = await connect({ commandTimeoutMs: 100 });
    const keys = counterKeys(randomPrefix(), 'stalled', spec, []);
    await priv.admin.config('RESETSTAT');
    const late = settled(store.consume(keys, spec, 1, T));
    const stallUntil = performance.now() + 150;
    while (performance.now() < stallUntil) {
      // Synchronous work longer than the deadline, before the batch's flush can run.
    }
    const outcome = await late;
    expect(outcome.error).to.be.instanceOf(CounterStoreUnavailableError);
    expect((outcome.error as Error).message).to.match(/\(timeout\).*not sent/);
    expect(await scriptCalls()).to.equal(0);
    expect(store.breaker.consecutiveFailures).to.equal(0);
    expect((await store.consume(keys, spec, 1, T)).remaining).to.equal(99);
  });

  it('rejects a maxBatchSize that is not a positive integer', function () {
    const client = new Redis({ host: priv.redis.host, port: priv.redis.port, lazyConnect: true });
    try {
      for (const bad of [0, -1, 1.5, Number.NaN]) {
        expect(() => new RedisCounterStore(client, { maxBatchSize: bad, ownsClient: false })).to.throw(/maxBatchSize/);
      }
    } finally {
      client.disconnect();
    }
  });
});
