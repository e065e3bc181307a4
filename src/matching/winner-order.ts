import type { CompiledPolicy } from './compiled-policy.js';
import type { Draft } from './compile.js';
import { RankOrder } from './rank-order.js';

/** The winner order (specificity, priority, policy_id) and the ranks that encode it. */

/** Every indexed policy, both families, in winner order: ranks strictly increase along it. */
export class WinnerOrder {
  private readonly order: RankOrder<CompiledPolicy>;

  /** Sorts `drafts` into winner order (in place) and ranks them, spread out evenly. */
  constructor(drafts: Draft[]) {
    inWinnerOrder(drafts);
    const gap = rankGap(drafts.length);
    drafts.forEach((d, i) => (d.compiled.rank = (i + 1) * gap));
    this.order = new RankOrder(drafts.map((d) => d.compiled));
  }

  /**
   * Gives `c` a rank between its neighbours in the winner order, spreading all out when there is no
   * room; true when it had to renumber every rank.
   */
  insert(c: CompiledPolicy): boolean {
    const { previous, next } = this.order.insert(c, precedes);
    const before = previous ? previous.rank : -1;
    const after = next ? next.rank : RANK_LIMIT;
    if (after - before >= 2) {
      // At an end, one gap away from the neighbour (more appends fit after it); inside, halfway.
      const gap = rankGap(this.order.size);
      if (next === undefined) c.rank = Math.min(before + gap, before + Math.floor((after - before) / 2));
      else if (previous === undefined) c.rank = Math.max(after - gap, before + Math.ceil((after - before) / 2));
      else c.rank = before + Math.floor((after - before) / 2);
      return false;
    }
    // No whole number left between them: after ~log2(gap) inserts into the same gap; O(n) plain stores.
    const gap = rankGap(this.order.size);
    this.order.forEach((p, i) => (p.rank = (i + 1) * gap));
    return true;
  }

  remove(c: CompiledPolicy): void {
    this.order.remove(c, rankOf);
  }

  get size(): number {
    return this.order.size;
  }
}

/**
 * Ranks are whole numbers in [0, RANK_LIMIT): small integers stay unboxed in V8 (a fractional or larger
 * rank would turn every policy's rank field into a boxed double and slow the scan down). A build
 * spreads them out evenly, so a policy added later fits between two neighbours; when no whole number is
 * left between them, all are spread out again (see WinnerOrder.insert).
 */
const RANK_LIMIT = 2 ** 30;

function rankGap(count: number): number {
  // Room for count ranks plus a gap before the first and after the last.
  return Math.max(1, Math.floor(RANK_LIMIT / (count + 2)));
}

/**
 * Sorts drafts into winner order in linear time for the usual input: policies come from a store's list,
 * sorted by policy_id, and take few distinct (specificity, priority) values, so grouping by those keeps
 * each group in policy_id order already (a group that is not is sorted). A comparison sort of every
 * draft would chase pointers to two policies per comparison, n log n times.
 */
function inWinnerOrder(drafts: Draft[]): void {
  const groups = new Map<number, Map<number, Draft[]>>(); // specificity → priority → drafts, input order
  for (const d of drafts) {
    let byPriority = groups.get(d.compiled.specificity);
    if (!byPriority) groups.set(d.compiled.specificity, (byPriority = new Map()));
    const group = byPriority.get(d.compiled.policy.priority);
    if (group) group.push(d);
    else byPriority.set(d.compiled.policy.priority, [d]);
  }
  const descending = (a: number, b: number) => b - a;
  let i = 0;
  for (const specificity of [...groups.keys()].sort(descending)) {
    const byPriority = groups.get(specificity)!;
    for (const priority of [...byPriority.keys()].sort(descending)) {
      const group = byPriority.get(priority)!;
      for (let k = 1; k < group.length; k++) {
        if (group[k - 1].compiled.policy.policy_id > group[k].compiled.policy.policy_id) {
          group.sort((a, b) => compareRank(a.compiled, b.compiled));
          break;
        }
      }
      for (const d of group) drafts[i++] = d;
    }
  }
}

/** Winner order: highest specificity, then highest priority, then smallest policy_id (plain compare). */
function compareRank(a: CompiledPolicy, b: CompiledPolicy): number {
  if (a.specificity !== b.specificity) return b.specificity - a.specificity;
  if (a.policy.priority !== b.policy.priority) return b.policy.priority > a.policy.priority ? 1 : -1;
  const x = a.policy.policy_id;
  const y = b.policy.policy_id;
  return x < y ? -1 : x > y ? 1 : 0;
}

/** Does `c` come before `other` in winner order (or tie with it: never, ids are unique)? */
function precedes(c: CompiledPolicy, other: CompiledPolicy): boolean {
  return compareRank(other, c) >= 0;
}

function rankOf(c: CompiledPolicy): number {
  return c.rank;
}
