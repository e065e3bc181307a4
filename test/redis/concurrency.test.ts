/**
 * Atomicity across server nodes: two RedisCounterStore instances (separate connections, as two
 * server nodes would have) hammer the same counters in parallel, in real time (Redis TIME, no
 * explicit nowMs). Exactly `limit` requests may win, whatever the interleaving.
 */
import { expect } from 'chai';
import type { CounterResult } from '../../src/counters/counter-store.js';
import type { ConcurrencySpec, RateSpec } from '../../src/counters/counter-spec.js';
import { counterKeys } from '../../src/counters/keys.js';
import { twoRedisNodes } from '../support/counter-stores.js';
import { randomPrefix } from '../support/redis.js';

const DAY = 86_400_000;
const HOUR = 3_600_000;

/** Limit 100 and nothing refilling or rolling over during the test (windows of a day, slow rates). */
const RATE_SPECS: RateSpec[] = [
  { type: 'fixed_window', limit: 100, windowMs: DAY },
  { type: 'sliding_window_log', limit: 100, windowMs: HOUR },
  { type: 'token_bucket', capacity: 100, rateUnits: 1, ratePeriodMs: HOUR },
  { type: 'sliding_window_counter', limit: 100, windowMs: DAY, subWindows: 1 },
  { type: 'leaky_bucket', capacity: 100, rateUnits: 1, ratePeriodMs: HOUR },
  { type: 'quota', limit: 100, periodMs: HOUR },
];

/**
 * Starts n operations without waiting for any, in waves of 50 separated by a macrotask, so each
 * node's connection carries several batches and Redis interleaves the two nodes' commands.
 */
