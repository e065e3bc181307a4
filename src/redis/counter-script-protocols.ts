import { ACQUIRE_FIELDS, ALGORITHM_LEASE_FIELDS, DECISION_FIELDS } from '../counters/counter-replies.js';
import type { CounterSpec } from '../counters/counter-spec.js';
import type { ScriptName } from './script-names.js';
import { defineProtocol, type Operations, type ProtocolDeclaration, type ReplyFields } from './script-protocol.js';

/**
 * The counter scripts' protocols (lua/<algorithm>.lua and the concurrency scripts), declared once
 * (script-protocol.ts): each script's arguments after ARGV[1] (`now`, the caller's) and its reply's
 * fields. The scripts' headers list the same names in the same order (test/redis/counter-script-protocols.test.ts
 * checks them), and the reply reader (redis-script-reply.ts) takes its field positions from here.
 *
 * A rate script's arguments: `operation` (include "mode": consume, peek, check, refund, take, give,
 * reclaim) and its `units`, then the algorithm's parameters (the CounterSpec's fields of the same names,
 * `specParams`). The last ones
 * are sent only when they apply (declared `optionalArgs`): a calendar spec's period pair (`periodStart`,
 * `nextStart`, `nextEnd`), a sliding log's region share (`region`, `guarantee`, `common`); a lease operation's own arguments
 * (include "lease") and a region's share before them (include "shares") follow the parameters.
 */

/** Every rate script's reply, and the concurrency scripts' first four fields (declared with the emulator's answers). */
const DECISION = DECISION_FIELDS;

/** A calendar spec's period pair, after a window's parameters (fixed_window, quota; include "calendar"): sent only for a calendar spec. */
const CALENDAR = ['periodStart', 'nextStart', 'nextEnd'] as const;
/** A region's share of a global budget, after a sliding log's parameters (include "shares_log"): sent only with one. */
const LOG_SHARE = ['region', 'guarantee', 'common'] as const;
/** A bucket's parameters (token_bucket, leaky_bucket). */
const BUCKET = ['operation', 'units', 'capacity', 'rateUnits', 'ratePeriodMs'] as const;

export const FIXED_WINDOW = defineProtocol({
  script: 'fixed_window',
  operationArg: false,
  operations: { counter: ['operation', 'units', 'limit', 'windowMs', ...CALENDAR] },
  optionalArgs: CALENDAR,
  reply: DECISION,
});

export const QUOTA = defineProtocol({
  script: 'quota',
  operationArg: false,
  operations: { counter: ['operation', 'units', 'limit', 'periodMs', ...CALENDAR] },
  optionalArgs: CALENDAR,
  reply: DECISION,
});

export const SLIDING_WINDOW_COUNTER = defineProtocol({
  script: 'sliding_window_counter',
  operationArg: false,
  operations: { counter: ['operation', 'units', 'limit', 'windowMs', 'subWindows'] },
  reply: DECISION,
});

/** With a region's share, the reply ends with every region's units in the window (include "shares_log"). */
export const SLIDING_WINDOW_LOG = defineProtocol({
  script: 'sliding_window_log',
  operationArg: false,
  operations: { counter: ['operation', 'units', 'limit', 'windowMs', ...LOG_SHARE] },
  optionalArgs: LOG_SHARE,
  reply: { ...DECISION, shares: 'id' },
  optionalFields: 1,
});

export const TOKEN_BUCKET = defineProtocol({ script: 'token_bucket', operationArg: false, operations: { counter: BUCKET }, reply: DECISION });

export const LEAKY_BUCKET = defineProtocol({ script: 'leaky_bucket', operationArg: false, operations: { counter: BUCKET }, reply: DECISION });

/** `check`: 'check' answers as the acquire would be answered now and writes nothing (lua/batch.lua's first step). */
export const CONCURRENCY_ACQUIRE = defineProtocol({
  script: 'concurrency_acquire',
  operationArg: false,
  operations: { acquire: ['slotId', 'maxConcurrency', 'leaseTtlMs', 'check'] },
  reply: ACQUIRE_FIELDS,
});

