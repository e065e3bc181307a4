import { createRedisClient } from '../redis/redis-connection.js';
import { defineScripts, readPolicyScripts } from '../redis/lua-scripts.js';
import { RlError } from '../errors.js';
import { ReplicaAck } from './redis-policy-replicas.js';
import { log } from '../util/log.js';
import {
  byPolicyId,
  resortOne,
  ChangeListeners,
  type AuditEntry,
  type ChangeKind,
  type ChangeListener,
  type CommitResult,
  type PolicyChange,
  type PolicyChangeEvent,
  type PolicyHead,
  type PolicyStore,
  type PolicyVersion,
} from './policy-store.js';
import { revivedPolicy, StringPool } from '../policy/stored-policy.js';
import type { Policy } from '../policy/types.js';
import {
  KEY_NAMES,
  POLICY_PROTOCOLS,
  SCRIPTS,
  commitArgs,
  commitReply,
  entryOf,
  quit,
  readOneArgs,
  seedArgs,
  seededRevision,
  sleep,
  snapshotOf,
  waitReady,
  type Client,
  type Entry,
  type KeyName,
  type RedisPolicyStoreOptions,
  type ScriptClient,
} from './redis-policy-scripts.js';

/**
 * Multi-node policy storage in Redis (RL_COUNTERSTORE_ADDR set).
 *
 * Layout: seven hashes sharing the hash tag `{policies}` (so every script runs on one Cluster slot):
 *
 *     <prefix>{policies}:current   policy_id -> policy JSON (absent = never existed or deleted)
 *     <prefix>{policies}:heads     policy_id -> highest version ever written (survives delete)
 *     <prefix>{policies}:changed   policy_id -> store revision of the policy's last change
 *     <prefix>{policies}:versions  "<policy_id>|<version>" -> version record JSON
 *     <prefix>{policies}:audit     "<policy_id>|<n>" -> audit entry JSON (n = 1, 2, ...)
 *     <prefix>{policies}:auditn    policy_id -> number of audit entries
 *     <prefix>{policies}:meta      revision -> store revision (+1 per change)
 *
 * (`|` cannot occur in a policy_id.) Every change is ONE Lua script (`lua/policy/commit.lua`) that checks
 * the expected head, writes current + version + audit, bumps the revision and PUBLISHes
 * `{"policy_id","change","version","revision"}` on `<prefix>{policies}:changes`.
 *
 * Every node keeps the current policies in memory. It follows other nodes' changes through a separate
 * subscriber connection: a message whose revision is the next one is applied by re-reading that one
 * policy; a gap in revisions (a lost message, a reconnect) triggers a full reload. A periodic revision
 * check (default every 5 s) is the safety net for messages that never arrive. A policy's entry is
 * only ever replaced by a state with a newer last-change revision, so local commits, messages and
 * reloads can interleave in any order without going back in time.
 *
 * Durability. Redis replicates asynchronously, so a change the primary has applied can vanish in a
 * failover. When the primary has a replica (Cluster: CLUSTER NODES on the primary of the policy slot
 * lists one not failed; otherwise: INFO replication counts one connected), a change is acknowledged
 * only once a replica has it: the script and `WAIT 1 <replicaAckTimeoutMs>` go out together on the same
 * connection. When no replica confirms in time, commit() fails with `unavailable` (503) although the
 * primary has the change, which then reaches the other nodes as usual unless the primary fails first.
 */

/** Per-command timeout: policy management is not the hot path. */
const DEFAULT_COMMAND_TIMEOUT_MS = 2000;
export type { RedisPolicyStoreOptions } from './redis-policy-scripts.js';

interface ChangeMessage {
  policy_id: string;
  change: string;
  version: number;
  revision: number;
}

export { clusterReplicaCount } from './redis-policy-replicas.js';

