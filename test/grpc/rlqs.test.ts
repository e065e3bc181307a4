import * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { counterKeys } from '../../src/counters/keys.js';
import { createGrpcServer, shutdownGrpcServer } from '../../src/grpc/server.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { SERVICE_NAMES, serviceDefinition } from '../../src/grpc/protos.js';
import { RlqsHub } from '../../src/lease/rlqs-hub.js';
import type { RlqsEvents } from '../../src/lease/rlqs-stream.js';
import { systemClock, type LapseReason } from '../../src/lease/types.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { CounterStoreUnavailableError, RlError } from '../../src/errors.js';
import type { CounterStore } from '../../src/counters/counter-store.js';
import type { Policy } from '../../src/policy/types.js';
import { SimulatedEnvoy } from '../support/envoy-rlqs-client.js';
import { makePolicy } from '../support/policies.js';
import { bindLocal } from './helpers.js';

const PREFIX = 'rlqs-test:';
const BUCKET = { user_id: 'alice', route: 'checkout' };

interface Fixture {
  target: string;
  hub: RlqsHub;
  counters: MemoryCounterStore;
  matcher: LiveMatcher;
  lapsed: { units: number; reason: LapseReason }[];
  counts: Record<string, number>;
  /** What the policy's counter has consumed for the bucket's user (a peek's limit − remaining). */
  consumed(policy: Policy): Promise<number>;
  close(): Promise<void>;
}

async function start(policies: Policy[], options: { idleMs?: number; store?: CounterStore; authenticate?: boolean } = {}): Promise<Fixture> {
  const matcher = new LiveMatcher(policies);
  const counters = new MemoryCounterStore({ sweepIntervalMs: 0 });
  const store = options.store ?? counters;
  const lapsed: Fixture['lapsed'] = [];
  const counts: Record<string, number> = {};
  const bump = (name: string) => (counts[name] = (counts[name] ?? 0) + 1);
  const events: RlqsEvents = {
    report: () => bump('report'),
    assigned: (strategy) => bump(strategy),
    abandoned: () => bump('abandoned'),
    unsupported: () => bump('unsupported'),
    lapsed: (_policyId, units, reason) => lapsed.push({ units, reason }),
  };
  const hub = new RlqsHub({
    policies: matcher,
    store: { take: store.take!.bind(store), giveBack: store.giveBack!.bind(store), peek: store.peek.bind(store) },
    keyPrefix: PREFIX,
    clock: systemClock,
    idleMs: options.idleMs ?? 60_000,
    wallNow: Date.now,
    events,
  });
  const readiness = new Readiness();
  readiness.markReady();
  const decisions = new DecisionService({ policies: matcher, counters, keyPrefix: PREFIX });
  const authenticate = options.authenticate
    ? (metadata: grpc.Metadata) => {
        if (metadata.get('x-api-key')[0] !== 'secret') throw new RlError('unauthenticated', 'a valid API key is required');
        return { role: 'admin' as const };
      }
    : undefined;
  const server = createGrpcServer({ decisions, readiness, maxMessageBytes: 1 << 20, rlqs: hub, authenticate: authenticate as never });
  const { target } = await bindLocal(server);
  return {
    target,
    hub,
    counters,
    matcher,
    lapsed,
    counts,
    consumed: async (policy) => {
      const keys = counterKeys(PREFIX, policy.policy_id, matcher.current().get(policy.policy_id)!.spec, ['user_id', 'alice']);
      const peek = await counters.peek(keys, matcher.current().get(policy.policy_id)!.spec as never);
      return (policy.algorithm.limit as number) - peek.remaining;
    },
    close: () => shutdownGrpcServer(server, 1000),
  };
}

