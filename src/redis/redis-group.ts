import calculateSlot from 'cluster-key-slot';
import { CounterStoreUnavailableError } from '../errors.js';
import type { CounterResult, GroupOperation, GroupOutcome } from '../counters/counter-store.js';
import { parseAcquireReply, parseReply } from './redis-script-reply.js';
import type { ScriptName } from './lua-scripts.js';

/**
 * An all-or-nothing group (CounterStore.group) as lua/batch.lua reads one: the operations of one hash
 * slot go in one group entry (`group`, k, then each operation's header `name, n, p, v, s` and its n
 * ARGV), so a single Redis decides the whole group in the one script call of its batch. On a Cluster
 * each slot's operations form a group of their own.
 */

/** The parameters an operation of `spec` sends after its `now`, operation and units (or lease id). */
export interface GroupArgs {
  argc: string;
  params: string[];
}

/** One slot's share of a group: its operations' positions in the whole, keys and ARGV. */
export interface SlotGroup {
  name: ScriptName;
  positions: number[];
  /** Per operation of the share: an acquire (its reply says whether it took a new slot). */
  acquires: boolean[];
  keys: string[];
  argv: string[];
}

/** The group split by hash slot (one share outside a Cluster), laid out for lua/batch.lua. */
export function slotGroups(operations: readonly GroupOperation[], now: string, argsOf: (o: GroupOperation) => GroupArgs, cluster: boolean): SlotGroup[] {
  const bySlot = new Map<number, SlotGroup>();
  for (let i = 0; i < operations.length; i++) {
    const o = operations[i];
    const slot = cluster ? calculateSlot(o.keys[0]) : 0;
    let share = bySlot.get(slot);
    const name: ScriptName = o.op === 'consume' ? o.spec.type : 'concurrency_acquire';
    if (share === undefined) {
      // The group's header first; its count is known once every operation is in.
      share = { name, positions: [], acquires: [], keys: [], argv: ['group', ''] };
      bySlot.set(slot, share);
    }
    share.positions.push(i);
    share.acquires.push(o.op === 'acquire');
    for (const key of o.keys) share.keys.push(key);
    const { argc, params } = argsOf(o);
    const soft = o.soft === true ? '1' : '0';
    // A rate script checks in its `check` mode (ARGV[2]); concurrency_acquire with one argument more.
    if (o.op === 'consume') share.argv.push(name, argc, '2', 'check', soft, now, 'consume', String(o.cost));
    else share.argv.push(name, argc, String(Number(argc) + 1), 'check', soft, now, o.slotId);
    for (const param of params) share.argv.push(param);
  }
  const shares = [...bySlot.values()];
  for (const share of shares) share.argv[1] = String(share.positions.length);
  return shares;
}

/** A group entry's reply: one script reply or error message per operation (`acquires`: which are acquires). */
export function parseGroupReply(reply: unknown, acquires: readonly boolean[]): (CounterResult | Error)[] {
  if (!Array.isArray(reply)) throw new Error(`unexpected group reply ${JSON.stringify(reply)}`);
  return reply.map((entry: unknown, k) => {
    if (typeof entry === 'string') return new CounterStoreUnavailableError(`counter store unavailable (redis_error): ${entry}`);
    return acquires[k] ? parseAcquireReply(entry) : parseReply(entry);
  });
}

/** Puts one slot's answer (or failure) into the whole group's outcome, as that slot's group ran. */
export function settleShare(outcome: GroupOutcome, share: SlotGroup, answer: (CounterResult | Error)[] | Error, soft: readonly boolean[]): void {
  if (answer instanceof Error) {
    for (const i of share.positions) {
      outcome.results[i] = answer;
      outcome.committed[i] = false;
    }
    return;
  }
  // A failed operation refuses nothing here (lua/batch.lua): its layer answers by its failure mode.
  const admitted = share.positions.every((i, k) => soft[i] || isAdmitted(answer[k]) || answer[k] instanceof Error);
  share.positions.forEach((i, k) => {
    outcome.results[i] = answer[k];
    outcome.committed[i] = admitted && isAdmitted(answer[k]);
  });
}

function isAdmitted(result: CounterResult | Error | undefined): boolean {
  return result !== undefined && !(result instanceof Error) && result.allowed;
}
