/**
 * Sentinel failover (issue 22): a master, its replica and three sentinels (quorum 2, master down after
 * 1 s of silence). The master is crashed (SIGKILL) while decisions are in flight:
 *
 * - decisions answer by their policy's failure mode (never a throw) and come back to normal counting by
 *   themselves once the sentinels have promoted the replica: no restart, no reconnect call;
 * - counts the replica had received survive the failover;
 * - a policy change acknowledged before the crash (the store waits for the replica) is still there.
 *
 * The failure-mode window is counted (decisions and rounds) and printed, never asserted in seconds.
 */
import { expect } from 'chai';
import { connectRedisCounterStore, type RedisCounterStore } from '../../src/redis/redis-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { RedisPolicyStore } from '../../src/policy-store/redis-policy-store.js';
import { setLogLevel } from '../../src/util/log.js';
import * as failover from '../support/failover.js';
import { createChange, updateChange, versionedPolicy } from '../support/policies.js';
import { randomPrefix, startRedisSentinelFailover, type RedisSentinelFailoverHandle } from '../support/redis.js';

describe('Redis Sentinel failover (master + replica + 3 sentinels)', function () {
  this.timeout(90_000);
  let group: RedisSentinelFailoverHandle;
  let counters: RedisCounterStore | undefined;
  let policies: RedisPolicyStore | undefined;
  let reader: RedisPolicyStore | undefined;

  before(async () => {
    setLogLevel('silent');
    group = await startRedisSentinelFailover();
  });

  after(async () => {
    await reader?.close();
    await policies?.close();
    await counters?.close();
    await group?.stop();
    setLogLevel('info');
  });

  it('decisions answer by failure mode, then count again unaided once the replica is promoted; an acknowledged policy change survives', async () => {
    const prefix = randomPrefix();
    const users = Array.from({ length: 12 }, (_, i) => `u${i}`);
    counters = connectRedisCounterStore(group.addr, { commandTimeoutMs: 500 });
    await counters.waitUntilReady(10_000);
    const service = new DecisionService({ policies: new LiveMatcher(failover.failoverPolicies()), counters, keyPrefix: prefix });
    policies = await RedisPolicyStore.open({ addr: group.addr, keyPrefix: prefix });

    // Before the crash: normal counting, and two policy changes, each acknowledged only once the replica has it.
    const counted = new Map<string, number>();
    for (let i = 0; i < 3; i++) {
      const results = await failover.decisionRound(service, users);
      expect(results.every((r) => !failover.isFailureMode(r)), 'healthy master').to.equal(true);
      failover.tally(counted, results);
    }
    const p1 = versionedPolicy('p1', 1);
    expect(await policies.commit(createChange(p1))).to.deep.include({ ok: true });
    const p1v2 = versionedPolicy('p1', 2, 20);
    expect(await policies.commit(updateChange(p1v2, p1))).to.deep.include({ ok: true });
    await failover.waitForReplicaInSync(group.masterPort);
    const replicated = new Map(counted);

    const inFlight = failover.decisionRound(service, users);
    const crashedAt = performance.now();
    await group.crashMaster();
    const during: failover.RoundResult[][] = [await inFlight];
    // Rounds until every counter has answered normally 5 rounds in a row (bounded by the hang guard).
    let normalRounds = 0;
    let lastFailureModeRound = -1;
    let lastFailureModeMs = 0;
    while (normalRounds < 5) {
      failover.hangGuard(crashedAt, 'normal decisions after the master crashed');
      await failover.sleep(20);
      const results = await failover.decisionRound(service, users);
      during.push(results);
      if (results.some(failover.isFailureMode)) {
        normalRounds = 0;
        lastFailureModeRound = during.length - 1;
        lastFailureModeMs = performance.now() - crashedAt;
      } else {
        normalRounds++;
      }
    }

    let failureMode = 0;
    for (const results of during) {
      for (const r of results) {
        failover.expectAnswered(r);
        if (failover.isFailureMode(r)) failureMode++;
      }
      failover.tally(counted, results);
    }
    expect(failureMode, 'decisions answered by failure mode during the failover').to.be.greaterThan(0);
    // The sentinels promoted the replica, and the store followed them to it.
    expect(await group.currentMasterPort(), 'the master the sentinels name').to.equal(group.replicaPort);
    expect(await failover.roleOf(group.replicaPort), 'the old replica').to.equal('master');
    // One breaker throughout: Sentinel names one master at a time, whichever server that is.
    expect(counters.health.states().map((s) => s.master)).to.deep.equal(['master']);
    const decisionsInWindow = during.slice(0, lastFailureModeRound + 1).reduce((n, results) => n + results.length, 0);
    console.log(
      `      sentinel failover: ${failureMode} of ${decisionsInWindow} decisions answered by failure mode over ` +
        `${lastFailureModeRound + 1} rounds; the last one ${(lastFailureModeMs / 1000).toFixed(1)} s after the crash`,
    );

    const final = await failover.decisionRound(service, users);
    expect(final.every((r) => !failover.isFailureMode(r)), `after the failover: ${final.filter(failover.isFailureMode).map(failover.counterOf).join(', ')}`).to.equal(true);
    failover.tally(counted, final);
    failover.expectCountsCarriedOn(final, replicated, counted, during);

    // The acknowledged change is on the promoted replica: the writer and a node starting now read it.
    let fetched: number | undefined;
    while (fetched === undefined) {
      failover.hangGuard(crashedAt, 'a policy read after the failover');
      fetched = await policies.fetch('p1').then((r) => r.policy?.version, () => undefined);
      if (fetched === undefined) await failover.sleep(50);
    }
    expect(fetched, 'p1 on the writer').to.equal(2);
    reader = await RedisPolicyStore.open({ addr: group.addr, keyPrefix: prefix });
    expect(reader.get('p1')?.version, 'p1 on a new node').to.equal(2);
    // The writer that lived through the failover writes again, unaided.
    expect(await policies.commit(createChange(versionedPolicy('p2', 1)))).to.deep.include({ ok: true });
    expect((await reader.fetch('p2')).policy?.version).to.equal(1);
  });
});
