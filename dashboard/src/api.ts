import type { FieldProblem } from '@rl/client/admin-client';

/**
 * The public API as the page calls it. The credential lives in sessionStorage only (gone with the tab);
 * a token with two dots is sent as a bearer JWT, anything else as X-Api-Key.
 */
const STORAGE_KEY = 'rl-dashboard-credential';

export function credential(): string | null {
  return sessionStorage.getItem(STORAGE_KEY);
}

export function setCredential(value: string): void {
  sessionStorage.setItem(STORAGE_KEY, value);
}

export function clearCredential(): void {
  sessionStorage.removeItem(STORAGE_KEY);
}

export function authHeaders(): Record<string, string> {
  const c = credential();
  if (!c) return {};
  return /^[\w-]+\.[\w-]+\.[\w-]*$/.test(c) ? { Authorization: `Bearer ${c}` } : { 'X-Api-Key': c };
}

/** A non-2xx answer: the status and the server's JSON error body (`error`, and `errors` on a 422). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: { error?: string; errors?: FieldProblem[]; [more: string]: unknown },
  ) {
    super(body.error ?? `HTTP ${status}`);
  }

  get fieldErrors(): FieldProblem[] {
    return Array.isArray(this.body.errors) ? this.body.errors : [];
  }
}

/** Fired on any 401, so the page returns to the login form. */
export const unauthenticated = new EventTarget();

export async function api<T>(method: string, path: string, options: { body?: unknown; ifMatch?: number; contentType?: string } = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json', ...authHeaders() };
  if (options.body !== undefined) headers['Content-Type'] = options.contentType ?? 'application/json';
  if (options.ifMatch !== undefined) headers['If-Match'] = `"${options.ifMatch}"`;
  const response = await fetch(path, {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    cache: 'no-store',
  });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = { error: text };
  }
  if (!response.ok) {
    if (response.status === 401) unauthenticated.dispatchEvent(new Event('logout'));
    throw new ApiError(response.status, (parsed as ApiError['body']) ?? {});
  }
  return parsed as T;
}

export const policyPath = (id: string, rest = '') => `/rl/v1/policies/${encodeURIComponent(id)}${rest}`;
