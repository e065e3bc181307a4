import type { RateOperation } from '../counter-store.js';
import type { MemoryKeyspace, SlotCarrier } from './keyspace.js';

/** What an algorithm runs: a reclaim reaches it as a give (parent-take-ledger.ts). */
export type AlgorithmOperation = Exclude<RateOperation, 'reclaim'>;

/** The window a count is kept in (count_in_window's parameters): its limit, its bounds and the units used in it. */
export interface CountedWindow {
  limit: number;
  start: number;
  end: number;
  used: number;
}

/**
 * One operation as an algorithm runs it: the counter's keys in the key space, what lua/includes/mode.lua
 * reads from ARGV (and "time" its `now`) and what it derives (a peek: a consume of 1, writing nothing; a
 * check: a consume of `units`, writing nothing). Each store keeps one and refills it per operation
 * (`set`), so a decision allocates nothing for its arguments; operations run one at a time (the
 * emulator is synchronous), and an algorithm reads it before it returns.
 */
export class AlgorithmCall {
  keys: SlotCarrier = [];
  op: AlgorithmOperation = 'consume';
  units = 0;
  now = 0;
  /** A give's window tag (give_tag). */
  tag = 0;
  peeking = false;
  refunding = false;
  taking = false;
  giving = false;
  cost = 0;
  refund = 0;
  /** windowOf's object, reused. */
  private readonly window: CountedWindow = { limit: 0, start: 0, end: 0, used: 0 };

  constructor(readonly space: MemoryKeyspace) {}

  /** This call's key: the counter's first. */
  get key(): string {
    return this.keys[0];
  }

  /** Refills the call for one operation; the port of `mode` in lua/includes/mode.lua. */
  set(keys: string[], op: AlgorithmOperation, units: number, now: number, tag: number): this {
    this.keys = keys;
    this.op = op;
    this.units = units;
    this.now = now;
    this.tag = tag;
    this.giving = op === 'give';
    this.refunding = this.giving || op === 'refund';
    this.peeking = op === 'peek' || op === 'check';
    this.taking = op === 'take';
    this.cost = op === 'peek' ? 1 : units;
    this.refund = this.refunding ? units : 0;
    return this;
  }

  /** The window this call counts in (window-count.ts), in an object of the call's own: valid until the next windowOf. */
  windowOf(limit: number, start: number, end: number, used: number): CountedWindow {
    const window = this.window;
    window.limit = limit;
    window.start = start;
    window.end = end;
    window.used = used;
    return window;
  }
}
