import calculateSlot from 'cluster-key-slot';
import { CounterStoreUnavailableError } from '../errors.js';
import type { CounterResult, GroupOperation, GroupOutcome } from '../counters/counter-store.js';
import { parseAcquireReply, parseReply } from './redis-script-reply.js';
import type { ScriptName } from './lua-scripts.js';
import { bulkCount, bulkString, bulkStrings, bulkWord, EncodedArgs } from './resp.js';

/**
 * An all-or-nothing group (CounterStore.group) as lua/batch.lua reads one: the operations of one hash
 * slot go in one group entry (`group`, k, then each operation's header and its n ARGV), so a single
 * Redis decides the whole group in the one script call of its batch. On a Cluster each slot's
 * operations form a group of their own. The arguments go encoded (resp.ts): what repeats per spec is
 * encoded once.
 */

/** The parameters an operation of a spec sends after its `now`, operation and units (or slot id). */
export interface GroupArgs {
  argc: string;
  params: string[];
  /** `params` as bulk strings. */
  encodedParams: string;
  /** A consume's header, `now` and operation with the store's own clock ('' now), hard and soft: made on first use. */
  consumeHeads: [string | undefined, string | undefined];
}

export function groupArgs(argc: string, params: string[]): GroupArgs {
  return { argc, params, encodedParams: bulkStrings(params), consumeHeads: [undefined, undefined] };
}

/**
 * An operation's header in a group: its script's entry name, its ARGV count, the position of the
 * argument its check replaces and the value put there, and whether it is soft (its refusal does not
 * refuse the group).
 */
interface GroupOperationHeader {
  name: ScriptName;
  argc: string;
  checkPosition: string;
  checkValue: string;
  soft: boolean;
}

/** The header's fields in the order lua/batch.lua reads them, by the names its comment gives them (test/redis/lua-scripts.test.ts). */
export const GROUP_HEADER_FIELDS = { name: 'name', argc: 'n', checkPosition: 'p', checkValue: 'v', soft: 's' } as const satisfies Record<keyof GroupOperationHeader, string>;
const HEADER_ORDER = Object.keys(GROUP_HEADER_FIELDS) as (keyof GroupOperationHeader)[];

function encodeHeader(header: GroupOperationHeader): string {
  let out = '';
  for (const field of HEADER_ORDER) {
    const value = header[field];
    out += bulkWord(typeof value === 'boolean' ? (value ? '1' : '0') : value);
  }
  return out;
}

/** Arguments in a group operation's header. */
const HEADER_ARGS = HEADER_ORDER.length;
/** A rate script checks in its `check` mode, its operation (ARGV[2]). */
const RATE_CHECK_POSITION = '2';

/** One slot's share of a group: its operations' positions in the whole, keys and ARGV. */
export interface SlotGroup {
  name: ScriptName;
  positions: number[];
  /** Per operation of the share: an acquire (its reply says whether it took a new slot). */
  acquires: boolean[];
  keys: string[];
  argv: EncodedArgs;
  /** Where the operation count goes in `argv`, once every operation is in. */
  countAt: number;
}

/** The group split by hash slot (one share outside a Cluster), laid out for lua/batch.lua. */
export function slotGroups(operations: readonly GroupOperation[], now: string, argsOf: (o: GroupOperation) => GroupArgs, cluster: boolean): SlotGroup[] {
  if (!cluster) {
    const share = newShare(operations[0]);
    for (let i = 0; i < operations.length; i++) addOperation(share, i, operations[i], now, argsOf(operations[i]));
    return [finished(share)];
  }
  const bySlot = new Map<number, SlotGroup>();
  for (let i = 0; i < operations.length; i++) {
    const o = operations[i];
    const slot = calculateSlot(o.keys[0]);
    let share = bySlot.get(slot);
    if (share === undefined) bySlot.set(slot, (share = newShare(o)));
    addOperation(share, i, o, now, argsOf(o));
  }
  const shares = [...bySlot.values()];
  for (const share of shares) finished(share);
  return shares;
}

function scriptOf(o: GroupOperation): ScriptName {
  return o.op === 'consume' ? o.spec.type : 'concurrency_acquire';
}

/** A share named after its first operation, its header first (its count is known once every operation is in). */
function newShare(first: GroupOperation): SlotGroup {
  const argv = new EncodedArgs();
  argv.addWord('group');
  const countAt = argv.reserve();
  return { name: scriptOf(first), positions: [], acquires: [], keys: [], argv, countAt };
}

function finished(share: SlotGroup): SlotGroup {
  share.argv.fill(share.countAt, String(share.positions.length));
  return share;
}

function addOperation(share: SlotGroup, position: number, o: GroupOperation, now: string, args: GroupArgs): void {
  share.positions.push(position);
  share.acquires.push(o.op === 'acquire');
  for (const key of o.keys) share.keys.push(key);
  const { argv } = share;
  const soft = o.soft === true;
  if (o.op === 'consume') {
    // The header, `now` and `consume`, then the units.
    argv.addEncoded(consumeHead(o.spec.type, args, soft, now), HEADER_ARGS + 2);
    argv.addEncoded(bulkCount(o.cost), 1);
  } else {
    // concurrency_acquire checks with one argument more, its `check` flag.
    argv.addEncoded(encodeHeader({ name: 'concurrency_acquire', argc: args.argc, checkPosition: String(Number(args.argc) + 1), checkValue: 'check', soft }), HEADER_ARGS);
    argv.add(now);
    argv.add(o.slotId);
  }
  argv.addEncoded(args.encodedParams, args.params.length);
}

/** A consume's header, `now` and operation, encoded; kept in `args` for the store's own clock. */
function consumeHead(name: ScriptName, args: GroupArgs, soft: boolean, now: string): string {
  const made = () => encodeHeader({ name, argc: args.argc, checkPosition: RATE_CHECK_POSITION, checkValue: 'check', soft }) + bulkString(now) + bulkWord('consume');
  if (now !== '') return made();
  const k = soft ? 1 : 0;
  return (args.consumeHeads[k] ??= made());
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
