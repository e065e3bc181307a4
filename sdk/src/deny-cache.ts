/**
 * The exact local deny cache: a deterministic refusal (deny, drop, drop_low_priority) of `check` for
 * an identical context and quantity is answered here until its `retry_after` has passed, with no
 * network call.
 *
 * Why this is exact, not an approximation: a refused request consumed nothing, so repeating it
 * changes no counter; and other callers can only consume more, never make room sooner, so the
 * service would refuse the same request with the same verdict until `retry_after`. Two things can
 * make room early, and both are handled or bounded: a refund through this client clears the cache,
 * and a refund by another process or a policy edit makes this cache refuse at most until the
 * `retry_after` the service itself announced.
 *
 * Bounded in entries and in bytes (keys are the context's canonical JSON); the oldest entry goes
 * first, and expired entries are dropped when met.
 */
import type { Decision, RequestContext } from './types.js';

export interface DenyCacheOptions {
  /** Most entries kept (default 10,000). */
  maxEntries?: number;
  /** Most bytes of keys and decisions kept, estimated (default 4 MiB). */
  maxBytes?: number;
}

/** Refusals that repeat deterministically for the same input (sample draws and delay do not qualify). */
const CACHEABLE_ACTIONS = new Set(['deny', 'drop', 'drop_low_priority']);
/** A Map entry's bookkeeping and a Decision object, roughly, beside the key's characters. */
const ENTRY_OVERHEAD_BYTES = 400;

interface Entry {
  decision: Decision;
  /** performance.now() when the refusal lapses. */
  until: number;
  bytes: number;
}

export class DenyCache {
  private readonly maxEntries: number;
  private readonly maxBytes: number;
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;

  constructor(options: DenyCacheOptions = {}, private readonly now: () => number = () => performance.now()) {
    this.maxEntries = options.maxEntries ?? 10_000;
    this.maxBytes = options.maxBytes ?? 4 * 1024 * 1024;
    if (!Number.isInteger(this.maxEntries) || this.maxEntries < 1) throw new TypeError(`denyCache.maxEntries: must be a positive integer, got ${this.maxEntries}`);
    if (!Number.isInteger(this.maxBytes) || this.maxBytes < 1) throw new TypeError(`denyCache.maxBytes: must be a positive integer, got ${this.maxBytes}`);
  }

  get size(): number {
    return this.entries.size;
  }

  get byteSize(): number {
    return this.bytes;
  }

  /** The cached refusal for `key`, its `retry_after` and `reset_after` counted down; undefined when none. */
  get(key: string): Decision | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    const left = entry.until - this.now();
    if (left <= 0) {
      this.delete(key, entry);
      return undefined;
    }
    const elapsed = entry.decision.retry_after - left;
    return {
      ...entry.decision,
      retry_after: Math.ceil(left),
      reset_after: Math.max(0, Math.ceil(entry.decision.reset_after - elapsed)),
      metadata: { ...entry.decision.metadata, deny_cache: 'true' },
    };
  }

  /**
   * Remembers `decision` for `key` when it is a deterministic refusal with a retry_after. `askedAt`:
   * when the call was sent. The service decided at or after it, so counting retry_after from there
   * never refuses locally past the moment the service would admit again.
   */
  offer(key: string, decision: Decision, askedAt = this.now()): void {
    if (decision.allowed || decision.shadow_mode || decision.retry_after <= 0 || !CACHEABLE_ACTIONS.has(decision.action)) return;
    const bytes = 2 * key.length + ENTRY_OVERHEAD_BYTES + 2 * JSON.stringify(decision.metadata).length;
    if (bytes > this.maxBytes) return;
    const old = this.entries.get(key);
    if (old) this.delete(key, old);
    while (this.entries.size >= this.maxEntries || this.bytes + bytes > this.maxBytes) this.evictOldest();
    this.entries.set(key, { decision, until: askedAt + decision.retry_after, bytes });
    this.bytes += bytes;
  }

  clear(): void {
    this.entries.clear();
    this.bytes = 0;
  }

  private evictOldest(): void {
    const first = this.entries.entries().next();
    if (first.done) return;
    this.delete(first.value[0], first.value[1]);
  }

  private delete(key: string, entry: Entry): void {
    this.entries.delete(key);
    this.bytes -= entry.bytes;
  }
}

/**
 * The identity of a request for the cache: every field, tags sorted, quantity defaulted, so two
 * contexts that the service cannot tell apart get the same key and no two it can tell apart do.
 */
export function denyCacheKey(ctx: RequestContext): string {
  const fields = Object.keys(ctx)
    .filter((k) => k !== 'tags' && k !== 'quantity' && (ctx as Record<string, unknown>)[k] !== undefined && (ctx as Record<string, unknown>)[k] !== null)
    .sort();
  const parts: unknown[] = [ctx.quantity ?? 1];
  for (const k of fields) parts.push(k, (ctx as Record<string, unknown>)[k]);
  const tags = ctx.tags ?? {};
  for (const k of Object.keys(tags).sort()) parts.push(`#${k}`, tags[k]);
  return JSON.stringify(parts);
}