export class RedisPolicyStore implements PolicyStore {
  private readonly entries = new Map<string, Entry>();
  private sorted: Policy[] | undefined;
  /** Every change up to this store revision is reflected in `entries`. */
  private applied = 0;
  private sync: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly listeners = new ChangeListeners();
  private readonly keys: string[];
  private readonly channel: string;
  private lastErrorLog = 0;
  private readonly checkIntervalMs: number;
  private readonly gapGraceMs: number;
  private readonly replicas: ReplicaAck;
  private readonly scripts = readPolicyScripts(KEY_NAMES.length, undefined, POLICY_PROTOCOLS);
  private readonly unavailable: { name: string; consequence: string };

  private constructor(
    private readonly client: ScriptClient,
    private readonly subscriber: Client | undefined,
    options: RedisPolicyStoreOptions,
  ) {
    const base = `${options.keyPrefix}{policies}`;
    this.keys = KEY_NAMES.map((name) => `${base}:${name}`);
    this.channel = `${base}:changes`;
    this.checkIntervalMs = options.checkIntervalMs ?? 5000;
    this.gapGraceMs = options.gapGraceMs ?? 1000;
    this.unavailable = options.unavailable ?? { name: 'policy store (Redis)', consequence: '' };
    // WAIT must return before the command timeout gives up on it.
    const commandTimeout = options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
    const ackTimeoutMs = Math.max(1, Math.min(options.replicaAckTimeoutMs ?? 1500, Math.floor(commandTimeout * 0.75)));
    this.replicas = new ReplicaAck(client, this.keys[KEY_NAMES.indexOf('meta')], ackTimeoutMs);
  }

  /** Connects (command and subscriber connections), loads every policy, starts following changes. */
  static async open(options: RedisPolicyStoreOptions): Promise<RedisPolicyStore> {
    const timeout = options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
    const connectTimeout = options.connectTimeoutMs ?? 10_000;
    const make = (name: string) =>
      createRedisClient(options.addr, {
        commandTimeoutMs: timeout,
        connectTimeoutMs: Math.min(connectTimeout, 2000),
        enableAutoPipelining: false,
        connectionName: name,
      });
    const client = make('rl-policy-store') as ScriptClient;
    const subscriber = options.subscribe === false ? undefined : make('rl-policy-subscriber');
    const store = new RedisPolicyStore(client, subscriber, options);
    client.on('error', (error: Error) => store.logError('policy store connection error', error));
    subscriber?.on('error', (error: Error) => store.logError('policy store subscriber error', error));
    defineScripts(client, store.scripts, SCRIPTS);
    try {
      await Promise.all([waitReady(client, connectTimeout, options.addr), subscriber && waitReady(subscriber, connectTimeout, options.addr)]);
      if (subscriber) {
        subscriber.on('message', (channel: string, message: string) => {
          if (channel === store.channel) store.enqueue(() => store.onMessage(message));
        });
        await subscriber.subscribe(store.channel);
        // After a reconnect messages may have been missed while it was down: check the revision.
        subscriber.on('ready', () => store.enqueue(() => store.checkRevision(false)));
      }
      // The first load must succeed: a node that started with no policies would admit everything.
      const loaded = store.sync.then(() => store.reload());
      store.sync = loaded.catch(() => undefined);
      await loaded;
    } catch (error) {
      client.disconnect();
      subscriber?.disconnect();
      throw error;
    }
    store.timer = setInterval(() => void store.checkRevision(true), store.checkIntervalMs);
    store.timer.unref();
    return store;
  }

  list(): Policy[] {
    if (!this.sorted) {
      const all: Policy[] = [];
      for (const entry of this.entries.values()) if (entry.policy) all.push(entry.policy);
      this.sorted = all.sort(byPolicyId);
    }
    return [...this.sorted];
  }

  get(policyId: string): Policy | undefined {
    return this.entries.get(policyId)?.policy;
  }

  revision(): number {
    return this.applied;
  }

  onChange(listener: ChangeListener): () => void {
    return this.listeners.add(listener);
  }

  async fetch(policyId: string): Promise<PolicyHead> {
    const entry = await this.readOne(policyId);
    this.applyEntry(policyId, entry, false);
    return { policy: entry.policy, head: entry.head };
  }

