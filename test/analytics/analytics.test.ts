import { expect } from 'chai';
import fc from 'fast-check';
import { Analytics, OTHER_POLICY } from '../../src/analytics/analytics.js';
import { SpaceSaving } from '../../src/analytics/space-saving.js';
import { event, allowedBy, deniedBy, shadowOnly, fixedEventSequence } from '../support/decision-events.js';

const T0 = Date.parse('2030-01-02T03:04:05.000Z');

/** A small integer as a tag spread over three keys, so the sketch's per-key index is exercised too. */
const tagOf = (x: number): [key: string, value: string] => [`k${x % 3}`, String(x)];

describe('analytics/analytics', () => {
  it('summarises totals, actions, policies and tags in the documented shape (README "Observability")', () => {
    const a = new Analytics({ now: () => T0 });
    a.record(allowedBy('p1', { tags: { env: 'prod', team: 'a' } }));
    a.record(allowedBy('p1', { tags: { env: 'prod' } }));
    a.record(deniedBy('p1', { tags: { env: 'dev' } }));
    a.record(deniedBy('p2'));
    a.record(shadowOnly('sh', true));
    a.record(event({ decision: { matched_policy_id: 'p2' }, shadow: { policyId: 'sh', limited: true } }));
    a.record(event({ decision: { reason: 'no_matching_policy' } }));
    const s = a.summary();
    expect(s).to.have.all.keys('since', 'total', 'allowed', 'denied', 'shadow', 'by_action', 'by_policy', 'top_tags');
    expect(s.since).to.equal('2030-01-02T03:04:05.000Z');
    expect({ total: s.total, allowed: s.allowed, denied: s.denied, shadow: s.shadow }).to.deep.equal({ total: 7, allowed: 5, denied: 2, shadow: 2 });
    expect(s.by_action).to.deep.equal({ allow: 4, deny: 2, shadow_only: 1 });
    expect(s.by_policy).to.deep.equal([
      { policy_id: 'p1', total: 3, allowed: 2, denied: 1, shadow: 0 },
      { policy_id: 'p2', total: 2, allowed: 1, denied: 1, shadow: 0 },
      // The shadow-only answer it gave (allowed, and limited in shadow) and its evaluation beside p2 (limited).
      { policy_id: 'sh', total: 2, allowed: 1, denied: 0, shadow: 2 },
    ]);
    expect(s.top_tags).to.deep.equal([
      { key: 'env', value: 'prod', count: 2 },
      { key: 'env', value: 'dev', count: 1 },
      { key: 'team', value: 'a', count: 1 },
    ]);
    // JSON-safe.
    expect(JSON.parse(JSON.stringify(s))).to.deep.equal(s);
  });

  it('honours top for by_policy and top_tags', () => {
    const a = new Analytics();
    for (let p = 0; p < 20; p++) for (let i = 0; i <= p; i++) a.record(allowedBy(`p${p}`, { tags: { k: `v${p}` } }));
    const s = a.summary(3);
    expect(s.by_policy.map((p) => p.policy_id)).to.deep.equal(['p19', 'p18', 'p17']);
    expect(s.top_tags).to.deep.equal([
      { key: 'k', value: 'v19', count: 20 },
      { key: 'k', value: 'v18', count: 19 },
      { key: 'k', value: 'v17', count: 18 },
    ]);
    expect(s.total).to.equal(210);
    expect(a.summary().by_policy).to.have.length(20);
    expect(a.summary(1000).top_tags).to.have.length(20);
  });

  it('keeps by_policy and by_action bounded', () => {
    const a = new Analytics({ policyCapacity: 5 });
    for (let i = 0; i < 1000; i++) a.record(event({ decision: { matched_policy_id: `p${i}`, action: `act${i}` } }));
    const s = a.summary();
    expect(s.by_policy).to.have.length(6);
    expect(s.by_policy[0]).to.deep.equal({ policy_id: OTHER_POLICY, total: 995, allowed: 995, denied: 0, shadow: 0 });
    expect(Object.keys(s.by_action)).to.have.length(65);
    expect(s.by_action.other).to.equal(1000 - 64);
  });

  it('keeps tag keys and values apart and cuts over-long ones', () => {
    const a = new Analytics({ maxTagLength: 8 });
    a.record(event({ ctx: { tags: { 'a=b': 'c' } } }));
    a.record(event({ ctx: { tags: { a: 'b=c' } } }));
    a.record(event({ ctx: { tags: { k: 'x'.repeat(1000) } } }));
    const tags = a.summary().top_tags;
    expect(tags).to.have.length(3);
    expect(tags).to.deep.include({ key: 'a=b', value: 'c', count: 1 });
    expect(tags).to.deep.include({ key: 'a', value: 'b=c', count: 1 });
    expect(tags).to.deep.include({ key: 'k', value: 'xxxxxxxx…', count: 1 });
  });

  it('finds the true top tags of a skewed stream mixed with 100,000 one-off tags, in fixed memory', function () {
    this.timeout(60_000);
    const capacity = 1000;
    const a = new Analytics({ tagCapacity: capacity });
    // Ten heavy tags (tenant=t0 … t9) with 3000, 2800, … 1200 occurrences, interleaved with one-offs.
    const heavy = Array.from({ length: 10 }, (_, i) => ({ value: `t${i}`, count: 3000 - 200 * i }));
    const queue: string[] = [];
    for (const h of heavy) for (let i = 0; i < h.count; i++) queue.push(h.value);
    // Deterministic shuffle.
    let seed = 42;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let i = queue.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [queue[i], queue[j]] = [queue[j], queue[i]];
    }
    let oneOff = 0;
    let maxSize = 0;
    for (let i = 0; i < queue.length; i++) {
      a.record(event({ ctx: { tags: { tenant: queue[i] } } }));
      for (let j = 0; j < 4; j++) a.record(event({ ctx: { tags: { trace: `id-${oneOff++}` } } }));
      maxSize = Math.max(maxSize, a.tags.size);
    }
    while (oneOff < 100_000) a.record(event({ ctx: { tags: { trace: `id-${oneOff++}` } } }));
    expect(maxSize).to.be.at.most(capacity);
    expect(a.tags.size).to.equal(capacity);
    const n = a.tags.offered;
    expect(n).to.equal(queue.length + 100_000);

    const top = a.summary(10).top_tags;
    expect(top.map((t) => `${t.key}=${t.value}`)).to.deep.equal(heavy.map((h) => `tenant=${h.value}`));
    for (const [i, t] of top.entries()) {
      expect(t.count).to.be.at.least(heavy[i].count);
      expect(t.count).to.be.at.most(heavy[i].count + n / capacity);
    }
  });

  it('never reports a count above the true count plus the Space-Saving error bound (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.array(fc.integer({ min: 0, max: 60 }).map((x) => (x < 40 ? x % 5 : x)), { maxLength: 600 }),
        (capacity, stream) => {
          const ss = new SpaceSaving(capacity);
          const truth = new Map<string, number>();
          for (const x of stream) {
            const [key, value] = tagOf(x);
            ss.offer(key, value);
            truth.set(`${key}=${value}`, (truth.get(`${key}=${value}`) ?? 0) + 1);
            if (ss.size > capacity) return false;
          }
          const n = stream.length;
          const bound = Math.floor(n / capacity);
          const reported = ss.top();
          let sum = 0;
          for (const h of reported) {
            const t = truth.get(`${h.key}=${h.value}`) ?? 0;
            sum += h.count;
            if (h.count < t || h.count > t + h.error) return false; // t ≤ count ≤ t + error
            if (h.error > bound || h.error > ss.maxError) return false; // error ≤ N / capacity
            if (h.count - h.error > t) return false;
            if (ss.get(h.key, h.value)?.count !== h.count) return false;
          }
          if (sum !== n) return false; // Space-Saving conserves the stream length
          // Anything not monitored occurred at most N / capacity times; heavier items are always reported.
          const monitored = new Set(reported.map((h) => `${h.key}=${h.value}`));
          for (const [item, t] of truth) if (!monitored.has(item) && t > bound) return false;
          // Sorted by count desc.
          for (let i = 1; i < reported.length; i++) if (reported[i - 1].count < reported[i].count) return false;
          return true;
        },
      ),
      { numRuns: 300 },
    );
  });

  it('evicts exactly as the textbook Space-Saving does: the entry that has held the minimum count longest (property)', () => {
    // A direct model: on a miss when full, the victim is the entry with the smallest count and, among
    // those, the one that reached its count first. top_tags (ties included) depends on this choice.
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }),
        fc.array(fc.integer({ min: 0, max: 40 }).map((x) => (x < 25 ? x % 6 : x)), { maxLength: 400 }),
        (capacity, stream) => {
          const ss = new SpaceSaving(capacity);
          const model = new Map<string, { key: string; value: string; count: number; error: number; since: number }>();
          stream.forEach((x, step) => {
            const [key, value] = tagOf(x);
            ss.offer(key, value);
            const id = `${key}=${value}`;
            const hit = model.get(id);
            if (hit) Object.assign(hit, { count: hit.count + 1, since: step });
            else if (model.size < capacity) model.set(id, { key, value, count: 1, error: 0, since: step });
            else {
              const [victimId, victim] = [...model].reduce((a, b) => (b[1].count < a[1].count || (b[1].count === a[1].count && b[1].since < a[1].since) ? b : a));
              model.delete(victimId);
              model.set(id, { key, value, count: victim.count + 1, error: victim.count, since: step });
            }
          });
          const fromModel = [...model.values()].map(({ key, value, count, error }) => `${key}=${value}:${count}/${error}`).sort();
          const fromSketch = ss.top().map(({ key, value, count, error }) => `${key}=${value}:${count}/${error}`).sort();
          return JSON.stringify(fromModel) === JSON.stringify(fromSketch);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('reads since from the injected clock once, at construction', () => {
    let now = T0;
    const a = new Analytics({ now: () => now });
    now += 60_000;
    a.record(allowedBy('p'));
    expect(a.summary().since).to.equal(new Date(T0).toISOString());
  });
  it('summarises a fixed sequence of events exactly as pinned (order of rows and ties, caps, cut tags)', () => {
    const a = new Analytics({ now: () => T0, policyCapacity: 4, tagCapacity: 6, maxTagLength: 64 });
    for (const e of fixedEventSequence()) a.record(e);
    expect(JSON.stringify(a.summary())).to.equal(JSON.stringify(PINNED_SUMMARY));
    expect(JSON.stringify(a.summary(3))).to.equal(PINNED_TOP_3);
  });
});

