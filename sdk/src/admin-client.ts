/**
 * Client of the service's management API (policies and their lifecycle, analytics, health), as used by
 * the `rl` command line. Built on the global `fetch` of Node ≥ 20; no dependencies.
 *
 * Every failure is one of two errors, so callers can tell "the server said no" from "no server":
 * - AdminApiError: the server answered with a status ≥ 400 (`status`, the JSON error body, and for a
 *   422 the field errors);
 * - AdminConnectionError: no answer at all (refused, DNS, TLS, timeout), with a short `reason`.
 *
 * Optimistic concurrency: every write takes an optional `ifMatch` version (the `version` a caller read,
 * sent as `If-Match: "N"`), so a change made by someone else in between is a 409, not an overwrite.
 */

// The policy's shape is generated from the server's schema (scripts/generate-policy-types.ts).
import type { AlgorithmFields, FieldProblem, PolicyFields } from './policy-types.generated.js';
// FieldProblem is the server's FieldError (src/schema/errors.ts), generated like the policy's types.
export type { AlgorithmFields, CalendarUnit, FieldProblem, PolicyFields, PolicyLease, PolicyScope } from './policy-types.generated.js';

export interface AdminClientOptions {
  /** Base URL of the service, e.g. `http://127.0.0.1:8080` (a trailing `/` is ignored). */
  url: string;
  /** Sent as `X-Api-Key`. */
  apiKey?: string;
  /** A bearer token (JWT, or an API key), sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** Per-request timeout in milliseconds (default 10,000). */
  timeoutMs?: number;
  /** A `fetch` implementation (default the global one). */
  fetch?: typeof fetch;
}


/**
 * How a calendar policy's period reads, e.g. "per calendar month, Europe/Berlin"; undefined for an
 * algorithm without `calendar`. The CLI and the dashboard show it.
 */
export function calendarPeriodText(algorithm: Pick<AlgorithmFields, 'calendar' | 'timezone'>): string | undefined {
  if (algorithm.calendar === undefined) return undefined;
  return `per calendar ${algorithm.calendar}, ${algorithm.timezone ?? 'UTC'}`;
}

/** A policy's algorithm as the server returns it. */
export interface PolicyAlgorithm extends AlgorithmFields {
  /** fixed_window, sliding_window_log, sliding_window_counter, token_bucket, leaky_bucket, concurrency or quota. */
  type: string;
  [field: string]: unknown;
}

/**
 * A policy as the server stores and returns it. Open-ended (`[field]`) so a newer server's fields
 * pass through a read-modify-write untouched.
 */
export interface StoredPolicy extends PolicyFields {
  algorithm: PolicyAlgorithm;
  [field: string]: unknown;
}

/** A tie with another policy of the same layer, answered by a create, replace or patch (which still stored the policy). */
export interface PolicyWarning {
  /** The other policy of the tie. */
  policy_id: string;
  /** Which of the two wins, and that `priority` settles it. */
  message: string;
}

/** The answer of a create, replace or patch: the stored policy, with `warnings` when it ties another. */
export interface WrittenPolicy extends StoredPolicy {
  warnings?: PolicyWarning[];
}

/** One candidate policy of an explained request (POST /rl/v1/explain). */
export interface ExplainCandidate {
  policy_id: string;
  covers: boolean;
  /** When it does not cover: `scope:<field>`, `match_expr`, `rollout`, `disabled`, `not_valid_now` or `algorithm`. */
  why_not?: string;
  specificity: number;
  priority: number;
  wins: boolean;
}

/** Which policy of each layer would decide a request, and every candidate in winner order. */
export interface Explanation {
  layers: { layer: string; winner: string | null; candidates: ExplainCandidate[] }[];
}

export interface PolicyVersionEntry {
  policy_id: string;
  version: number;
  created_at: string;
  created_at_unix: number;
  snapshot: StoredPolicy;
}

export interface PolicyAuditEntry {
  audit_id: string;
  policy_id: string;
  action_type: string;
  changed_by: string;
  changed_at: string;
  changed_at_unix: number;
  version: number;
  old_value: StoredPolicy | null;
  new_value: StoredPolicy | null;
  /** A rollback only: the version whose content it restored. */
  restored_version?: number;
}