/** `removed`: the slot was held (read as `allowed`); `retryAfterMs` always 0. */
export const CONCURRENCY_RELEASE = defineProtocol({
  script: 'concurrency_release',
  operationArg: false,
  operations: { release: ['slotId', 'maxConcurrency', 'leaseTtlMs'] },
  reply: { removed: 'flag', remaining: 'number', retryAfterMs: 'number', resetAfterMs: 'number' },
});

/**
 * A lease operation's reply (take, give, reclaim of a rate script; lua/includes/lease.lua): the decision,
 * then what it took or gave back, its window's tag and what is left of that window, the store's clock,
 * the outcome (parent-take-ledger.ts LEASE_OUTCOMES) and the units lapsed; with a region's share of a
 * global budget, the share report last (include "shares").
 */
export const LEASE_REPLY = defineProtocol({
  script: 'includes/lease',
  operationArg: false,
  operations: {},
  reply: { ...ALGORITHM_LEASE_FIELDS, storeNow: 'number', outcome: 'number', lapsed: 'number', shares: 'id' },
  optionalFields: 1,
});

/** Each counter script's protocol, which the loader checks its header against (lua-scripts.ts readScript). */
export const SCRIPT_PROTOCOLS: Readonly<Partial<Record<ScriptName, ProtocolDeclaration<Operations, ReplyFields>>>> = {
  fixed_window: FIXED_WINDOW,
  quota: QUOTA,
  sliding_window_counter: SLIDING_WINDOW_COUNTER,
  sliding_window_log: SLIDING_WINDOW_LOG,
  token_bucket: TOKEN_BUCKET,
  leaky_bucket: LEAKY_BUCKET,
  concurrency_acquire: CONCURRENCY_ACQUIRE,
  concurrency_release: CONCURRENCY_RELEASE,
};

export const COUNTER_PROTOCOLS = [FIXED_WINDOW, QUOTA, SLIDING_WINDOW_COUNTER, SLIDING_WINDOW_LOG, TOKEN_BUCKET, LEAKY_BUCKET, CONCURRENCY_ACQUIRE, CONCURRENCY_RELEASE, LEASE_REPLY] as const;

/** Each reply field's position in the reply array, by its name. */
export function fieldPositions<F extends Readonly<Record<string, unknown>>>(reply: F): { readonly [N in keyof F]: number } {
  const out: Record<string, number> = {};
  Object.keys(reply).forEach((name, i) => (out[name] = i));
  return out as { [N in keyof F]: number };
}

/**
 * Each algorithm's parameters, named as its CounterSpec names them, in the ARGV order its script
 * declares: after the operation and its units (a lease id), before what only some calls send.
 */
const SPEC_PARAMS: { readonly [T in CounterSpec['type']]: readonly string[] } = {
  fixed_window: FIXED_WINDOW.operations.counter.slice(2, 4),
  quota: QUOTA.operations.counter.slice(2, 4),
  sliding_window_counter: SLIDING_WINDOW_COUNTER.operations.counter.slice(2),
  sliding_window_log: SLIDING_WINDOW_LOG.operations.counter.slice(2, 4),
  token_bucket: TOKEN_BUCKET.operations.counter.slice(2),
  leaky_bucket: LEAKY_BUCKET.operations.counter.slice(2),
  concurrency: CONCURRENCY_RELEASE.operations.release.slice(1),
};

/**
 * The spec's parameters as its script reads them (decimal strings; a calendar spec's period pair follows
 * per call, counter-spec.ts calendarParams). Built once per spec (redis-store.ts keeps them).
 */
export function specParams(spec: CounterSpec): string[] {
  return SPEC_PARAMS[spec.type].map((name) => String((spec as unknown as Record<string, number>)[name]));
}