/** What the analytics of `fixedEventSequence()` summarise (allowed + denied = total, shadow overlapping: one meaning per outcome, docs/operations.md). */
const PINNED_SUMMARY = {
  "since": "2030-01-02T03:04:05.000Z",
  "total": 40,
  "allowed": 31,
  "denied": 9,
  "shadow": 5,
  "by_action": {
    "allow": 29,
    "deny": 5,
    "shadow_only": 2,
    "throttle": 4
  },
  "by_policy": [
    {
      "policy_id": "(other)",
      "total": 15,
      "allowed": 12,
      "denied": 3,
      "shadow": 2
    },
    {
      "policy_id": "policy-0",
      "total": 7,
      "allowed": 5,
      "denied": 2,
      "shadow": 0
    },
    {
      "policy_id": "policy-2",
      "total": 7,
      "allowed": 4,
      "denied": 3,
      "shadow": 0
    },
    {
      "policy_id": "policy-4",
      "total": 7,
      "allowed": 7,
      "denied": 0,
      "shadow": 0
    },
    {
      "policy_id": "beside",
      "total": 6,
      "allowed": 0,
      "denied": 0,
      "shadow": 3
    }
  ],
  "top_tags": [
    {
      "key": "env",
      "value": "dev",
      "count": 13
    },
    {
      "key": "env",
      "value": "prod",
      "count": 13
    },
    {
      "key": "k1",
      "value": "v2",
      "count": 7
    },
    {
      "key": "k2",
      "value": "v3",
      "count": 7
    },
    {
      "key": "k2",
      "value": "v4",
      "count": 6
    },
    {
      "key": "k3",
      "value": "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv…",
      "count": 6
    }
  ]
};
const PINNED_TOP_3 =
  '{"since":"2030-01-02T03:04:05.000Z","total":40,"allowed":31,"denied":9,"shadow":5,"by_action":{"allow":29,"deny":5,"shadow_only":2,"throttle":4},"by_policy":[{"policy_id":"(other)","total":15,"allowed":12,"denied":3,"shadow":2},{"policy_id":"policy-0","total":7,"allowed":5,"denied":2,"shadow":0},{"policy_id":"policy-2","total":7,"allowed":4,"denied":3,"shadow":0}],"top_tags":[{"key":"env","value":"dev","count":13},{"key":"env","value":"prod","count":13},{"key":"k1","value":"v2","count":7}]}';
