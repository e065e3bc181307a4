import type { ParsedReply } from '../util/reply-fields.js';

/**
 * The counter scripts' reply fields, declared once, in reply order: src/redis/counter-script-protocols.ts
 * declares each script's protocol with them (its reply reader and header check), and the emulator's
 * algorithms (emulator/) answer with objects of these names and kinds, the types below, so a field renamed
 * or added in the declaration is one the emulator must answer too.
 */

/** Every rate script's decision, and the concurrency scripts' first four fields. */
export const DECISION_FIELDS = { allowed: 'flag', remaining: 'number', retryAfterMs: 'number', resetAfterMs: 'number' } as const;

/**
 * What an algorithm answers a take or a give with: the first fields of a lease operation's reply
 * (lua/includes/lease.lua's lease_reply adds the store's clock, the outcome, the units lapsed and the share report).
 */
export const ALGORITHM_LEASE_FIELDS = { ...DECISION_FIELDS, units: 'number', windowTag: 'number', windowLeftMs: 'number' } as const;

/** concurrency_acquire's reply: the decision, then whether it took a new slot. */
export const ACQUIRE_FIELDS = { ...DECISION_FIELDS, newSlot: 'flag' } as const;

export type DecisionAnswer = ParsedReply<typeof DECISION_FIELDS>;
export type AlgorithmLeaseAnswer = ParsedReply<typeof ALGORITHM_LEASE_FIELDS>;
export type AcquireAnswer = ParsedReply<typeof ACQUIRE_FIELDS>;
