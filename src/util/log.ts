/**
 * Structured logs: one JSON object per line on stderr, so log shippers need no parser. Callers pass
 * fields, never credentials; the few places that handle secrets log only their names.
 */
type Level = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };
let threshold: number = ORDER.info;
let silenced = false;

export function setLogLevel(level: Level | 'silent'): void {
  silenced = level === 'silent';
  if (level !== 'silent') threshold = ORDER[level];
}

function write(level: Level, message: string, fields?: Record<string, unknown>): void {
  if (silenced || ORDER[level] < threshold) return;
  process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level, message, ...fields }) + '\n');
}

export const log = {
  debug: (message: string, fields?: Record<string, unknown>) => write('debug', message, fields),
  info: (message: string, fields?: Record<string, unknown>) => write('info', message, fields),
  warn: (message: string, fields?: Record<string, unknown>) => write('warn', message, fields),
  error: (message: string, fields?: Record<string, unknown>) => write('error', message, fields),
};