/** Sends requests into the bucket, one a millisecond or so (assignments and reports interleave), until `done`. */
async function driveUntil(envoy: SimulatedEnvoy, done: () => boolean, bucket = BUCKET): Promise<void> {
  while (!done()) {
    envoy.request(bucket);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** Whether the server has told this Envoy the bucket's counter admits no more. */
const toldSpent = (envoy: SimulatedEnvoy) => envoy.actions.some((a) => a.quota_assignment_action?.rate_limit_strategy?.blanket_rule === 'DENY_ALL');

/** Demand goes on until every unit of the counter is spent and reported (nothing held), or `tries` ms. */
function spentOut(fixture: Fixture, policy: Policy, tries = 15_000): () => boolean {
  let done = false;
  let left = tries;
  const timer = setInterval(() => {
    void fixture.consumed(policy).then((consumed) => {
      if (consumed === policy.algorithm.limit && fixture.hub.status().units_held === 0) done = true;
    });
  }, 20);
  return () => {
    if (done || --left <= 0) clearInterval(timer);
    return done || left <= 0;
  };
}

/** Two Envoys on `fixture` drive requests until `policy` is spent out; how many they admitted together. */
async function twoEnvoysSpendOut(fixture: Fixture, policy: Policy): Promise<number> {
  const envoys = [1, 2].map(() => new SimulatedEnvoy({ target: fixture.target, domain: 'edge', reportEveryMs: 20 }));
  try {
    const done = spentOut(fixture, policy);
    await Promise.all(envoys.map((envoy) => driveUntil(envoy, done)));
  } finally {
    await Promise.all(envoys.map((envoy) => envoy.close()));
  }
  return envoys.reduce((sum, envoy) => sum + envoy.admitted, 0);
}

const windowPolicy = (limit: number, extra: Record<string, unknown> = {}) =>
  makePolicy({ policy_id: 'checkout', scope: { user_id: '*' }, algorithm: { type: 'fixed_window', limit, window: '1h' }, lease: { max_hold: '1s' }, ...extra });

describe('Envoy RLQS (StreamRateLimitQuotas)', function () {
  this.timeout(20_000);

  it('assigns ALLOW_ALL, living RL_RLQS_BUCKET_IDLE_SECS, to a bucket no policy covers', async () => {
    const fixture = await start([], { idleMs: 7000 });
    const envoy = new SimulatedEnvoy({ target: fixture.target, domain: 'edge', reportEveryMs: 50 });
    try {
      envoy.request(BUCKET);
      const action = await envoy.waitFor((a) => a.quota_assignment_action !== undefined);
      expect(action.quota_assignment_action!.rate_limit_strategy).to.deep.include({ blanket_rule: 'ALLOW_ALL' });
      expect(action.quota_assignment_action!.assignment_time_to_live).to.deep.include({ seconds: 7 });
      expect(envoy.request(BUCKET)).to.equal(true);
    } finally {
      await envoy.close();
      await fixture.close();
    }
  });

  it('hands out a window in token buckets: never over the limit, all of it used, the counter ends at what was admitted', async () => {
    const policy = windowPolicy(120);
    const fixture = await start([policy]);
    const envoys = [1, 2, 3].map(() => new SimulatedEnvoy({ target: fixture.target, domain: 'edge', reportEveryMs: 20 }));
    try {
      // Demand past the limit from three Envoys at once, until the counter is spent and nothing is held.
      const done = spentOut(fixture, policy);
      await Promise.all(envoys.map((envoy) => driveUntil(envoy, done)));
      const admitted = envoys.reduce((sum, envoy) => sum + envoy.admitted, 0);
      expect(admitted).to.be.at.most(120);
      expect(admitted).to.be.at.least(108);
      const strategies = envoys.flatMap((e) => e.actions).map((a) => a.quota_assignment_action?.rate_limit_strategy);
      expect(strategies.some((s) => s?.token_bucket !== undefined)).to.equal(true);
    } finally {
      await Promise.all(envoys.map((envoy) => envoy.close()));
    }
    const admitted = envoys.reduce((sum, envoy) => sum + envoy.admitted, 0);
    expect(await fixture.consumed(policy)).to.equal(admitted);
    expect(fixture.hub.status()).to.deep.equal({ streams: 0, buckets: 0, units_held: 0 });
    await fixture.close();
  });

  it('takes every grant in every layer: the tighter layer bounds what is admitted, both counters end at it', async () => {
    const user = windowPolicy(40, { layer: 'user' });
    const platform = makePolicy({ policy_id: 'platform', layer: 'platform', scope: { user_id: '*' }, algorithm: { type: 'fixed_window', limit: 25, window: '1h' } });
    const fixture = await start([user, platform]);
    const admitted = await twoEnvoysSpendOut(fixture, platform);
    expect(admitted).to.equal(25);
    expect(await fixture.consumed(platform)).to.equal(admitted);
    expect(await fixture.consumed(user)).to.equal(admitted);
    await fixture.close();
  });

  it('hands out a budget: "global" policy without regions from the one store there is, like any', async () => {
    const policy = windowPolicy(30, { budget: 'global' });
    const fixture = await start([policy]);
    const admitted = await twoEnvoysSpendOut(fixture, policy);
    expect(admitted).to.be.at.most(30).and.at.least(27);
    expect(await fixture.consumed(policy)).to.equal(admitted);
    await fixture.close();
  });

  it('answers UNAUTHENTICATED without the credentials RLS takes', async () => {
    const fixture = await start([windowPolicy(10)], { authenticate: true });
    const stranger = new SimulatedEnvoy({ target: fixture.target, domain: 'edge', reportEveryMs: 50 });
    const known = new SimulatedEnvoy({ target: fixture.target, domain: 'edge', reportEveryMs: 50, apiKey: 'secret' });
    try {
      stranger.request(BUCKET);
      expect((await stranger.closed).code).to.equal(grpc.status.UNAUTHENTICATED);
      known.request(BUCKET);
      const action = await known.waitFor((a) => a.quota_assignment_action !== undefined);
      expect(action.quota_assignment_action!.rate_limit_strategy!.token_bucket).to.not.equal(undefined);
    } finally {
      stranger.cut();
      await known.close();
      await fixture.close();
    }
  });

  it('assigns DENY_ALL to a spent window, living no longer than its retry_after (and the hold)', async () => {
    const policy = windowPolicy(5);
    const fixture = await start([policy]);
    const spec = fixture.matcher.current().get('checkout')!.spec;
    await fixture.counters.consume(counterKeys(PREFIX, 'checkout', spec, ['user_id', 'alice']), spec as never, 5);
    const envoy = new SimulatedEnvoy({ target: fixture.target, domain: 'edge', reportEveryMs: 50 });
    try {
      expect(envoy.request(BUCKET)).to.equal(false);
      const action = await envoy.waitFor((a) => a.quota_assignment_action !== undefined);
      const assignment = action.quota_assignment_action!;
      expect(assignment.rate_limit_strategy).to.deep.include({ blanket_rule: 'DENY_ALL' });
      const ttlMs = Number(assignment.assignment_time_to_live!.seconds ?? 0) * 1000 + Number(assignment.assignment_time_to_live!.nanos ?? 0) / 1e6;
      expect(ttlMs).to.be.above(0).and.at.most(1000);
      expect(envoy.request(BUCKET)).to.equal(false);
      expect(envoy.admitted).to.equal(0);
    } finally {
      await envoy.close();
    }
    expect(await fixture.consumed(policy)).to.equal(5);
    await fixture.close();
  });

  it('abandons a bucket with no request reported for the idle time, and gives its units back', async () => {
    const policy = windowPolicy(50);
    const fixture = await start([policy], { idleMs: 1000 });
    const envoy = new SimulatedEnvoy({ target: fixture.target, domain: 'edge', reportEveryMs: 20 });
    try {
      envoy.request(BUCKET);
      await envoy.waitFor((a) => a.quota_assignment_action?.rate_limit_strategy?.token_bucket !== undefined);
      for (let i = 0; i < 3; i++) envoy.request(BUCKET);
      // No more requests: the reports go on, empty, until the server abandons the bucket.
      await envoy.waitFor((a) => a.abandon_action !== undefined);
      expect(fixture.counts.abandoned).to.equal(1);
      expect(envoy.activeStrategy(BUCKET)).to.equal(undefined);
      expect(fixture.hub.status()).to.deep.include({ buckets: 0, units_held: 0 });
      expect(envoy.admitted).to.be.at.least(1);
      expect(await fixture.consumed(policy)).to.equal(envoy.admitted);
    } finally {
      await envoy.close();
      await fixture.close();
    }
  });

  it('a stream cut mid-assignment gives nothing back: its unreported units lapse (holder_lost) once their assignment ends', async () => {
    const policy = windowPolicy(100, { lease: { max_hold: '200ms' } });
    const fixture = await start([policy]);
    const envoy = new SimulatedEnvoy({ target: fixture.target, domain: 'edge', reportEveryMs: 20 });
    const other = new SimulatedEnvoy({ target: fixture.target, domain: 'edge', reportEveryMs: 20 });
    try {
      envoy.request(BUCKET);
      await envoy.waitFor((a) => a.quota_assignment_action?.rate_limit_strategy?.token_bucket !== undefined);
      envoy.request(BUCKET);
      envoy.cut();
      const granted = envoy.actions.reduce((sum, a) => sum + (a.quota_assignment_action?.rate_limit_strategy?.token_bucket?.max_tokens ?? 0), 0);
      expect(envoy.admitted, 'the one request the grant admitted, never reported').to.equal(1);
      const held = await waitUntil(() => fixture.lapsed.reduce((sum, l) => sum + l.units, 0) >= granted);
      expect(held).to.equal(true);
      expect(fixture.hub.status()).to.deep.include({ buckets: 0, units_held: 0 });
      // Nothing was reported spent, nothing given back: every granted unit lapsed, counted holder_lost, and stays consumed.
      expect(fixture.lapsed.reduce((sum, l) => sum + l.units, 0), 'lapsed: every unit granted').to.equal(granted);
      expect(fixture.lapsed.every((l) => l.reason === 'holder_lost')).to.equal(true);
      expect(await fixture.consumed(policy), 'consumed: exactly what was granted').to.equal(granted);
      // Another Envoy is still served from what is left.
      other.request(BUCKET);
      await other.waitFor((a) => a.quota_assignment_action?.rate_limit_strategy?.token_bucket !== undefined);
    } finally {
      await other.close();
      await fixture.close();
    }
  });

  for (const [mode, blanket] of [
    ['fail_open', 'ALLOW_ALL'],
    ['fail_closed', 'DENY_ALL'],
  ] as const) {
    it(`answers a store failure by the failure mode (${mode}: ${blanket}), living at most a second`, async () => {
      const failing = new MemoryCounterStore({ sweepIntervalMs: 0 });
      failing.take = async () => {
        throw new CounterStoreUnavailableError('the counter store is down');
      };
      const fixture = await start([windowPolicy(10, { failure_mode: mode })], { store: failing });
      const envoy = new SimulatedEnvoy({ target: fixture.target, domain: 'edge', reportEveryMs: 50 });
      try {
        envoy.request(BUCKET);
        const action = await envoy.waitFor((a) => a.quota_assignment_action !== undefined);
        expect(action.quota_assignment_action!.rate_limit_strategy).to.deep.include({ blanket_rule: blanket });
        const ttl = action.quota_assignment_action!.assignment_time_to_live!;
        expect(Number(ttl.seconds ?? 0) * 1000 + Number(ttl.nanos ?? 0) / 1e6).to.be.above(0).and.at.most(1000);
      } finally {
        await envoy.close();
        await fixture.close();
      }
    });
  }

  it('decodes a report as Envoy puts it on the wire: field 2 repeated, one length-delimited BucketQuotaUsage per bucket', async () => {
    // RateLimitQuotaUsageReports by hand, as Envoy's client builds it (add_bucket_quota_usages()): domain,
    // then two buckets, each {bucket_id {bucket: map}, time_elapsed {seconds}, allowed, denied}.
    const usage = (user: string, allowed: number, denied: number) =>
      field(2, [
        ...field(1, field(1, [...field(1, text('user_id')), ...field(2, text(user))])),
        ...field(2, [0x08, 1]),
        0x18, allowed,
        0x20, denied,
      ]);
    const report = Buffer.from([...field(1, text('edge')), ...usage('alice', 0, 1), ...usage('bob', 2, 3)]);
    const method = serviceDefinition(SERVICE_NAMES.rlqs).StreamRateLimitQuotas!;
    expect(method.requestDeserialize(report)).to.deep.equal({
      domain: 'edge',
      bucket_quota_usages: [
        { bucket_id: { bucket: { user_id: 'alice' } }, time_elapsed: { seconds: '1' }, num_requests_allowed: '0', num_requests_denied: '1' },
        { bucket_id: { bucket: { user_id: 'bob' } }, time_elapsed: { seconds: '1' }, num_requests_allowed: '2', num_requests_denied: '3' },
      ],
    });
    // The same bytes over a real call: the server subscribes both buckets and assigns each.
    const fixture = await start([windowPolicy(10)]);
    const Raw = grpc.makeGenericClientConstructor({ StreamRateLimitQuotas: { ...method, requestSerialize: (bytes: Buffer) => bytes } }, 'RawRlqs');
    const client = new Raw(fixture.target, grpc.credentials.createInsecure()) as unknown as { StreamRateLimitQuotas(): grpc.ClientDuplexStream<Buffer, { bucket_action: { bucket_id: { bucket: Record<string, string> } }[] }> };
    const call = client.StreamRateLimitQuotas();
    const assigned = new Set<string>();
    try {
      const both = new Promise<void>((resolve, reject) => {
        call.on('data', (message) => {
          for (const action of message.bucket_action) assigned.add(action.bucket_id.bucket.user_id!);
          if (assigned.size === 2) resolve();
        });
        call.on('error', reject);
      });
      call.write(report);
      await both;
      expect([...assigned].sort()).to.deep.equal(['alice', 'bob']);
      expect(fixture.counts.report).to.equal(2);
    } finally {
      call.cancel();
      (client as unknown as grpc.Client).close();
      await fixture.close();
    }
  });

  it('the same strategy again only extends the assignment: the simulated Envoy keeps the one it has, and reports only on its interval', async () => {
    const fixture = await start([], { idleMs: 1000 });
    const envoy = new SimulatedEnvoy({ target: fixture.target, domain: 'edge', reportEveryMs: 100 });
    try {
      envoy.request(BUCKET);
      await envoy.waitFor((a) => a.quota_assignment_action !== undefined);
      // Demand goes on: near the assignment's end the server sends ALLOW_ALL again, the same strategy.
      let n = 0;
      await driveUntil(envoy, () => envoy.actions.length >= 2 || ++n > 5000);
      expect(envoy.actions.slice(0, 2).map((a) => a.quota_assignment_action?.rate_limit_strategy?.blanket_rule)).to.deep.equal(['ALLOW_ALL', 'ALLOW_ALL']);
      expect({ replaced: envoy.replaced, extended: envoy.extended }).to.deep.equal({ replaced: 1, extended: 1 });
      expect(envoy.activeStrategy(BUCKET)).to.deep.include({ blanket_rule: 'ALLOW_ALL' });
    } finally {
      await envoy.close();
      await fixture.close();
    }
  });

  it('does not evaluate a shadow policy for a bucket: only enforced winners take units, a shadow-only bucket is ALLOW_ALL', async () => {
    const shadow = windowPolicy(5, { enforcement_mode: 'shadow' });
    const fixture = await start([shadow], { idleMs: 3000 });
    const envoy = new SimulatedEnvoy({ target: fixture.target, domain: 'edge', reportEveryMs: 20 });
    try {
      envoy.request(BUCKET);
      const action = await envoy.waitFor((a) => a.quota_assignment_action !== undefined);
      expect(action.quota_assignment_action!.rate_limit_strategy).to.deep.include({ blanket_rule: 'ALLOW_ALL' });
      for (let i = 0; i < 10; i++) expect(envoy.request(BUCKET), 'a shadow policy never denies').to.equal(true);
    } finally {
      await envoy.close();
    }
    expect(await fixture.consumed(shadow), 'no units taken from the shadow counter').to.equal(0);
    await fixture.close();
  });

  it('assigns ALLOW_ALL to a bucket a concurrency policy covers, counted as unsupported', async () => {
    const fixture = await start([makePolicy({ policy_id: 'slots', scope: { user_id: '*' }, algorithm: { type: 'concurrency', max_concurrency: 2 } })]);
    const envoy = new SimulatedEnvoy({ target: fixture.target, domain: 'edge', reportEveryMs: 50 });
    try {
      envoy.request(BUCKET);
      const action = await envoy.waitFor((a) => a.quota_assignment_action !== undefined);
      expect(action.quota_assignment_action!.rate_limit_strategy).to.deep.include({ blanket_rule: 'ALLOW_ALL' });
      expect(fixture.counts.unsupported).to.equal(1);
    } finally {
      await envoy.close();
      await fixture.close();
    }
  });
});

/** Polls `test` every 10 ms for up to 10 s (a bound on waiting, not an assertion on time). */
async function waitUntil(test: () => boolean): Promise<boolean> {
  for (let i = 0; i < 1000; i++) {
    if (test()) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return test();
}

/** One protobuf field of wire type 2 (length-delimited): the tag, the length, the bytes. */
function field(number: number, bytes: number[]): number[] {
  if (bytes.length > 127) throw new Error('a one-byte length is enough here');
  return [(number << 3) | 2, bytes.length, ...bytes];
}

const text = (value: string) => [...Buffer.from(value, 'utf8')];