async function inWaves<T>(n: number, start: (i: number) => Promise<T>): Promise<T[]> {
  const pending: Promise<T>[] = [];
  for (let i = 0; i < n; i++) {
    pending.push(start(i));
    if (i % 50 === 49) await new Promise((resolve) => setImmediate(resolve));
  }
  return Promise.all(pending);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

describe('concurrency: two server nodes on one Redis', function () {
  this.timeout(30_000);
  const nodes = twoRedisNodes();
  let prefix: string;

  beforeEach(() => {
    prefix = randomPrefix();
  });

  const node = (i: number) => (i % 2 === 0 ? nodes.a : nodes.b);

  for (const spec of RATE_SPECS) {
    it(`${spec.type}: 1,000 parallel consumes against limit 100 admit exactly 100`, async () => {
      const keys = counterKeys(prefix, 'burst', spec, ['tenant-1']);
      const results = await inWaves(1000, (i) => node(i).consume(keys, spec, 1));
      const admitted = results.filter((r) => r.allowed);
      expect(admitted).to.have.length(100);
      // Each admission saw a distinct state: the remaining values are exactly 99 … 0.
      expect(admitted.map((r) => r.remaining).sort((a, b) => a - b)).to.deep.equal(Array.from({ length: 100 }, (_, i) => i));
      for (const r of results.filter((x) => !x.allowed)) {
        expect(r.remaining).to.equal(0);
        expect(r.retryAfterMs).to.be.greaterThan(0);
      }
    });
  }

  it('parallel consumes with mixed costs never exceed the limit', async () => {
    const spec: RateSpec = { type: 'fixed_window', limit: 100, windowMs: DAY };
    const keys = counterKeys(prefix, 'mixed', spec, ['t']);
    const costs = Array.from({ length: 400 }, (_, i) => 1 + (i % 7));
    const results = await inWaves(costs.length, (i) => node(i).consume(keys, spec, costs[i]));
    const taken = results.reduce((sum, r, i) => sum + (r.allowed ? costs[i] : 0), 0);
    expect(taken).to.be.at.most(100);
    // The counter holds exactly what was admitted.
    const final = await nodes.a.consume(keys, spec, 1);
    expect(final.remaining + (final.allowed ? 1 : 0)).to.equal(100 - taken);
  });

  describe('leases', () => {
    const spec: ConcurrencySpec = { type: 'concurrency', maxConcurrency: 10, leaseTtlMs: 60_000 };

    it('parallel acquires through two nodes never exceed max_concurrency', async () => {
      const keys = counterKeys(prefix, 'leases', spec, ['t']);
      const results = await inWaves(300, (i) => node(i).acquire(keys, spec, `lease-${i}`));
      const admitted = results.filter((r) => r.allowed);
      expect(admitted).to.have.length(10);
      expect(admitted.map((r) => r.remaining).sort((a, b) => a - b)).to.deep.equal(Array.from({ length: 10 }, (_, i) => i));
      for (const r of results.filter((x) => !x.allowed)) {
        expect(r.remaining).to.equal(0);
        expect(r.retryAfterMs).to.be.greaterThan(0).and.at.most(60_000);
      }
    });

    it('parallel releases (duplicates and unknown ids included) never make the count negative', async () => {
      const keys = counterKeys(prefix, 'releases', spec, ['t']);
      const acquired = await Promise.all(Array.from({ length: 10 }, (_, i) => node(i).acquire(keys, spec, `held-${i}`)));
      expect(acquired.every((r) => r.allowed)).to.equal(true);
      // Every held lease released three times, plus 100 leases that never existed.
      const ids = [
        ...Array.from({ length: 30 }, (_, i) => `held-${i % 10}`),
        ...Array.from({ length: 100 }, (_, i) => `ghost-${i}`),
      ];
      const results = await inWaves(ids.length, (i) => node(i).release(keys, spec, ids[i]));
      expect(results.filter((r) => r.allowed)).to.have.length(10);
      for (const r of results) expect(r.remaining).to.be.within(0, 10);
      // The count is back at zero, not below: exactly max_concurrency new leases fit.
      const again = await Promise.all(Array.from({ length: 30 }, (_, i) => node(i).acquire(keys, spec, `new-${i}`)));
      expect(again.filter((r) => r.allowed)).to.have.length(10);
    });

    it('a storm of acquires and releases keeps 0 ≤ held ≤ max_concurrency', async () => {
      const keys = counterKeys(prefix, 'storm', spec, ['t']);
      const ops: Promise<CounterResult>[] = [];
      for (let i = 0; i < 600; i++) {
        const id = `s-${i % 25}`;
        ops.push(i % 3 === 2 ? node(i).release(keys, spec, id) : node(i).acquire(keys, spec, id));
      }
      const results = await Promise.all(ops);
      for (const r of results) expect(r.remaining).to.be.within(0, 10);
      // Release everything that may be held, then the limiter must be whole again.
      await Promise.all(Array.from({ length: 25 }, (_, i) => nodes.b.release(keys, spec, `s-${i}`)));
      const fresh = await Promise.all(Array.from({ length: 11 }, (_, i) => node(i).acquire(keys, spec, `f-${i}`)));
      expect(fresh.filter((r) => r.allowed)).to.have.length(10);
    });

    it('an unreleased lease frees its slot after lease_ttl (real time, Redis clock)', async () => {
      // A TTL long enough that the checks before it never race it: no check here depends on how fast the machine is.
      const short: ConcurrencySpec = { type: 'concurrency', maxConcurrency: 1, leaseTtlMs: 1000 };
      const keys = counterKeys(prefix, 'ttl', short, ['t']);
      const sentAt = performance.now(); // the lease starts after this…
      const first = await nodes.a.acquire(keys, short, 'holder');
      const answeredAt = performance.now(); // …and before this
      expect(first).to.include({ allowed: true, remaining: 0 });
      const blocked = await nodes.b.acquire(keys, short, 'waiter');
      expect(blocked.allowed).to.equal(false);
      expect(blocked.retryAfterMs).to.be.greaterThan(0).and.at.most(1000);
      await sleep(Math.max(0, sentAt + 200 - performance.now()));
      const stillHeld = await nodes.b.acquire(keys, short, 'waiter');
      expect(stillHeld.allowed, 'still held 200 ms into its 1 s TTL').to.equal(false);
      await sleep(Math.max(0, answeredAt + 1000 + 20 - performance.now()));
      const after = await nodes.b.acquire(keys, short, 'waiter');
      expect(after, 'lease expired after lease_ttl').to.include({ allowed: true, remaining: 0 });
      // The expired holder's lease is gone: releasing it finds nothing.
      expect((await nodes.a.release(keys, short, 'holder')).allowed).to.equal(false);
    });
  });
});
