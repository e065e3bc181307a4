/**
 * One stable, well-mixed 32-bit hash for rollout buckets and sampling (not security): FNV-1a over the
 * UTF-8 bytes of the text, finished with the murmur3 avalanche so that every output bit depends on
 * every input bit (plain FNV-1a has weak low bits, and rollout takes the hash mod 100). Stable across
 * processes and releases: rollout membership and sampling decisions must not move between nodes.
 */
export function stableHash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    let cp = text.charCodeAt(i);
    // Encode as UTF-8 on the fly (no allocation); lone surrogates become U+FFFD like Buffer.from.
    if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < text.length) {
      const lo = text.charCodeAt(i + 1);
      if (lo >= 0xdc00 && lo <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        i++;
      } else cp = 0xfffd;
    } else if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
    if (cp < 0x80) h = fnv(h, cp);
    else if (cp < 0x800) {
      h = fnv(h, 0xc0 | (cp >> 6));
      h = fnv(h, 0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      h = fnv(h, 0xe0 | (cp >> 12));
      h = fnv(h, 0x80 | ((cp >> 6) & 0x3f));
      h = fnv(h, 0x80 | (cp & 0x3f));
    } else {
      h = fnv(h, 0xf0 | (cp >> 18));
      h = fnv(h, 0x80 | ((cp >> 12) & 0x3f));
      h = fnv(h, 0x80 | ((cp >> 6) & 0x3f));
      h = fnv(h, 0x80 | (cp & 0x3f));
    }
  }
  // murmur3 fmix32
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

function fnv(h: number, byte: number): number {
  return Math.imul(h ^ byte, 0x01000193);
}

/** A stable fraction in [0, 1) for a string. */
export function unitInterval(text: string): number {
  return stableHash32(text) / 0x1_0000_0000;
}