export interface AnalyticsSummaryBody {
  since: string;
  total: number;
  allowed: number;
  denied: number;
  shadow: number;
  by_action: Record<string, number>;
  by_policy: { policy_id: string; total: number; allowed: number; denied: number; shadow: number }[];
  top_tags: { key: string; value: string; count: number }[];
}

/** A probe's answer: reachable, and the status it gave (healthz/readyz answer text or a JSON error). */
export interface ProbeResult {
  status: number;
  ok: boolean;
  body: string;
}

export interface WriteOptions {
  /** The version the change is based on: sent as `If-Match: "N"`; a stale one is a 409. */
  ifMatch?: number;
}

/** The server answered with an error status. */
export class AdminApiError extends Error {
  constructor(
    readonly status: number,
    /** The server's message (`error` of the JSON body), or the raw body text. */
    readonly serverMessage: string,
    /** Field errors of a 422 (`errors` of the body), else empty. */
    readonly fieldErrors: FieldProblem[],
    readonly method: string,
    readonly path: string,
    readonly body: unknown,
  ) {
    super(`${method} ${path}: ${status} ${serverMessage}`);
    this.name = 'AdminApiError';
  }
}

/** No HTTP answer: connection refused, unknown host, TLS failure, timeout. */
export class AdminConnectionError extends Error {
  constructor(
    readonly url: string,
    /** `ECONNREFUSED`, `ENOTFOUND`, `timeout`, … or the underlying message. */
    readonly reason: string,
  ) {
    super(`cannot reach ${url}: ${reason}`);
    this.name = 'AdminConnectionError';
  }
}

export interface AdminClient {
  readonly url: string;
  listPolicies(): Promise<StoredPolicy[]>;
  getPolicy(policyId: string): Promise<StoredPolicy>;
  createPolicy(policy: Record<string, unknown>): Promise<WrittenPolicy>;
  /** PUT: replaces the whole policy. */
  replacePolicy(policyId: string, policy: Record<string, unknown>, options?: WriteOptions): Promise<WrittenPolicy>;
  /** PATCH: a JSON merge patch (RFC 7396). */
  patchPolicy(policyId: string, patch: Record<string, unknown>, options?: WriteOptions): Promise<WrittenPolicy>;
  deletePolicy(policyId: string, options?: WriteOptions): Promise<{ deleted: boolean; policy_id: string }>;
  /** Server-side validation (POST /policies/validate); never changes anything. */
  validatePolicy(policy: unknown): Promise<{ valid: boolean; errors: FieldProblem[] }>;
  versions(policyId: string): Promise<PolicyVersionEntry[]>;
  audit(policyId: string): Promise<PolicyAuditEntry[]>;
  rollout(policyId: string, percent: number, options?: WriteOptions): Promise<StoredPolicy>;
  rollback(policyId: string, version: number, options?: WriteOptions): Promise<StoredPolicy>;
  analyticsSummary(top?: number): Promise<AnalyticsSummaryBody>;
  /**
   * POST /rl/v1/explain: which policy of each layer would decide this request context, and why every other
   * candidate would not; nothing is counted. `decision`: the call explained (default check).
   */
  explain(context: Record<string, unknown>, options?: { decision?: 'check' | 'refund' | 'acquire' | 'release' }): Promise<Explanation>;
  /** GET /healthz and /readyz: never throws AdminApiError (a 503 is an answer), only AdminConnectionError. */
  health(): Promise<ProbeResult>;
  readiness(): Promise<ProbeResult>;
  /** GET /rl/v1/info: version and modes of the server. */
  info(): Promise<Record<string, unknown>>;
  /** Any JSON call under the base URL, for routes without a method here. */
  request<T>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<T>;
}

const API = '/rl/v1';

