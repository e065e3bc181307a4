import { LiveMatcher } from '../matching/live-matcher.js';
import type { Policy } from '../policy/types.js';
import { describeFetchError, redactUrl, withTimeout } from '../util/fetch.js';
import { isObject } from '../util/json-shape.js';
import { log } from '../util/log.js';

/**
 * Keeps the agent's copy of the policy set in step with the server's `GET /rl/v1/policies`.
 *
 * - Periodic: every `intervalSecs` after the previous sync finished. After a failure the next attempt
 *   comes sooner (1 s, 2 s, 4 s, … up to the interval), so an agent that starts before its server, or
 *   outlives a restart of it, catches up quickly.
 * - On demand (`sync()`, called for every invalidation): concurrent requests are coalesced: while a
 *   fetch is in flight, any number of new requests share ONE follow-up fetch, started when the current
 *   one ends (the change that triggered them may have been committed after the current fetch was
 *   answered, so they cannot simply share it).
 * - Cheap: the request carries `If-None-Match` with the last ETag; an unchanged set is a 304 with no
 *   body (the server's conditional-get middleware).
 * - Safe: redirects are not followed (the credential stays with the configured upstream), every fetch
 *   has a deadline, and a bad answer keeps the previous policy set.
 */

export interface PolicySyncOptions {
  /** Upstream base URL, no trailing slash. */
  upstream: string;
  /** Credential headers for the upstream. */
  headers?: Record<string, string>;
  intervalSecs: number;
  /** Deadline of one fetch, ms (default 5000). */
  timeoutMs?: number;
  /** The matcher to keep current (default: a new, empty one). */
  matcher?: LiveMatcher;
}

export interface SyncStatus {
  /** When the last sync attempt finished (RFC 3339), or null before the first. */
  last_sync_at: string | null;
  /** Whether it succeeded (false before the first). */
  last_sync_ok: boolean;
  /** When a sync last succeeded, or null. */
  last_success_at: string | null;
  /** Why the last attempt failed (empty when it did not). */
  last_error: string;
  /** Policies in the current set. */
  policies: number;
  /** Whether the set has been fetched at least once. */
  synced: boolean;
}

/** What an invalidation says changed (docs/deployment.md "Keeping policies current": the body of POST /rl/v1/agent/invalidate). */
export interface InvalidationHint {
  policy_id?: unknown;
  change?: unknown;
  version?: unknown;
}

export interface SyncResult {
  ok: boolean;
  /** The set changed (a 200 with a different body). */
  changed: boolean;
  error?: string;
}

const MIN_RETRY_MS = 1000;
/** Re-fetches after an invalidation whose change the upstream did not show yet: 100 ms, 200 ms, … */
const HINT_RETRIES = 6;
const HINT_FIRST_DELAY_MS = 100;

export class PolicySync {
  readonly matcher: LiveMatcher;
  private etag: string | undefined;
  private policies: Policy[] = [];
  private byId = new Map<string, Policy>();
  private lastSyncAt: Date | undefined;
  private lastSuccessAt: Date | undefined;
  private lastOk = false;
  private lastError = '';
  private failures = 0;
  private current: Promise<SyncResult> | undefined;
  private next: Promise<SyncResult> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private started = false;
  private stopped = false;
  private readonly stopping = new AbortController();
  private readonly timeoutMs: number;

  constructor(private readonly options: PolicySyncOptions) {
    this.matcher = options.matcher ?? new LiveMatcher();
    this.timeoutMs = options.timeoutMs ?? 5000;
  }

  get intervalSecs(): number {
    return this.options.intervalSecs;
  }

  status(): SyncStatus {
    return {
      last_sync_at: this.lastSyncAt?.toISOString() ?? null,
      last_sync_ok: this.lastOk,
      last_success_at: this.lastSuccessAt?.toISOString() ?? null,
      last_error: this.lastError,
      policies: this.policies.length,
      synced: this.lastSuccessAt !== undefined,
    };
  }

  /** First sync now, then periodically. Resolves after the first attempt (successful or not). */
  async start(): Promise<SyncResult> {
    this.started = true;
    return this.sync();
  }

  /**
   * Fetches the set now, or, when a fetch is already in flight, once more right after it (shared by
   * every caller that asks meanwhile). Never rejects.
   */
  sync(): Promise<SyncResult> {
    if (this.stopped) return Promise.resolve({ ok: false, changed: false, error: 'stopped' });
    if (!this.current) return this.startRun();
    this.next ??= this.current.then(() => {
      this.next = undefined;
      // A fetch started after this request was made (by someone else) answers it too.
      return this.current ?? this.startRun();
    });
    return this.next;
  }

  private startRun(): Promise<SyncResult> {
    const run = this.run().finally(() => {
      if (this.current === run) this.current = undefined;
    });
    this.current = run;
    return run;
  }

