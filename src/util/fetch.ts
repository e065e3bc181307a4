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
