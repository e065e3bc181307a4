import { expect } from 'chai';
import { prng } from '../../bench/lib/workload.js';
import { RankOrder } from '../../src/matching/rank-order.js';

/** Items ordered by `key`; unique keys, as the Matcher's ranks are. */
interface Item {
  key: number;
}

const precedes = (item: Item, other: Item) => item.key <= other.key;
const keyOf = (item: Item) => item.key;

describe('RankOrder', () => {
  it('keeps the order and answers the neighbours of each insert like a sorted array, across block splits and emptied blocks', () => {
    const random = prng(11);
    const initial = Array.from({ length: 1500 }, (_, i) => ({ key: i * 10 }));
    const order = new RankOrder(initial);
    const reference = [...initial];
    const used = new Set(initial.map(keyOf));
    for (let step = 0; step < 6000; step++) {
      // Grows for a while (blocks split), then shrinks hard (blocks empty), then both.
      const insert = step < 2000 ? random() < 0.9 : step < 4500 ? random() < 0.02 : random() < 0.5;
      if (insert || reference.length === 0) {
        let key: number;
        do key = Math.floor(random() * 100_000);
        while (used.has(key));
        used.add(key);
        const item = { key };
        const at = reference.findIndex((other) => precedes(item, other));
        const position = at < 0 ? reference.length : at;
        const { previous, next } = order.insert(item, precedes);
        reference.splice(position, 0, item);
        expect(previous).to.equal(reference[position - 1]);
        expect(next).to.equal(reference[position + 1]);
      } else {
        const at = Math.floor(random() * reference.length);
        const [item] = reference.splice(at, 1);
        used.delete(item.key);
        expect(order.remove(item, keyOf)).to.equal(true);
        expect(order.remove(item, keyOf)).to.equal(false);
      }
      expect(order.size).to.equal(reference.length);
    }
    const all = order.toArray();
    expect(all).to.deep.equal(reference);
    const visited: Item[] = [];
    order.forEach((item, i) => {
      expect(i).to.equal(visited.length);
      visited.push(item);
    });
    expect(visited).to.deep.equal(reference);
  });

  it('starts empty, and refuses to remove what it does not hold (same key, another object)', () => {
    const order = new RankOrder<Item>();
    expect(order.remove({ key: 1 }, keyOf)).to.equal(false);
    const one = { key: 1 };
    expect(order.insert(one, precedes)).to.deep.equal({ previous: undefined, next: undefined });
    expect(order.remove({ key: 1 }, keyOf)).to.equal(false);
    expect(order.remove(one, keyOf)).to.equal(true);
    expect(order.size).to.equal(0);
    expect(order.toArray()).to.deep.equal([]);
  });
});
