import type { Readable } from 'node:stream';

/**
 * Calls `onLine` with each complete line `stream` writes (as utf8), and its JSON when the line is JSON:
 * the server's log, one object a line, read while the process runs.
 */
export function onLogLines(stream: Readable, onLine: (line: string, entry: Record<string, unknown> | undefined) => void): void {
  let pending = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    pending += chunk;
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      let entry: Record<string, unknown> | undefined;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        entry = undefined;
      }
      onLine(line, entry);
    }
  });
}
