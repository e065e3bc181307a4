import { createHash, timingSafeEqual } from 'node:crypto';

/** The SHA-256 digest a secret is kept and compared as: the secret itself is never stored. */
export function secretDigest(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

/**
 * Whether a presented secret matches a stored digest, in constant time: both sides are fixed-length
 * digests, so a secret of another length is a plain mismatch (never a throw) and the time taken does
 * not depend on what was sent.
 */
export function matchesSecret(presented: string, digest: Buffer): boolean {
  return timingSafeEqual(secretDigest(presented), digest);
}
