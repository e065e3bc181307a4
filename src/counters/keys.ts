import { createHash } from 'node:crypto';
import type { CounterSpec } from './counter-spec.js';

/**
 * The only place counter keys are built.
 *
 * A counter is identified by its policy, its algorithm and the values of the policy's `*` scope
 * fields (its identity). Those parts come from users, so they are length-prefixed: `a:b`+`c` and
 * `a`+`b:c` encode differently. Every key of one counter shares the `{…}` hash tag, so a script's keys
 * always live in one Redis Cluster slot, and the tag's content can never contain `}` (escaped below),
 * so nothing a user sends can end the tag early and choose the slot.
 *
 * Short identities are encoded as they are (readable in `redis-cli`, and no hashing on the hot path);
 * long ones are digested so a key never grows with the size of the request.
 *
 * The algorithm is part of the key so that changing a policy's algorithm starts a fresh counter of
 * the right Redis type instead of failing with WRONGTYPE; its limit and window are not, so a live quota
 * change keeps the counter.
 */
export function counterKeys(
  prefix: string,
  policyId: string,
  spec: CounterSpec,
  identity: readonly string[],
): string[] {
  // join() yields one flat string: a template literal would leave a ConsString (an extra object, and a
  // flatten on first hashing) for the memory store to keep as its Map key for every live counter.
  const base = [prefix, '{', counterTag(policyId, identity), '}:', spec.type, calendarSuffix(spec)].join('');
  // The sliding log keeps its entries in a sorted set and its running sum beside it.
  return spec.type === 'sliding_window_log' ? [base, `${base}:sum`] : [base];
}

/**
 * Calendar periods (`algorithm.calendar`) keep their own counter beside the algorithm's: a window
 * aligned to the epoch and one aligned to a calendar are different counters (and the emulator keeps
 * them in different shapes), so changing one into the other starts afresh.
 */
function calendarSuffix(spec: CounterSpec): string {
  return (spec.type === 'fixed_window' || spec.type === 'quota') && spec.calendar !== undefined ? ':calendar' : '';
}

/**
 * A counter's take ledger (named takes and gives, lua/includes/lease.lua): beside its counter key, with the same
 * `{tag}`, so in the same Redis Cluster slot.
 */
export function takesKey(counterKey: string): string {
  return `${counterKey}:takes`;
}

/** A global counter's share ledger (each region's units of the window, lua/includes/shares.lua): beside it, as takesKey. */
export function sharesKey(counterKey: string): string {
  return `${counterKey}:shares`;
}

/** Longest tag kept readable; longer ones become a 128-bit digest (marked `#`, which encoding never yields first). */
const MAX_READABLE_TAG = 160;

export function counterTag(policyId: string, identity: readonly string[]): string {
  const encoded = lengthPrefixed([policyId, ...identity]);
  if (encoded.length <= MAX_READABLE_TAG) return escapeTag(encoded);
  return `#${shortDigest(encoded)}`;
}

/** A 128-bit digest of `text` in 22 base64url characters: a name that does not grow with what it names. */
export function shortDigest(text: string): string {
  return createHash('sha256').update(text).digest('base64url').slice(0, 22);
}

/** `%` → `%25` and `}` → `%7D`: reversible, so distinct encodings stay distinct, and `}`-free. */
function escapeTag(text: string): string {
  return /[%}]/.test(text) ? text.replace(/%/g, '%25').replace(/\}/g, '%7D') : text;
}

/** `<utf8 byte length>:<value>` for each part: an injective encoding of a list of strings. */
export function lengthPrefixed(parts: readonly string[]): string {
  let out = '';
  for (const part of parts) out += `${Buffer.byteLength(part)}:${part}`;
  return out;
}

/**
 * Finished counter keys per (compiled policy, identity), so a decision for a counter seen recently neither
 * encodes, escapes nor concatenates, and hands the store the same string object every time (V8 caches a
 * string's hash in the string, so the store's Map lookup skips hashing too).
 *
 * Bounded: two generations of at most `capacity` identities each. New identities go into the young
 * generation; when it is full it becomes the old one and the previous old one is dropped. An identity
 * found in the old generation moves back into the young one, so a hot counter survives every rotation.
 * Memory therefore never grows with the number of distinct identities: at a million distinct users the
 * cache holds at most 2 × capacity of them (and shares the key strings with the store while they live),
 * each at most MAX_READABLE_TAG characters long.
 *
 * `owner` is what the keys belong to (DecisionService passes the CompiledPolicy); the cache is only valid
 * for one prefix, and `clear()` drops everything (e.g. when a new policy snapshot replaces the owners).
 */
export class CounterKeyCache {
  private young = new Map<object, Map<string, string[]>>();
  private old = new Map<object, Map<string, string[]>>();
  private youngSize = 0;
  /** The owner of the last lookup and its young map (undefined: none yet), valid until the next rotation or clear. */
  private lastOwner: object | undefined;
  private lastYoung: Map<string, string[]> | undefined;

  constructor(
    private readonly prefix: string,
    readonly capacity = 32_768,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`key cache capacity must be a positive integer, got ${capacity}`);
  }

  /** `identity` as PolicyMatch carries it: [name, value, name, value, ...], names fixed by the policy. */
  keysOf(owner: object, policyId: string, spec: CounterSpec, identity: readonly string[]): string[] {
    const id = identityKey(identity);
    // Identities past the readable length are digested anyway; holding them would let a few huge
    // requests pin megabytes.
    if (id.length > MAX_READABLE_TAG) return counterKeys(this.prefix, policyId, spec, identity);
    // Consecutive decisions mostly match the same policy: its young map is remembered, one Map lookup less.
    const young = owner === this.lastOwner ? this.lastYoung : this.youngOf(owner);
    const hit = young?.get(id);
    if (hit !== undefined) return hit;
    const keys = this.old.get(owner)?.get(id) ?? counterKeys(this.prefix, policyId, spec, identity);
    this.remember(owner, young, id, keys);
    return keys;
  }

  /** Number of identities held, both generations (for tests). */
  get size(): number {
    let size = 0;
    for (const generation of [this.young, this.old]) for (const byId of generation.values()) size += byId.size;
    return size;
  }

  clear(): void {
    this.young = new Map();
    this.old = new Map();
    this.youngSize = 0;
    this.lastOwner = undefined;
    this.lastYoung = undefined;
  }

  private youngOf(owner: object): Map<string, string[]> | undefined {
    const young = this.young.get(owner);
    this.lastOwner = owner;
    this.lastYoung = young;
    return young;
  }

  private remember(owner: object, young: Map<string, string[]> | undefined, id: string, keys: string[]): void {
    if (this.youngSize >= this.capacity) {
      this.old = this.young;
      this.young = new Map();
      this.youngSize = 0;
      young = undefined;
    }
    if (young === undefined) this.young.set(owner, (young = new Map()));
    this.lastOwner = owner;
    this.lastYoung = young;
    young.set(id, keys);
    this.youngSize++;
  }
}

/**
 * The cache key of an identity under one policy. The names are the policy's own (the same for every
 * request), so only the values count: one value is its own key (no concatenation on the common
 * single-`*` policy); several are joined with every value but the last length-prefixed, which no two
 * different value lists share.
 */
function identityKey(identity: readonly string[]): string {
  if (identity.length === 2) return identity[1];
  let key = '';
  for (let i = 1; i < identity.length - 2; i += 2) key += `${identity[i].length}:${identity[i]}`;
  return identity.length > 0 ? key + identity[identity.length - 1] : key;
}
