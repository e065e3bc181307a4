/**
 * Policy durations are strings such as `500ms`, `10s`, `1m`, `1h`, `1d` or combinations (`1h30m`).
 * A bare number is rejected on purpose: `60` could mean seconds or milliseconds, and a limiter that
 * guesses wrong is off by a factor of a thousand.
 */
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/y;

/** Parses a duration string into whole milliseconds; returns an error message instead on bad input. */
export function parseDuration(text: unknown): { ms: number } | { error: string } {
  if (typeof text !== 'string' || text.trim() === '') {
    return { error: 'must be a duration string such as "500ms", "10s", "1m", "1h30m"' };
  }
  const s = text.trim();
  let total = 0;
  PART.lastIndex = 0;
  let at = 0;
  while (at < s.length) {
    PART.lastIndex = at;
    const m = PART.exec(s);
    if (!m) return { error: `"${text}" is not a duration (use units ms, s, m, h, d, e.g. "1h30m")` };
    total += Number(m[1]) * UNIT_MS[m[2]];
    at = PART.lastIndex;
  }
  const ms = Math.round(total);
  if (ms <= 0) return { error: `"${text}" must be longer than 0ms` };
  if (!Number.isSafeInteger(ms)) return { error: `"${text}" is too long` };
  return { ms };
}
