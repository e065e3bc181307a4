/**
 * Redis Cluster failover (issue 14): three masters with one replica each and a 2 s node timeout. A master
 * is crashed (SIGKILL) while decisions and policy changes are in flight:
 *
 * - decisions keep answering by their policy's failure mode (never a throw), and come back to normal
 *   counting by themselves once the replica has been promoted: no restart, no reconnect call;
 * - only the dead master's keys answer by failure mode: each master has its own breaker (issue 22), so
 *   decisions whose slots live on the other masters are answered normally throughout;
 * - counts the replica had received survive the failover;
 * - no policy change acknowledged before the crash is lost, even when the replica lagged behind.
 *
 * No assertion times the failover (the machine is shared and noisy): the decisions test only prints
 * how long it took.
 */
import { expect } from 'chai';
import calculateSlot from 'cluster-key-slot';
import { connectRedisCounterStore, type CounterStoreErrorEvent, type RedisCounterStore } from '../../src/redis/redis-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { RlError } from '../../src/errors.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { RedisPolicyStore } from '../../src/policy-store/redis-policy-store.js';
import type { Policy } from '../../src/policy/types.js';
import { setLogLevel } from '../../src/util/log.js';
import {
  counterOf,
  decisionRound,
  expectAnswered,
  expectCountsCarriedOn,
  failoverPolicies,
  hangGuard,
  isFailureMode,
  roleOf,
  sleep,
  tally,
  waitForReplicaInSync,
  type RoundResult,
} from '../support/failover.js';
import { createChange, updateChange, versionedPolicy } from '../support/policies.js';
import { command, randomPrefix, startRedisFailoverCluster, type RedisFailoverClusterHandle } from '../support/redis.js';

const NODE_TIMEOUT_MS = 2000;
/** Every policy's hashes live under this one tag, so one master holds the whole policy store. */
const POLICY_SLOT = calculateSlot('{policies}');