  /**
   * An invalidation: sync now (coalesced). When the hint names a change the fetched set does not show
   * yet, fetch again a few times with a growing delay: the upstream may be another server node than the
   * one that made the change, and learn of it a moment later (pub/sub). Never rejects.
   */
  async invalidate(hint?: InvalidationHint): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const result = await this.sync();
      // A failed fetch is retried by the periodic schedule (with its own back-off), not here.
      if (this.stopped || !result.ok || this.reflects(hint) || attempt + 1 >= HINT_RETRIES) return;
      await new Promise<void>((resolve) => setTimeout(resolve, HINT_FIRST_DELAY_MS * 2 ** attempt).unref());
    }
  }

  /** Does the current set show the change a hint describes? (Unusable hints: yes.) */
  reflects(hint: InvalidationHint | undefined): boolean {
    if (!hint || typeof hint.policy_id !== 'string' || hint.policy_id === '') return true;
    if (typeof hint.version !== 'number' || !Number.isFinite(hint.version)) return true;
    const policy = this.byId.get(hint.policy_id);
    if (hint.change === 'deleted') return !policy || policy.version > hint.version;
    return policy !== undefined && policy.version >= hint.version;
  }

  stop(): void {
    this.stopped = true;
    this.stopping.abort();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async run(): Promise<SyncResult> {
    let result: SyncResult;
    try {
      result = await this.fetchOnce();
    } catch (error) {
      result = { ok: false, changed: false, error: String(error) };
    }
    this.lastSyncAt = new Date();
    this.lastOk = result.ok;
    this.lastError = result.ok ? '' : result.error ?? 'failed';
    if (result.ok) {
      this.lastSuccessAt = this.lastSyncAt;
      if (this.failures > 0) log.info('policy sync restored', { upstream: redactUrl(this.options.upstream), policies: this.policies.length });
      this.failures = 0;
    } else {
      this.failures++;
      // One line per outage, not one per attempt.
      if (this.failures === 1) log.warn('policy sync failed', { upstream: redactUrl(this.options.upstream), error: this.lastError });
    }
    this.schedule();
    return result;
  }

  /** (Re)arms the periodic timer from now: the interval after a success, a shorter back-off after failures. */
  private schedule(): void {
    if (this.stopped || !this.started) return;
    if (this.timer) clearTimeout(this.timer);
    const intervalMs = this.options.intervalSecs * 1000;
    const delay =
      this.failures === 0 ? intervalMs : Math.min(intervalMs, MIN_RETRY_MS * 2 ** Math.min(this.failures - 1, 20));
    this.timer = setTimeout(() => void this.sync(), delay);
    this.timer.unref();
  }

  /** One fetch, bounded by the timeout: a hung upstream must not hold the sync (one at a time) forever. */
  private fetchOnce(): Promise<SyncResult> {
    return withTimeout(this.timeoutMs, this.stopping.signal, (signal) => this.fetchWithin(signal));
  }

  private async fetchWithin(signal: AbortSignal): Promise<SyncResult> {
    const headers: Record<string, string> = { accept: 'application/json', ...this.options.headers };
    if (this.etag) headers['if-none-match'] = this.etag;
    let response: Response;
    try {
      response = await fetch(`${this.options.upstream}/rl/v1/policies`, {
        headers,
        redirect: 'manual',
        signal,
      });
    } catch (error) {
      return { ok: false, changed: false, error: describeFetchError(error) };
    }
    if (response.status === 304) {
      await response.body?.cancel().catch(() => undefined);
      return { ok: true, changed: false };
    }
    if (response.status !== 200) {
      await response.body?.cancel().catch(() => undefined);
      return { ok: false, changed: false, error: `HTTP ${response.status} from GET /rl/v1/policies` };
    }
    let body: unknown;
    try {
      body = await response.json();
    } catch (error) {
      return { ok: false, changed: false, error: `unreadable policy list: ${describeFetchError(error)}` };
    }
    const policies = Array.isArray(body) ? body : isObject(body) && Array.isArray(body.policies) ? body.policies : undefined;
    if (!policies || !policies.every((p) => isObject(p) && typeof p.policy_id === 'string')) {
      return { ok: false, changed: false, error: 'policy list is not an array of policies' };
    }
    // A policy whose version and update time are unchanged keeps its previous object, so `replace` sees
    // only the changed ones by identity and applies them alone instead of rebuilding the matcher.
    this.policies = (policies as Policy[]).map((p) => {
      const held = this.byId.get(p.policy_id);
      return held !== undefined && held.version === p.version && held.updated_at === p.updated_at ? held : p;
    });
    this.byId = new Map(this.policies.map((p) => [p.policy_id, p]));
    this.matcher.replace(this.policies);
    const skipped = this.matcher.current().skipped;
    if (skipped.length > 0) log.warn('policies not usable by this agent', { skipped });
    this.etag = response.headers.get('etag') ?? undefined;
    log.debug('policies synced', { policies: this.policies.length });
    return { ok: true, changed: true };
  }
}
