/**
 * The bounded heavy-hitter counter behind top tags and denied identities (Space-Saving), and the
 * one spelling and order of a `key=value` tag that both report.
 */

/** A tag as one string, length-prefixed so `a=b`+`c` and `a`+`b=c` stay distinct; orders ties in top_tags. */
export function tagItem(key: string, value: string): string {
  return `${key.length}:${key}=${value}`;
}

/** Code-unit order, the same on every machine (no locale). */
export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** One monitored tag of the Space-Saving counter. Its count is its bucket's. */
interface Entry {
  key: string;
  value: string;
  /** `tagItem(key, value)`: what ties in `top()` are ordered by. Built when the entry takes its slot. */
  item: string;
  /** Overestimation bound: the count the tag inherited when it took over an evicted slot. */
  error: number;
  bucket: Bucket;
  /** Neighbours in the bucket's list (oldest first): moving between buckets hashes nothing. */
  prev: Entry | undefined;
  next: Entry | undefined;
}

/** All entries with one count; buckets form a list in ascending count order (the Stream-Summary). */
interface Bucket {
  count: number;
  first: Entry | undefined;
  last: Entry | undefined;
  size: number;
  prev: Bucket | undefined;
  next: Bucket | undefined;
}

export interface HeavyHitter {
  key: string;
  value: string;
  item: string;
  count: number;
  error: number;
}

/**
 * Space-Saving heavy hitters among `key=value` tags, with at most `capacity` entries, on the
 * Stream-Summary structure (buckets of equal count in a linked list), so each offer is O(1): no scan for
 * the minimum. Guarantees for N offers: every reported count c satisfies true ≤ c ≤ true + error and
 * error ≤ min count ≤ N / capacity; any tag with true count > N / capacity is monitored.
 *
 * Per offer it builds nothing for a monitored tag: entries are found by key, then value (two Map lookups
 * under strings the request already holds, instead of hashing a `key=value` string built per tag), and
 * kept in intrusive per-bucket lists (moving one is pointer updates). When full, the victim is the oldest
 * entry of the minimum bucket.
 */
export class SpaceSaving {
  private readonly byKey = new Map<string, Map<string, Entry>>();
  private entries = 0;
  /** The bucket with the smallest count. */
  private head: Bucket | undefined;
  private n = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  }

  /** Counts one occurrence of the tag `key=value`. */
  offer(key: string, value: string): void {
    this.n++;
    const existing = this.byKey.get(key)?.get(value);
    if (existing) {
      this.increment(existing);
      return;
    }
    if (this.entries < this.capacity) {
      const first = this.head && this.head.count === 1 ? this.head : this.insertBucketBefore(this.head, 1);
      const entry: Entry = { key, value, item: tagItem(key, value), error: 0, bucket: first, prev: undefined, next: undefined };
      append(first, entry);
      this.index(entry);
      this.entries++;
      return;
    }
    // Full: the new tag replaces the oldest one with the minimum count and inherits that count as its error.
    const min = this.head!;
    const victim = min.first!;
    this.unindex(victim);
    victim.key = key;
    victim.value = value;
    victim.item = tagItem(key, value);
    victim.error = min.count;
    this.index(victim);
    this.increment(victim);
  }

  /** Tags seen (N). */
  get offered(): number {
    return this.n;
  }

  /** Entries held: never more than `capacity`. */
  get size(): number {
    return this.entries;
  }

  /** The guaranteed bound on any count's overestimation: the minimum count when full, else 0. */
  get maxError(): number {
    return this.entries < this.capacity ? 0 : (this.head?.count ?? 0);
  }

  /** The `limit` highest counts, count desc then item asc. */
  top(limit = Number.POSITIVE_INFINITY): HeavyHitter[] {
    const all: HeavyHitter[] = [];
    for (let bucket = this.head; bucket; bucket = bucket.next) {
      for (let e = bucket.first; e; e = e.next) all.push({ key: e.key, value: e.value, item: e.item, count: bucket.count, error: e.error });
    }
    all.sort((a, b) => b.count - a.count || compareStrings(a.item, b.item));
    return all.slice(0, limit);
  }

  /** The estimate for one tag, when monitored. */
  get(key: string, value: string): HeavyHitter | undefined {
    const e = this.byKey.get(key)?.get(value);
    return e && { key: e.key, value: e.value, item: e.item, count: e.bucket.count, error: e.error };
  }

  private index(entry: Entry): void {
    let values = this.byKey.get(entry.key);
    if (!values) {
      values = new Map();
      this.byKey.set(entry.key, values);
    }
    values.set(entry.value, entry);
  }

  private unindex(entry: Entry): void {
    const values = this.byKey.get(entry.key)!;
    values.delete(entry.value);
    if (values.size === 0) this.byKey.delete(entry.key);
  }

  private increment(entry: Entry): void {
    const from = entry.bucket;
    const count = from.count + 1;
    const next = from.next && from.next.count === count ? from.next : undefined;
    if (from.size === 1 && !next) {
      // Alone in its bucket and no bucket holds count + 1 yet: the bucket itself moves up a count and
      // the list stays in order. The common case for a heavy hitter, and it allocates nothing.
      from.count = count;
      return;
    }
    const target = next ?? this.insertBucketAfter(from, count);
    remove(from, entry);
    append(target, entry);
    if (from.size === 0) this.unlink(from);
  }

  private insertBucketAfter(prev: Bucket, count: number): Bucket {
    const bucket: Bucket = { count, first: undefined, last: undefined, size: 0, prev, next: prev.next };
    if (prev.next) prev.next.prev = bucket;
    prev.next = bucket;
    return bucket;
  }

  private insertBucketBefore(next: Bucket | undefined, count: number): Bucket {
    const bucket: Bucket = { count, first: undefined, last: undefined, size: 0, prev: undefined, next };
    if (next) next.prev = bucket;
    this.head = bucket;
    return bucket;
  }

  private unlink(bucket: Bucket): void {
    if (bucket.prev) bucket.prev.next = bucket.next;
    else this.head = bucket.next;
    if (bucket.next) bucket.next.prev = bucket.prev;
  }
}

/** Adds `entry` as the newest of `bucket`'s entries. */
function append(bucket: Bucket, entry: Entry): void {
  entry.bucket = bucket;
  entry.prev = bucket.last;
  entry.next = undefined;
  if (bucket.last) bucket.last.next = entry;
  else bucket.first = entry;
  bucket.last = entry;
  bucket.size++;
}

/** Takes `entry` out of `bucket`'s entries. */
function remove(bucket: Bucket, entry: Entry): void {
  if (entry.prev) entry.prev.next = entry.next;
  else bucket.first = entry.next;
  if (entry.next) entry.next.prev = entry.prev;
  else bucket.last = entry.prev;
  bucket.size--;
}
