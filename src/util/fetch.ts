/** Helpers shared by the outgoing HTTP clients (sidecar sync and forwarding, sidecar invalidation). */

/** A short reason for a failed `fetch`: `timeout`, `aborted`, the system error code, or the message. */
export function describeFetchError(error: unknown): string {
  const e = error as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return 'timeout';
  if (e?.name === 'AbortError') return 'aborted';
  return e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(error);
}

/** A URL without any user:password part, for logs. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString().replace(/\/+$/, '');
  } catch {
    return '<invalid url>';
  }
}

/** Timeout signals of the requests in flight (see withTimeout). */
const armedTimeouts = new Set<AbortSignal>();

/**
 * Runs `request` with a signal that aborts after `timeoutMs` or when `cancel` aborts. The timeout
 * signal is held here until the request settles: AbortSignal.any() holds its sources weakly, so a
 * timeout referenced by nothing else can be garbage-collected before it fires (nodejs/node#57736),
 * and a request to a hung peer would then never end.
 */
export async function withTimeout<T>(timeoutMs: number, cancel: AbortSignal, request: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const timeout = AbortSignal.timeout(timeoutMs);
  armedTimeouts.add(timeout);
  try {
    return await request(AbortSignal.any([timeout, cancel]));
  } finally {
    armedTimeouts.delete(timeout);
  }
}
