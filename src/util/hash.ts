/** FNV-1a, 32 bits: a fast, stable, well-spread hash for rollout buckets and sampling (not security). */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** A stable fraction in [0, 1) for a string. */
export function unitInterval(text: string): number {
  return fnv1a32(text) / 0x1_0000_0000;
}
