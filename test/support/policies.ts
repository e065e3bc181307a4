import { validatePolicy } from '../../src/policy/validate.js';
import type { Policy } from '../../src/policy/types.js';

/**
 * Builds a stored Policy from a raw definition through the real validator, so tests exercise the same
 * defaults and normalisation as the server. Throws with every field error if the definition is invalid.
 */
export function makePolicy(raw: Record<string, unknown>): Policy {
  const result = validatePolicy(raw);
  if (!result.ok) throw new Error(`test policy invalid: ${JSON.stringify(result.errors)}`);
  const now = new Date(0).toISOString();
  return { ...result.policy, version: 1, created_at: now, updated_at: now };
}
