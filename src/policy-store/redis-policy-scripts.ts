import { randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { redactAddress } from '../redis/redis-connection.js';
import type { PolicyScriptName } from '../redis/lua-scripts.js';
import { defineProtocol, type Operations, type ProtocolDeclaration, type ReplyFields } from '../redis/script-protocol.js';
import { revivedPolicy } from '../policy/stored-policy.js';
import type { Policy } from '../policy/types.js';
import { seedAuditEntry, versionRecordOf, type ChangeKind, type CommitResult, type PolicyChange } from './policy-store.js';

/**
 * The Redis side of RedisPolicyStore: its keys, the lua/policy scripts' arguments and replies, and
 * its connections' start and end.
 */

export const KEY_NAMES = ['current', 'heads', 'changed', 'versions', 'audit', 'auditn', 'meta'] as const;
export type KeyName = (typeof KEY_NAMES)[number];

/** The command each script is defined as on the store's connection. */
export const SCRIPTS: Record<PolicyScriptName, string> = {
  commit: 'rlPolicyCommit',
  seed: 'rlPolicySeed',
  read_one: 'rlPolicyReadOne',
  snapshot: 'rlPolicySnapshot',
};

export interface RedisPolicyStoreOptions {
  /** RL_COUNTERSTORE_ADDR. */
  addr: string;
  /** Key prefix (RL_KEY_PREFIX); tests use a random one. */
  keyPrefix: string;
  /** Per-command timeout (default 2000 ms: policy management is not the hot path). */
  commandTimeoutMs?: number;
  /** How long `open` waits for Redis (default 10 s). */
  connectTimeoutMs?: number;
  /** Revision check interval, the safety net for lost change messages (default 5000 ms). */
  checkIntervalMs?: number;
  /** How long a revision gap may last before a reload, to let in-flight messages arrive (default 1000 ms). */
  gapGraceMs?: number;
  /** Subscribe to change messages (default true; tests turn it off to exercise the revision check). */
  subscribe?: boolean;
  /** What the store is called in a 503 when Redis cannot be reached (default `policy store (Redis)`), and what follows the cause. */
  unavailable?: { name: string; consequence: string };
  /**
   * How long a change waits for a replica to confirm it, ms (default 1500; capped below the command
   * timeout). Only when the primary has replicas (see the class comment).
   */
  replicaAckTimeoutMs?: number;
}

/** What a node holds of one policy. */
export interface Entry {
  policy: Policy | undefined;
  head: number;
  /** Store revision of this policy's last change. */
  changed: number;
}

export type Client = Redis | Cluster;
export type ScriptClient = Client & Record<string, (...args: (string | number)[]) => Promise<unknown>>;

/** lua/policy/commit.lua: one change, checked against the head the caller read. */
const COMMIT = defineProtocol({
  script: 'policy/commit',
  operations: { commit: ['policyId', 'expectedHead', 'mustExist', 'newHead', 'policy', 'versionRecord', 'audit', 'channel', 'change'] },
  operationArg: false,
  reply: { committed: 'flag', revision: 'number', head: 'number', exists: 'flag' },
});

/** lua/policy/read_one.lua: one policy id's state. */
const READ_ONE = defineProtocol({
  script: 'policy/read_one',
  operations: { read_one: ['policyId'] },
  operationArg: false,
  reply: { policy: 'id', head: 'number', changed: 'number', revision: 'number' },
});

/** lua/policy/seed.lua: the policy file's policies into an empty store; its channel, then five arguments per policy (seedArgs). */
const SEED = defineProtocol({
  script: 'policy/seed',
  operations: { seed: ['channel'] },
  operationArg: false,
  reply: { revision: 'number' },
});

/** lua/policy/snapshot.lua: every current policy, read atomically; no arguments, three hashes as field/value lists. */
const SNAPSHOT = defineProtocol({
  script: 'policy/snapshot',
  operations: { snapshot: [] },
  operationArg: false,
  reply: { revision: 'number', current: 'pairs', heads: 'pairs', changed: 'pairs' },
});

/** The protocol of every lua/policy script, which the loader checks its header against. */
export const POLICY_PROTOCOLS = { commit: COMMIT, read_one: READ_ONE, seed: SEED, snapshot: SNAPSHOT } satisfies Record<
  PolicyScriptName,
  ProtocolDeclaration<Operations, ReplyFields>
>;

/** commit.lua's arguments after its keys. */
export function commitArgs(change: PolicyChange, { newHead, channel, kind }: { newHead: number; channel: string; kind: ChangeKind }): string[] {
  const { policy } = change;
  return COMMIT.argv('commit', {
    policyId: change.policy_id,
    expectedHead: change.expectedHead,
    mustExist: change.mustExist,
    newHead,
    policy: policy ? JSON.stringify(policy) : '',
    versionRecord: policy ? JSON.stringify(versionRecordOf(policy)) : '',
    audit: JSON.stringify(change.audit),
    channel,
    change: kind,
  });
}

/** commit.lua's reply: committed at a new revision, or refused with the stored head when the expected one did not hold. */
export function commitReply(reply: unknown): CommitResult {
  const { committed, revision, head, exists } = COMMIT.parse(reply);
  return committed ? { ok: true, revision } : { ok: false, reason: 'conflict', head, exists };
}

/** seed.lua's reply: the revision it seeded at, 0 when the store had held policies. */
export function seededRevision(reply: unknown): number {
  return SEED.parse(reply).revision;
}

/** read_one.lua's arguments after its keys. */
export function readOneArgs(policyId: string): string[] {
  return READ_ONE.argv('read_one', { policyId });
}

/** seed.lua's arguments after its keys: the channel, then five per policy. */
export function seedArgs(channel: string, policies: readonly Policy[]): string[] {
  const args = SEED.argv('seed', { channel });
  for (const policy of policies) {
    args.push(
      policy.policy_id,
      String(policy.version),
      JSON.stringify(policy),
      JSON.stringify(versionRecordOf(policy)),
      JSON.stringify(seedAuditEntry(policy, randomUUID())),
    );
  }
  return args;
}

/** snapshot.lua's reply: the revision, then current, heads and changed as flat field/value lists. */
export function snapshotOf(reply: unknown): { revision: number; current: Map<string, string>; heads: Map<string, string>; changed: Map<string, string> } {
  return SNAPSHOT.parse(reply);
}

/** read_one.lua's reply: the policy ('' when absent), its head and its last change's revision. */
export function entryOf(reply: unknown): Entry {
  const { policy, head, changed } = READ_ONE.parse(reply);
  return { policy: policy ? revivedPolicy(JSON.parse(policy) as Policy) : undefined, head, changed };
}

export function waitReady(client: Client, timeoutMs: number, addr: string): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      client.off('ready', onReady);
      reject(new Error(`policy store: Redis at ${redactAddress(addr)} not reachable within ${timeoutMs} ms`));
    }, timeoutMs);
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    client.once('ready', onReady);
  });
}

export async function quit(client: Client): Promise<void> {
  try {
    await Promise.race([client.quit(), sleep(1000)]);
  } catch {
    // already closed
  }
  client.disconnect();
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
