/**
 * A sorted sequence of items kept in blocks of a few hundred: inserting or removing one moves at most a
 * block's elements (plus, rarely, the short list of blocks), where one flat array of 100,000 would move
 * half of it on every change. The Matcher keeps its global winner order in one (see WinnerOrder.insert).
 */
const BLOCK = 512;

export class RankOrder<T> {
  private blocks: T[][] = [];
  private count = 0;

  /** `sorted` is taken in its order, which every later insert and remove keeps. */
  constructor(sorted: readonly T[] = []) {
    for (let i = 0; i < sorted.length; i += BLOCK) this.blocks.push(sorted.slice(i, i + BLOCK));
    this.count = sorted.length;
  }

  get size(): number {
    return this.count;
  }

  /**
   * Inserts `item` before the first element it `precedes` (true for a suffix of the order: the order
   * is sorted by what `precedes` compares); returns its neighbours after the insert.
   */
  insert(item: T, precedes: (item: T, element: T) => boolean): { previous: T | undefined; next: T | undefined } {
    const blocks = this.blocks;
    this.count++;
    if (blocks.length === 0) {
      blocks.push([item]);
      return { previous: undefined, next: undefined };
    }
    // The last block whose first element comes before the item (or the first block).
    let lo = 0;
    let hi = blocks.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if (precedes(item, blocks[mid][0])) hi = mid - 1;
      else lo = mid;
    }
    const b = lo;
    const block = blocks[b];
    let at = 0;
    let end = block.length;
    while (at < end) {
      const mid = (at + end) >>> 1;
      if (precedes(item, block[mid])) end = mid;
      else at = mid + 1;
    }
    block.splice(at, 0, item);
    const previous = at > 0 ? block[at - 1] : b > 0 ? blocks[b - 1][blocks[b - 1].length - 1] : undefined;
    const next = at + 1 < block.length ? block[at + 1] : b + 1 < blocks.length ? blocks[b + 1][0] : undefined;
    if (block.length >= 2 * BLOCK) blocks.splice(b + 1, 0, block.splice(BLOCK));
    return { previous, next };
  }

  /**
   * Removes `item`, found by `key` (strictly increasing along the order). Returns false when it is not
   * there.
   */
  remove(item: T, key: (element: T) => number): boolean {
    const blocks = this.blocks;
    const k = key(item);
    let lo = 0;
    let hi = blocks.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if (key(blocks[mid][0]) > k) hi = mid - 1;
      else lo = mid;
    }
    const block = blocks[lo];
    if (block === undefined) return false;
    let at = 0;
    let end = block.length;
    while (at < end) {
      const mid = (at + end) >>> 1;
      if (key(block[mid]) < k) at = mid + 1;
      else end = mid;
    }
    if (block[at] !== item) return false;
    block.splice(at, 1);
    if (block.length === 0) blocks.splice(lo, 1);
    this.count--;
    return true;
  }

  /** Every element, in order, with its position. */
  forEach(visit: (element: T, index: number) => void): void {
    let i = 0;
    for (const block of this.blocks) for (const element of block) visit(element, i++);
  }

  toArray(): T[] {
    return this.blocks.flat();
  }
}