  versions(policyId: string): Promise<PolicyVersion[]> {
    return this.readNumbered<PolicyVersion>(policyId, 'heads', 'versions');
  }

  audit(policyId: string): Promise<AuditEntry[]> {
    return this.readNumbered<AuditEntry>(policyId, 'auditn', 'audit');
  }

  /** Entries `policyId|1` … `policyId|n` of hash `valuesHash`, where `countHash` holds n for the policy. */
  private async readNumbered<T>(policyId: string, countHash: KeyName, valuesHash: KeyName): Promise<T[]> {
    const count = Number(await this.call(() => this.client.hget(this.key(countHash), policyId)) ?? 0);
    if (!(count > 0)) return [];
    const fields = Array.from({ length: count }, (_, i) => `${policyId}|${i + 1}`);
    const values = await this.call(() => this.client.hmget(this.key(valuesHash), ...fields));
    return values.filter((v): v is string => typeof v === 'string').map((v) => JSON.parse(v) as T);
  }

  async commit(change: PolicyChange): Promise<CommitResult> {
    if (this.closed) throw new RlError('unavailable', 'policy store is closed');
    const existed = change.mustExist;
    const kind: ChangeKind = change.policy ? (existed ? 'updated' : 'created') : 'deleted';
    const newHead = change.policy ? change.policy.version : change.expectedHead;
    const args = commitArgs(change, { newHead, channel: this.channel, kind });
    const replicated = await this.call(() => this.replicas.present());
    const reply = (await this.call(() =>
      replicated ? this.replicas.commit(this.scripts.commit, [...this.keys, ...args]) : this.client[SCRIPTS.commit](...this.keys, ...args),
    ));
    const committed = commitReply(reply);
    if (!committed.ok) return committed;
    const { revision } = committed;
    this.applyEntry(change.policy_id, { policy: change.policy ?? undefined, head: newHead, changed: revision }, true);
    if (revision === this.applied + 1) this.applied = revision;
    return { ok: true, revision };
  }

  async seedIfEmpty(load: () => Policy[] | Promise<Policy[]>): Promise<boolean> {
    const count = Number(await this.call(() => this.client.hlen(this.key('heads'))));
    if (count > 0) return false;
    const policies = await load();
    if (policies.length === 0) return false;
    const args = seedArgs(this.channel, policies);
    const revision = seededRevision(await this.call(() => this.client[SCRIPTS.seed](...this.keys, ...args)));
    this.enqueue(() => this.reload());
    await this.sync;
    return revision > 0;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.sync.catch(() => undefined);
    await Promise.all([quit(this.client), this.subscriber && quit(this.subscriber)]);
  }

  // -------------------------------------------------------------------------------------------------
  // Following other nodes

  /** Runs sync work one task at a time (messages, reloads, revision checks). */
  private enqueue(task: () => Promise<void>): void {
    this.sync = this.sync.then(task).catch((error: unknown) => this.logError('policy store sync failed', error));
  }

  private async onMessage(text: string): Promise<void> {
    if (this.closed) return;
    let message: ChangeMessage;
    try {
      message = JSON.parse(text) as ChangeMessage;
    } catch {
      return this.reload();
    }
    const revision = Number(message.revision);
    if (!Number.isSafeInteger(revision) || typeof message.policy_id !== 'string') return this.reload();
    if (revision <= this.applied) return;
    if (revision > this.applied + 1 || message.policy_id === '') return this.reload();
    const known = this.entries.get(message.policy_id);
    if (!known || known.changed < revision) {
      this.applyEntry(message.policy_id, await this.readOne(message.policy_id), false);
    }
    if (revision > this.applied) this.applied = revision;
  }

  /**
   * The safety net: compares the store revision with ours. A gap may just be messages in flight, so
   * on the timer it waits `gapGraceMs` and reloads only if the gap is still there.
   */
  private async checkRevision(fromTimer: boolean): Promise<void> {
    if (this.closed) return;
    let stored: number;
    try {
      stored = Number((await this.client.hget(this.key('meta'), 'revision')) ?? 0);
    } catch (error) {
      this.logError('policy store revision check failed', error);
      return;
    }
    if (stored === this.applied) return;
    if (fromTimer && stored > this.applied) {
      await sleep(this.gapGraceMs);
      if (this.closed || this.applied >= stored) return;
      this.enqueue(() => this.reload());
      return;
    }
    if (fromTimer) this.enqueue(() => this.reload());
    else await this.reload();
  }