export function createAdminClient(options: AdminClientOptions): AdminClient {
  const base = options.url.replace(/\/+$/, '');
  const timeoutMs = options.timeoutMs ?? 10_000;
  const doFetch = options.fetch ?? fetch;
  const authHeaders: Record<string, string> = {};
  if (options.apiKey) authHeaders['X-Api-Key'] = options.apiKey;
  if (options.token) authHeaders.Authorization = `Bearer ${options.token}`;

  async function send(method: string, path: string, body: unknown, headers: Record<string, string>): Promise<Response> {
    const init: RequestInit = {
      method,
      headers: { Accept: 'application/json', ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...authHeaders, ...headers },
      signal: AbortSignal.timeout(timeoutMs),
    };
    if (body !== undefined) init.body = JSON.stringify(body);
    try {
      return await doFetch(base + path, init);
    } catch (error) {
      throw new AdminConnectionError(base, describeFailure(error));
    }
  }

  async function request<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    const response = await send(method, path, body, headers);
    const text = await readText(response, base);
    const parsed = parseJson(text);
    if (!response.ok) throw apiError(response.status, text, parsed, method, path);
    if (parsed === undefined) throw new AdminApiError(response.status, `expected a JSON body, got ${JSON.stringify(text.slice(0, 80))}`, [], method, path, text);
    return parsed as T;
  }

  async function probe(path: string): Promise<ProbeResult> {
    const response = await send('GET', path, undefined, {});
    const text = await readText(response, base);
    const parsed = parseJson(text) as { error?: unknown } | undefined;
    const message = typeof parsed?.error === 'string' ? parsed.error : text.trim();
    return { status: response.status, ok: response.ok, body: message };
  }

  const id = (policyId: string): string => `${API}/policies/${encodeURIComponent(policyId)}`;
  const ifMatch = (o?: WriteOptions): Record<string, string> => (o?.ifMatch !== undefined ? { 'If-Match': `"${o.ifMatch}"` } : {});

  return {
    url: base,
    listPolicies: () => request('GET', `${API}/policies`),
    getPolicy: (policyId) => request('GET', id(policyId)),
    createPolicy: (policy) => request('POST', `${API}/policies`, policy),
    replacePolicy: (policyId, policy, o) => request('PUT', id(policyId), policy, ifMatch(o)),
    patchPolicy: (policyId, patch, o) => request('PATCH', id(policyId), patch, { 'Content-Type': 'application/merge-patch+json', ...ifMatch(o) }),
    deletePolicy: (policyId, o) => request('DELETE', id(policyId), undefined, ifMatch(o)),
    validatePolicy: (policy) => request('POST', `${API}/policies/validate`, policy),
    versions: (policyId) => request('GET', `${id(policyId)}/versions`),
    audit: (policyId) => request('GET', `${id(policyId)}/audit`),
    rollout: (policyId, percent, o) => request('POST', `${id(policyId)}/rollout`, { rollout_percent: percent }, ifMatch(o)),
    rollback: (policyId, version, o) => request('POST', `${id(policyId)}/rollback`, { version }, ifMatch(o)),
    analyticsSummary: (top) => request('GET', `${API}/analytics/summary${top !== undefined ? `?top=${top}` : ''}`),
    explain: (context, o) => request('POST', `${API}/explain${o?.decision !== undefined ? `?decision=${o.decision}` : ''}`, context),
    health: () => probe('/healthz'),
    readiness: () => probe('/readyz'),
    info: () => request('GET', `${API}/info`),
    request,
  };
}

async function readText(response: Response, base: string): Promise<string> {
  try {
    return await response.text();
  } catch (error) {
    // The connection broke (or the timeout fired) after the status line arrived.
    throw new AdminConnectionError(base, describeFailure(error));
  }
}

function parseJson(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function apiError(status: number, text: string, parsed: unknown, method: string, path: string): AdminApiError {
  const body = parsed as { error?: unknown; errors?: unknown } | undefined;
  const message = typeof body?.error === 'string' ? body.error : text.trim().slice(0, 200) || `HTTP ${status}`;
  const fieldErrors = Array.isArray(body?.errors)
    ? (body.errors as unknown[]).filter(isFieldProblem)
    : [];
  return new AdminApiError(status, message, fieldErrors, method, path, parsed ?? text);
}

function isFieldProblem(value: unknown): value is FieldProblem {
  const v = value as FieldProblem | null;
  return typeof v === 'object' && v !== null && typeof v.field === 'string' && typeof v.message === 'string';
}

/** `ECONNREFUSED`, `timeout`, … : the most specific reason a fetch failed. */
function describeFailure(error: unknown): string {
  const e = error as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return 'timeout';
  if (e?.name === 'AbortError') return 'aborted';
  return e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(error);
}