describe('Redis Cluster failover (3 masters + 3 replicas, 2 s node timeout)', function () {
  this.timeout(90_000);
  let cluster: RedisFailoverClusterHandle;

  before(async () => {
    setLogLevel('silent');
    cluster = await startRedisFailoverCluster(NODE_TIMEOUT_MS);
  });

  after(async () => {
    await cluster?.stop();
    setLogLevel('info');
  });

  describe('decisions', () => {
    const prefix = randomPrefix();
    const users = Array.from({ length: 24 }, (_, i) => `u${i}`);
    let store: RedisCounterStore;
    let service: DecisionService;

    before(async () => {
      // A production-like timeout: long enough for a loaded CI machine, short enough to matter.
      store = connectRedisCounterStore(cluster.addr, { commandTimeoutMs: 500 });
      await store.waitUntilReady(10_000);
      service = new DecisionService({ policies: new LiveMatcher(failoverPolicies()), counters: store, keyPrefix: prefix });
    });

    after(async () => {
      await store?.close();
    });

    const round = () => decisionRound(service, users);

    it('answer by failure mode while a master is down and recover unaided after its replica is promoted', async () => {
      // Counted decisions per counter ("policy/user"), and those the replicas are known to hold.
      const counted = new Map<string, number>();
      for (let i = 0; i < 3; i++) {
        const results = await round();
        expect(results.every((r) => r.decision.reason === 'within_limit'), 'healthy cluster').to.equal(true);
        tally(counted, results);
      }
      const replicated = new Map(counted);

      // The victim: a master holding counters, not the one holding the policy store (the next test's).
      const policyMaster = await cluster.masterOf(POLICY_SLOT);
      const byMaster = await countersByMaster(cluster, prefix);
      const [victimPort, victimCounters] = [...byMaster].filter(([port]) => port !== policyMaster.port).sort((a, b) => b[1].size - a[1].size)[0];
      expect(victimCounters.size, 'counters on the victim').to.be.greaterThan(0);
      await waitForReplicaInSync(victimPort);
      const victimReplica = await cluster.replicaOf(victimPort);

      // Crash it while a round is in flight.
      const refusals: CounterStoreErrorEvent[] = [];
      const failuresElsewhere: string[] = [];
      const unsubscribe = store.onError((event) => {
        if (event.kind === 'breaker_open') refusals.push(event);
      });
      const inFlight = round();
      const crashedAt = performance.now();
      await cluster.crash(victimPort);
      const during: RoundResult[][] = [await inFlight];
      let firstNormalMs: number | undefined;
      let recoveredMs: number | undefined;
      let unavailable = 0;
      let unavailableElsewhere = 0;
      let elsewhere = 0;
      // Poll until every counter on the victim has answered normally 5 rounds in a row (bounded).
      let normalRounds = 0;
      while (normalRounds < 5) {
        hangGuard(crashedAt, "normal decisions on the crashed master's slots");
        await sleep(20);
        const results = await round();
        during.push(results);
        const victimResults = results.filter((r) => victimCounters.has(counterOf(r)));
        if (firstNormalMs === undefined && victimResults.some((r) => r.decision.reason === 'within_limit')) {
          firstNormalMs = performance.now() - crashedAt;
        }
        if (victimResults.every((r) => r.decision.reason === 'within_limit')) {
          recoveredMs ??= performance.now() - crashedAt;
          normalRounds++;
        } else {
          recoveredMs = undefined;
          normalRounds = 0;
        }
      }

      unsubscribe();
      // Every decision answered, by failure mode when the store could not.
      for (const results of during) {
        tally(counted, results);
        for (const r of results) {
          expectAnswered(r);
          const onVictim = victimCounters.has(counterOf(r));
          if (!onVictim) elsewhere++;
          if (isFailureMode(r)) {
            unavailable++;
            if (!onVictim) unavailableElsewhere++;
            if (!onVictim && failuresElsewhere.length < 3) failuresElsewhere.push(`${counterOf(r)}: ${JSON.stringify(r.decision)}`);
          }
        }
      }
      expect(unavailable, 'decisions answered by failure mode during the outage').to.be.greaterThan(0);
      // Counted by slot owner: the healthy masters' keys were answered normally (a stray timeout on a
      // loaded machine is tolerated, a shared breaker would fail about half of them), and every breaker
      // refusal was the dead master's.
      expect(elsewhere, "decisions for counters on the healthy masters").to.be.greaterThan(0);
      expect(1 - unavailableElsewhere / elsewhere, `share of normal answers on the healthy masters (${failuresElsewhere.join('; ')})`).to.be.at.least(0.99);
      expect(refusals.length, 'breaker refusals').to.be.greaterThan(0);
      for (const refusal of refusals) expect(refusal.error.message, 'a breaker refusal').to.include(`circuit breaker of 127.0.0.1:${victimPort} open`);
      expect(store.health.states().map((s) => s.master), 'masters with a breaker').to.include(`127.0.0.1:${victimPort}`);
      // The decisions came back through the failover: the crashed master's replica serves its slots now.
      expect(await roleOf(victimReplica), "the crashed master's replica").to.equal('master');
      console.log(
        `      failover: first normal decision on the crashed master's slots ${(firstNormalMs! / 1000).toFixed(1)} s after the crash, ` +
          `all of them ${(recoveredMs! / 1000).toFixed(1)} s; ${unavailable} decisions answered by failure mode meanwhile ` +
          `(${unavailableElsewhere} of them for counters on the healthy masters, out of ${elsewhere} decisions there; ` +
          `${refusals.length} refused by the dead master's breaker)`,
      );

      // Counting carried on from what the replica held: nothing replicated was lost, nothing counted twice.
      const final = await round();
      tally(counted, final);
      expectCountsCarriedOn(final, replicated, counted, during);
    });
  });

  describe('policy store', () => {
    it('loses no change acknowledged before the crash, even while the replica lags', async () => {
      const prefix = randomPrefix();
      const store = await RedisPolicyStore.open({ addr: cluster.addr, keyPrefix: prefix });
      // A second writer waits only briefly for a replica, so the replica is frozen well below the node timeout.
      const hasty = await RedisPolicyStore.open({ addr: cluster.addr, keyPrefix: prefix, replicaAckTimeoutMs: 300 });
      let reader: RedisPolicyStore | undefined;
      try {
        const p1 = versionedPolicy('p1', 1);
        expect(await store.commit(createChange(p1))).to.deep.include({ ok: true });
        expect(await store.commit(createChange(versionedPolicy('p2', 1)))).to.deep.include({ ok: true });
        const p1v2 = versionedPolicy('p1', 2, 20);
        expect(await store.commit(updateChange(p1v2, p1))).to.deep.include({ ok: true });
        const acknowledged: Policy[] = [p1v2, versionedPolicy('p2', 1)];

        // The replica stops reading, and 32 MB of other writes fill the link, so what the master writes
        // next stays in the master's memory: exactly what a crash loses.
        const master = await cluster.masterOf(POLICY_SLOT);
        const replica = await cluster.replicaOf(master.port);
        cluster.freeze(replica);
        try {
          await command(master.host, master.port, ['SET', `${prefix}{policies}:ballast`, 'x'.repeat(32 * 1024 * 1024)], 10_000);
          // No replica can confirm: the change is not acknowledged.
          const p3 = await hasty.commit(createChange(versionedPolicy('p3', 1))).catch((error: unknown) => error);
          if ((p3 as { ok?: boolean }).ok === true) acknowledged.push(versionedPolicy('p3', 1));
          expect(p3, 'a change no replica confirmed').to.be.instanceOf(RlError).with.property('kind', 'unavailable');
          expect((p3 as RlError).message).to.match(/no replica confirmed it within 300 ms/);
        } finally {
          // The replica catches up while the next change waits for it.
          setTimeout(() => cluster.thaw(replica), 100);
        }
        const p4 = versionedPolicy('p4', 1, 40);
        expect(await store.commit(createChange(p4)), 'a change the replica confirmed').to.deep.include({ ok: true });
        acknowledged.push(p4);
        await cluster.crash(master.port);
        const crashedAt = performance.now();

        // During the outage a change fails with 503 (or succeeds once the replica is promoted); never hangs.
        const during = await store.commit(createChange(versionedPolicy('p5', 1))).catch((error: unknown) => error);
        if ((during as { ok?: boolean }).ok === true) acknowledged.push(versionedPolicy('p5', 1));
        else expect(during).to.be.instanceOf(RlError).with.property('kind', 'unavailable');

        // A node starting after the failover reads every acknowledged change (open() fails until then).
        while (!reader) {
          hangGuard(crashedAt, 'a readable policy store');
          reader = await RedisPolicyStore.open({ addr: cluster.addr, keyPrefix: prefix, connectTimeoutMs: 2000 }).catch(() => undefined);
          if (!reader) await sleep(200);
        }
        // The writer's client still has the old slot map: a call may fail (503) until a reply redirects it.
        let stale = 0;
        for (;;) {
          hangGuard(crashedAt, 'a read by the writer');
          const read = await store.fetch('p1').catch((error: unknown) => error);
          if (!(read instanceof Error)) break;
          expect(read).to.be.instanceOf(RlError).with.property('kind', 'unavailable');
          stale++;
          await sleep(50);
        }
        expect(stale, 'calls the writer lost to its stale slot map').to.be.at.most(3);
        // Read through the failover: the policy store's replica was promoted.
        expect(await roleOf(replica), "the crashed policy master's replica").to.equal('master');
        for (const policy of acknowledged) {
          expect(reader.get(policy.policy_id)?.version, `${policy.policy_id} on a new node`).to.equal(policy.version);
          expect((await store.fetch(policy.policy_id)).policy?.version, `${policy.policy_id} on the writer`).to.equal(policy.version);
        }
        // The node that lived through the failover writes again, unaided.
        expect(await store.commit(createChange(versionedPolicy('p6', 1)))).to.deep.include({ ok: true });
        expect((await reader.fetch('p6')).policy?.version).to.equal(1);
      } finally {
        await reader?.close();
        await Promise.all([store.close(), hasty.close()]);
      }
    });
  });
});

/** "policy/user" counters found on each master, by the keys actually stored under `prefix`. */
async function countersByMaster(cluster: RedisFailoverClusterHandle, prefix: string): Promise<Map<number, Set<string>>> {
  const out = new Map<number, Set<string>>();
  for (const node of cluster.nodes) {
    if ((await roleOf(node.port, node.host)) !== 'master') continue;
    const keys = (await command(node.host, node.port, ['KEYS', `${prefix}*`])) as string[];
    const counters = new Set<string>();
    for (const key of keys) {
      // The tag is the length-prefixed policy id and identity: {4:open7:user_id2:u5}.
      const m = /\{\d+:(\w+)\d+:user_id\d+:(\w+)\}/.exec(key);
      if (m) counters.add(`${m[1]}/${m[2]}`);
    }
    out.set(node.port, counters);
  }
  return out;
}