  /** Reads every policy atomically and applies whatever is newer than what we hold. */
  private async reload(): Promise<void> {
    if (this.closed) return;
    const { revision, current, heads, changed } = snapshotOf(await this.call(() => this.client[SCRIPTS.snapshot](...this.keys)));
    if (revision === 0 && this.applied > 0) {
      this.logError('policy store in Redis is empty although it held policies (data lost?); keeping the last known policies', undefined);
      return;
    }
    const replaceAll = revision < this.applied;
    if (replaceAll) {
      log.warn('policy store revision in Redis went backwards; replacing every local policy', { local: this.applied, redis: revision });
    }
    let any = false;
    const strings = new StringPool();
    if (replaceAll) {
      for (const id of [...this.entries.keys()]) {
        if (!heads.has(id)) {
          this.entries.delete(id);
          any = true;
        }
      }
    }
    for (const [id, headText] of heads) {
      const entry: Entry = {
        policy: current.has(id) ? revivedPolicy(JSON.parse(current.get(id)!) as Policy, strings) : undefined,
        head: Number(headText),
        changed: Number(changed.get(id) ?? 0),
      };
      if (this.setEntry(id, entry, replaceAll)) any = true;
    }
    if (replaceAll || revision > this.applied) this.applied = revision;
    if (any) {
      this.sorted = undefined;
      this.emit({ policy_id: '', change: 'reloaded', version: 0, revision: this.applied, local: false });
    }
  }

  private async readOne(policyId: string): Promise<Entry> {
    return entryOf(await this.call(() => this.client[SCRIPTS.read_one](...this.keys, ...readOneArgs(policyId))));
  }

  /** Applies a policy's state if it is newer than ours and tells listeners. */
  private applyEntry(policyId: string, entry: Entry, local: boolean): void {
    const before = this.entries.get(policyId);
    if (!this.setEntry(policyId, entry, false)) return;
    if (this.sorted) resortOne(this.sorted, policyId, entry.policy);
    const change: ChangeKind = entry.policy ? (before?.policy ? 'updated' : 'created') : 'deleted';
    this.emit({
      policy_id: policyId,
      change,
      version: entry.policy?.version ?? 0,
      revision: Math.max(this.applied, entry.changed),
      local,
    });
  }

  /** Stores `entry` when it is newer than what we hold (or when forced); returns whether it did. */
  private setEntry(policyId: string, entry: Entry, force: boolean): boolean {
    const before = this.entries.get(policyId);
    if (!force && before && before.changed >= entry.changed) return false;
    if (force && before && before.changed === entry.changed && before.head === entry.head) return false;
    this.entries.set(policyId, entry);
    return true;
  }

  private emit(event: PolicyChangeEvent): void {
    this.listeners.emit(event, (error) => this.logError('policy change listener failed', error));
  }

  // -------------------------------------------------------------------------------------------------

  private key(name: KeyName): string {
    return this.keys[KEY_NAMES.indexOf(name)];
  }

  /** Runs one Redis call; a connection problem becomes a 503 RlError. */
  private async call<T>(fn: () => Promise<T>): Promise<T> {
    if (this.closed && this.client.status === 'end') throw new RlError('unavailable', 'policy store is closed');
    try {
      return await fn();
    } catch (error) {
      if (error instanceof RlError) throw error;
      throw new RlError('unavailable', `${this.unavailable.name} unavailable: ${(error as Error).message}${this.unavailable.consequence}`);
    }
  }

  private logError(message: string, error: unknown): void {
    const now = Date.now();
    if (now - this.lastErrorLog < 10_000) return;
    this.lastErrorLog = now;
    log.error(message, error === undefined ? undefined : { error: String((error as Error)?.message ?? error) });
  }
}
