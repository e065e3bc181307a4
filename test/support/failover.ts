/**
 * What the Redis failover suites (Cluster, Sentinel) share: the load (one decision per user and policy,
 * all at once, under a fail_open and a fail_closed policy), the reading of its answers, and a hang guard
 * for polls. No assertion times a failover (the machine is shared and noisy): recovery is proven by what
 * happened, and how long it took is only printed.
 */
import { expect } from 'chai';
import type { DecisionService } from '../../src/decision/decision-service.js';
import type { Decision } from '../../src/model/decision.js';
import { parseRequestContext } from '../../src/model/request-context.js';
import type { Policy } from '../../src/policy/types.js';
import { makePolicy } from './policies.js';
import { command } from './redis.js';

/** Far above what a test counts: every decision that reaches Redis is within the limit. */
export const FAILOVER_LIMIT = 1_000_000;
/** A hang guard on the polls that wait for a failover, no claim about speed. */
export const HANG_GUARD_MS = 30_000;

/** Policies `open` (fail_open) and `closed` (fail_closed), one counter per user each. */
export function failoverPolicies(): Policy[] {
  return (['open', 'closed'] as const).map((id) =>
    makePolicy({
      policy_id: id,
      scope: { service: id, user_id: '*' },
      failure_mode: id === 'open' ? 'fail_open' : 'fail_closed',
      algorithm: { type: 'fixed_window', limit: FAILOVER_LIMIT, window: '1h' },
    }),
  );
}

export interface RoundResult {
  user: string;
  policy: 'open' | 'closed';
  decision: Decision;
}

/** One decision per user and policy, all at once: the load. A decision that throws fails the test. */
export async function decisionRound(service: DecisionService, users: readonly string[]): Promise<RoundResult[]> {
  const calls = users.flatMap((user) => (['open', 'closed'] as const).map((policy) => ({ user, policy })));
  const settled = await Promise.allSettled(calls.map(({ user, policy }) => service.check(parseRequestContext({ service: policy, user_id: user }))));
  return settled.map((s, i) => {
    if (s.status === 'rejected') throw new Error(`decision for ${calls[i].policy}/${calls[i].user} threw: ${String(s.reason)}`);
    return { ...calls[i], decision: s.value };
  });
}

export const counterOf = (r: { policy: string; user: string }) => `${r.policy}/${r.user}`;

export const isFailureMode = (r: RoundResult) => r.decision.reason === 'counter_store_unavailable';

/** A failure-mode answer is the policy's (fail_open allows, fail_closed denies); any other is a normal count. */
export function expectAnswered(r: RoundResult): void {
  const label = `${counterOf(r)}: ${JSON.stringify(r.decision)}`;
  if (isFailureMode(r)) expect(r.decision.allowed, label).to.equal(r.policy === 'open');
  else expect(r.decision, label).to.deep.include({ allowed: true, reason: 'within_limit' });
}

/** Counted decisions per counter (failure-mode answers are not counted). */
export function tally(counted: Map<string, number>, results: readonly RoundResult[]): void {
  for (const r of results) if (!isFailureMode(r)) counted.set(counterOf(r), (counted.get(counterOf(r)) ?? 0) + 1);
}

/** Failure-mode answers for `key` over the rounds. */
export function countFailureMode(rounds: readonly (readonly RoundResult[])[], key: string): number {
  let n = 0;
  for (const results of rounds) for (const r of results) if (counterOf(r) === key && isFailureMode(r)) n++;
  return n;
}

/**
 * After the failover every counter carries on from what the replica held: nothing replicated is lost,
 * nothing is counted twice. `final` is one more round, `counted` includes it.
 */
export function expectCountsCarriedOn(
  final: readonly RoundResult[],
  replicated: ReadonlyMap<string, number>,
  counted: ReadonlyMap<string, number>,
  during: readonly (readonly RoundResult[])[],
): void {
  for (const r of final) {
    const key = counterOf(r);
    const used = FAILOVER_LIMIT - r.decision.remaining!;
    expect(used, `${key} kept its replicated count`).to.be.at.least((replicated.get(key) ?? 0) + 1);
    expect(used, `${key} counted no more than it was asked`).to.be.at.most((counted.get(key) ?? 0) + countFailureMode(during, key));
  }
}

/** Fails the test once HANG_GUARD_MS have passed since `since` (a hang, not a slow failover). */
export function hangGuard(since: number, awaited: string): void {
  if (performance.now() - since > HANG_GUARD_MS) {
    throw new Error(`hang guard: still no ${awaited} ${HANG_GUARD_MS / 1000} s after the crash`);
  }
}

/** ROLE of the node on `port` ('master' or 'slave'). */
export async function roleOf(port: number, host = '127.0.0.1'): Promise<string> {
  return String(((await command(host, port, ['ROLE'])) as unknown[])[0]);
}

/**
 * Waits until every replica of the master on `port` has received everything the master has written
 * (bounded by the hang guard only: a starved replica on a loaded machine is slow, not broken).
 */
export async function waitForReplicaInSync(port: number): Promise<void> {
  const since = performance.now();
  for (;;) {
    const info = String(await command('127.0.0.1', port, ['INFO', 'replication']));
    const masterOffset = /master_repl_offset:(\d+)/.exec(info)?.[1];
    const replicaOffset = /slave0:.*offset=(\d+)/.exec(info)?.[1];
    if (masterOffset !== undefined && masterOffset === replicaOffset) return;
    if (performance.now() - since > HANG_GUARD_MS) {
      throw new Error(`hang guard: the replica of ${port} did not catch up in ${HANG_GUARD_MS / 1000} s (offsets ${masterOffset} / ${replicaOffset})`);
    }
    await sleep(20);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
